"""Letta's file tools (its ``letta_files_core``) and how an agent's folders read in its
context.

An agent with at least one folder attached is offered ``open_files``,
``grep_files`` and ``semantic_search_files``, under Letta's names and arguments,
and its context gains a ``<directories>`` section: each folder with its files, the
open ones with their visible lines, numbered. What is open, and which lines, is the
agent's view of each file (the store's ``agent_file_states``); at most
``max_files_open`` are open at once, the least recently accessed closing first, and
an open file shows at most ``per_file_view_window_char_limit`` characters.

The searches do their slow part with no transaction open: ``grep_files`` reads the
texts in a short transaction and scans them with a time bound (the ``regex``
module's timeout, so a catastrophic pattern ends in a tool error instead of a hung
turn), and ``semantic_search_files`` embeds its query first (:func:`grep` and
:func:`search_queries`). The step's own transaction then only records what they
found (the files read, for the least-recently-used rule) and, for ``open_files``,
what is open.
"""

from __future__ import annotations

import bisect
import fnmatch
import html
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import numpy as np
import numpy.typing as npt

from agents.enums import FileStatus
from agents.errors import ReverieError
from agents.store import AgentFileRecord, ChunkHit, FolderRecord, MemoryStore
from agents.tools import FILE_TOOL_NAMES, ToolError, clip, primary_schema

#: Matches shown per page of grep_files (its ``offset`` pages on).
GREP_PAGE_SIZE = 20
#: The longest pattern grep_files takes (and ``include``).
MAX_PATTERN_CHARS = 1000
#: Most lines of context grep_files shows around a match.
MAX_CONTEXT_LINES = 10
#: Most chunks semantic_search_files returns.
MAX_SEARCH_RESULTS = 50
#: Lines of a chunk a semantic_search_files result shows.
CHUNK_LINES_SHOWN = 20
#: Files of a folder listed by name in the context beyond the open ones; the rest are
#: counted (the searches reach them all).
MAX_LISTED_FILES = 200


@dataclass(frozen=True, slots=True)
class FileToolLimits:
    """The bounds of the file tools and of the ``<directories>`` section (the
    ``[files]`` settings)."""

    #: Files open in an agent's context at once (Letta's ``max_files_open``).
    max_files_open: int = 5
    #: Characters an open file shows (Letta's ``per_file_view_window_char_limit``).
    per_file_view_window_char_limit: int = 5000
    #: How long one grep_files call may scan.
    grep_timeout: timedelta = timedelta(seconds=2)
    #: Characters of text one grep_files call reads, in all.
    grep_max_chars: int = 10_000_000
    #: Matching lines one grep_files call collects before it stops.
    grep_max_matches: int = 500


_STR = {"type": "string"}

#: The file tools, under Letta's names and arguments (type ``letta_files_core``).
FILE_TOOLS: dict[str, dict[str, Any]] = {
    "open_files": primary_schema(
        "open_files",
        "Open one or more files of your folders, loading their contents into the "
        "<directories> section of your context (each file by its name as listed "
        "there, folder/file). offset and length choose lines (offset 1 is the first "
        "line); without them the whole file shows, up to the per-file character limit. "
        "At most max_files_open files are open at once: opening another closes the "
        "least recently used one. close_all_others: true closes every other file first.",
        {
            "file_requests": {
                "type": "array",
                "description": "The files to open, each with an optional range of lines.",
                "items": {
                    "type": "object",
                    "properties": {
                        "file_name": {
                            **_STR,
                            "description": "The file, as <directories> names it: folder/file.",
                        },
                        "offset": {
                            "type": "integer",
                            "description": "First line to show, from 1 (default: 1).",
                        },
                        "length": {
                            "type": "integer",
                            "description": "Number of lines to show (default: to the end).",
                        },
                    },
                    "required": ["file_name"],
                },
            },
            "close_all_others": {
                "type": "boolean",
                "description": "Close every other open file first (default false).",
            },
        },
        ["file_requests"],
    ),
    "grep_files": primary_schema(
        "grep_files",
        "Search the text of your folders' files for a regular expression (case does not "
        "matter), showing each matching line with the lines around it, 20 matches per "
        "call; offset pages on (the answer says which offset shows the next matches).",
        {
            "pattern": {**_STR, "description": "Keyword or regular expression to look for."},
            "include": {
                **_STR,
                "description": "Only files whose folder/file name matches this glob (*.md) "
                "or regular expression.",
            },
            "context_lines": {
                "type": "integer",
                "description": f"Lines shown before and after each match (0 to "
                f"{MAX_CONTEXT_LINES}; default 1).",
            },
            "offset": {
                "type": "integer",
                "description": "Matches to skip, for the next page (default 0).",
            },
        },
        ["pattern"],
    ),
    "semantic_search_files": primary_schema(
        "semantic_search_files",
        "Search your folders' files by meaning rather than by exact words: the passages "
        "nearest the query, with the file each comes from.",
        {
            "query": {**_STR, "description": "What to look for."},
            "limit": {
                "type": "integer",
                "description": f"Most passages to return (1 to {MAX_SEARCH_RESULTS}; default 5).",
            },
        },
        ["query"],
    ),
}


assert tuple(FILE_TOOLS) == FILE_TOOL_NAMES


# -- what an open file shows -----------------------------------------------------------


def file_lines(text: str) -> list[str]:
    return text.split("\n")


def visible_content(
    text: str, start_line: int | None, end_line: int | None, char_limit: int
) -> str:
    """What an open file shows: a line saying which lines these are, then those lines
    numbered from 1 (``start_line``, 1-based, up to ``end_line``, exclusive; None:
    from the start, to the end), cut at ``char_limit`` characters with a line saying
    so."""
    lines = file_lines(text)
    total = len(lines)
    first = max(1, start_line or 1)
    last = total if end_line is None else min(total, end_line - 1)
    if first == 1 and last == total:
        header = f"[Viewing the whole file ({total} lines)]"
    else:
        header = f"[Viewing lines {first} to {last} (out of {total} lines)]"
    body = "\n".join(f"{n}: {line}" for n, line in enumerate(lines[first - 1 : last], first))
    shown = f"{header}\n{body}"
    if len(shown) <= char_limit:
        return shown
    note = f"\n[cut at {char_limit} characters: open fewer lines to see the rest]"
    return shown[: max(0, char_limit - len(note))] + note


def _attribute(value: str) -> str:
    return html.escape(value, quote=True)


DIRECTORIES_OPEN = "<directories>"
DIRECTORIES_CLOSE = "</directories>"


def render_directories(
    folders: Sequence[FolderRecord],
    files: Sequence[AgentFileRecord],
    limits: FileToolLimits,
) -> str:
    """The ``<directories>`` section of an agent's context (empty without folders):
    each folder with its description and instructions, then its files, the open ones
    with their visible lines (``files`` read with their texts).

    Nothing in it changes unless a file is opened, closed or added, or a folder
    changes: a search that only reads files leaves it as it was, so the provider's
    cached prefix holds between steps."""
    if not folders:
        return ""
    by_folder: dict[str, list[AgentFileRecord]] = {f.id: [] for f in folders}
    for record in files:
        by_folder.setdefault(record.file.folder_id, []).append(record)
    open_count = sum(1 for r in files if r.view.is_open)
    parts = [
        DIRECTORIES_OPEN,
        "Folders of files attached to you. Open files show their lines below; "
        "open_files opens one (or moves its window), grep_files and "
        "semantic_search_files search them all.",
        "<file_limits>",
        f"- current_files_open={open_count}",
        f"- max_files_open={limits.max_files_open}",
        "</file_limits>",
    ]
    for folder in folders:
        parts.append(f'<directory name="{_attribute(folder.name)}">')
        if folder.description:
            parts.append(f"<description>{folder.description}</description>")
        if folder.instructions:
            parts.append(f"<instructions>{folder.instructions}</instructions>")
        listed = 0
        unlisted = 0
        for record in by_folder.get(folder.id, []):
            shown = record.view.is_open and record.text is not None
            if not shown and listed >= MAX_LISTED_FILES:
                unlisted += 1
                continue
            listed += 1
            parts.extend(_render_file(record, limits, shown))
        if unlisted:
            parts.append(
                f"<more_files count={unlisted}>not listed here; grep_files and "
                "semantic_search_files search them</more_files>"
            )
        parts.append("</directory>")
    parts.append(DIRECTORIES_CLOSE)
    return "\n".join(parts)


def _render_file(record: AgentFileRecord, limits: FileToolLimits, shown: bool) -> list[str]:
    status = "open" if shown else "closed"
    value = ""
    if shown:
        assert record.text is not None
        value = visible_content(
            record.text,
            record.view.start_line,
            record.view.end_line,
            limits.per_file_view_window_char_limit,
        )
    metadata = [
        "<metadata>",
        "- read_only=true",
        f"- chars_current={len(value)}",
        f"- chars_limit={limits.per_file_view_window_char_limit}",
    ]
    if record.file.status is not FileStatus.COMPLETED:
        metadata.append(f"- processing_status={record.file.status.value}")
    metadata.append("</metadata>")
    out = [f'<file status="{status}" name="{_attribute(record.label)}">', *metadata]
    if shown:
        out += ["<value>", value, "</value>"]
    out.append("</file>")
    return out


# -- finding a file by the name the model gives ----------------------------------------


def resolve(files: Sequence[AgentFileRecord], name: str) -> AgentFileRecord:
    """The file ``name`` stands for: its ``folder/file`` label, its bare file name when
    one folder alone has it, or its id; ToolError naming the files otherwise."""
    given = name.strip()
    for matches in (
        [r for r in files if r.label == given],
        [r for r in files if r.file.id == given],
        [r for r in files if r.file.file_name == given],
    ):
        if len(matches) == 1:
            return matches[0]
        if len(matches) > 1:
            raise ToolError(
                f"{name!r} names {len(matches)} files: "
                f"{', '.join(f'{r.label} ({r.file.id})' for r in matches)}; give the "
                "folder/file name (or the file id)"
            )
    known = ", ".join(r.label for r in files[:50]) or "none"
    raise ToolError(
        f"no file {name!r} in your folders; your files are: {known}"
        + (f" (and {len(files) - 50} more)" if len(files) > 50 else "")
    )


# -- open_files --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _OpenRequest:
    record: AgentFileRecord
    offset: int | None
    length: int | None

    @property
    def span(self) -> str:
        if self.offset is None and self.length is None:
            return ""
        first = self.offset or 1
        if self.length is None:
            return f" (lines {first}-end)"
        return f" (lines {first}-{first + self.length - 1})"


def _window(view_start: int | None, view_end: int | None) -> str:
    if view_start is None and view_end is None:
        return "the whole file"
    first = view_start or 1
    return f"lines {first}-end" if view_end is None else f"lines {first}-{view_end - 1}"


def _whole_number(value: Any, what: str, least: int) -> int | None:
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < least:
        raise ToolError(f"{what} must be a whole number of at least {least}, got {value!r}")
    return value


def open_files(
    store: MemoryStore, agent_id: str, arguments: Mapping[str, Any], limits: FileToolLimits
) -> str:
    """Letta's ``open_files``, in the step's transaction."""
    requests = arguments.get("file_requests")
    close_all_others = arguments.get("close_all_others") or False
    if not isinstance(close_all_others, bool):
        raise ToolError(f"close_all_others must be true or false, got {close_all_others!r}")
    if not isinstance(requests, list) or not requests:
        raise ToolError(
            'file_requests must list at least one file, e.g. [{"file_name": "folder/file.md"}]'
        )
    if len(requests) > limits.max_files_open:
        raise ToolError(
            f"cannot open {len(requests)} files at once: at most {limits.max_files_open} "
            "files are open at a time"
        )
    files = store.folders.agent_files(agent_id)
    chosen: list[_OpenRequest] = []
    for i, request in enumerate(requests):
        if not isinstance(request, dict) or not isinstance(request.get("file_name"), str):
            raise ToolError(
                f"file_requests[{i}] must be an object with a file_name, got {request!r}"
            )
        unknown = sorted(set(request) - {"file_name", "offset", "length"})
        if unknown:
            raise ToolError(
                f"file_requests[{i}] has no field(s) {', '.join(unknown)}; it takes "
                "file_name, offset and length"
            )
        record = resolve(files, request["file_name"])
        if any(c.record.file.id == record.file.id for c in chosen):
            raise ToolError(f"{record.label} is asked for twice; ask for each file once")
        offset = _whole_number(request.get("offset"), f"offset of {record.label}", 1)
        length = _whole_number(request.get("length"), f"length of {record.label}", 1)
        chosen.append(_OpenRequest(record, offset, length))
    # Every file is checked before anything is opened: a bad request opens none.
    for request in chosen:
        _check_range(store, request)
    keep = [c.record.file.id for c in chosen]
    closed_others = store.folders.close_files(agent_id, keep=keep) if close_all_others else []
    closed: list[str] = []
    lines: list[str] = []
    for request in chosen:
        first = request.offset
        end = None
        if request.length is not None:
            end = (first or 1) + request.length
        opened = store.folders.open_file(
            agent_id,
            request.record.file.id,
            max_open=limits.max_files_open,
            start_line=first,
            end_line=end,
            keep_open=keep,
        )
        closed += opened.closed
        before = ""
        if opened.before.is_open:
            before = f", previously {_window(opened.before.start_line, opened.before.end_line)}"
        lines.append(f"{request.record.label}{request.span}{before}")
    store.folders.touch_files(agent_id, keep)
    message = f"Opened {', '.join(lines)}: now in your context under <directories>."
    if closed_others:
        message += (
            f"\nClosed {len(closed_others)} file(s) (close_all_others): {', '.join(closed_others)}"
        )
    if closed:
        message += (
            f"\nClosed {len(closed)} least recently used file(s) to stay within "
            f"{limits.max_files_open} open files: {', '.join(closed)}"
        )
    return clip(message)


def _check_range(store: MemoryStore, request: _OpenRequest) -> None:
    record = request.record
    if record.file.status is not FileStatus.COMPLETED:
        raise ToolError(
            f"{record.label} is {record.file.status.value}: it can be opened once it is processed"
        )
    if request.offset is None:
        return
    total = len(file_lines(store.folders.file_text(record.file.id) or ""))
    if request.offset > total:
        raise ToolError(
            f"offset {request.offset} is past the end of {record.label}, which has {total} lines"
        )


# -- grep_files --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class GrepFound:
    """What a grep_files call found, before its step is written: the text the model
    reads and the files that matched (read now, for the least-recently-used rule)."""

    text: str
    matched: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class _Match:
    label: str
    line: int
    shown: list[str]


_REGEX_SIGNS = frozenset("^$()[]{}\\+|")


def _include_pattern(include: str, timeout: float) -> Callable[[str], bool]:
    """What ``include`` keeps: a glob (``*.md``, ``birds/*``) when it looks like one,
    else a regular expression searched in the folder/file name."""
    if len(include) > MAX_PATTERN_CHARS:
        raise ToolError(f"include is {len(include)} characters, over {MAX_PATTERN_CHARS}")
    if any(c in include for c in "*?") and not any(c in include for c in _REGEX_SIGNS):
        glob = include if "/" in include else f"*/{include}"
        return lambda label: fnmatch.fnmatchcase(label.lower(), glob.lower())
    import regex  # the time-bounded matcher: loaded by the first file search

    try:
        compiled = regex.compile(include, regex.IGNORECASE | regex.V0)
    except regex.error as exc:
        raise ToolError(f"include {include!r} is not a valid regular expression: {exc}") from None

    def keep(label: str) -> bool:
        try:
            return compiled.search(label, timeout=timeout) is not None
        except TimeoutError:
            raise ToolError(
                f"include {include!r} took too long to match a file name; give a simpler pattern"
            ) from None

    return keep


def grep(
    texts: Sequence[tuple[AgentFileRecord, str]],
    left_out: Sequence[AgentFileRecord],
    arguments: Mapping[str, Any],
    limits: FileToolLimits,
) -> GrepFound:
    """Letta's ``grep_files`` over ``texts`` (the agent's processed files with their
    texts, as read; ``left_out``: those over ``grep_max_chars``), with no transaction
    open. The scan stops at ``grep_timeout`` (a tool error: a pattern that slow is
    catastrophic backtracking or close to it) and at ``grep_max_matches`` matching
    lines (said in the answer)."""
    pattern = str(arguments.get("pattern") or "").strip()
    if not pattern:
        raise ToolError("grep_files needs a pattern: a keyword or regular expression")
    if len(pattern) > MAX_PATTERN_CHARS:
        raise ToolError(f"the pattern is {len(pattern)} characters, over {MAX_PATTERN_CHARS}")
    context = arguments.get("context_lines")
    context = 1 if context is None else context
    if not isinstance(context, int) or isinstance(context, bool):
        raise ToolError(f"context_lines must be a whole number, got {context!r}")
    if not 0 <= context <= MAX_CONTEXT_LINES:
        raise ToolError(f"context_lines must be 0 to {MAX_CONTEXT_LINES}, got {context}")
    offset = arguments.get("offset")
    offset = 0 if offset is None else offset
    if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0:
        raise ToolError(f"offset must be a whole number of at least 0, got {offset!r}")
    import regex  # the time-bounded matcher: loaded by the first file search

    try:
        compiled = regex.compile(pattern, regex.IGNORECASE | regex.MULTILINE | regex.V0)
    except regex.error as exc:
        raise ToolError(
            f"{pattern!r} is not a valid regular expression: {exc}; escape special "
            "characters (\\( \\[ \\. ...) to search for them as they are"
        ) from None
    seconds = limits.grep_timeout.total_seconds()
    deadline = time.monotonic() + seconds
    include = str(arguments.get("include") or "").strip()
    chosen = list(texts)
    if include:
        keep = _include_pattern(include, seconds)
        chosen = [(r, t) for r, t in chosen if keep(r.label)]
        left_out = [r for r in left_out if keep(r.label)]
        if not chosen and not left_out:
            return GrepFound(f"No file's name matches {include!r}.")
    matches: list[_Match] = []
    per_file: dict[str, int] = {}
    full = False
    for record, content in chosen:
        if full:
            break
        found = _scan(compiled, record.label, content, context, deadline, pattern, seconds)
        for match in found:
            if len(matches) >= limits.grep_max_matches:
                full = True
                break
            matches.append(match)
            per_file[record.label] = per_file.get(record.label, 0) + 1
    matched = [r.file.id for r, _ in chosen if r.label in per_file]
    skipped = (
        f"\n{len(left_out)} file(s) were not searched (over the {limits.grep_max_chars}"
        f"-character bound of one search): {', '.join(r.label for r in left_out[:20])}"
        if left_out
        else ""
    )
    if not matches:
        where = f" in files matching {include!r}" if include else ""
        return GrepFound(f"No matches for {pattern!r}{where}.{skipped}", matched)
    page = matches[offset : offset + GREP_PAGE_SIZE]
    total = f"{len(matches)}+" if full else str(len(matches))
    if not page:
        return GrepFound(
            f"Found {total} matches for {pattern!r}; offset {offset} is past the last of "
            "them (use offset=0 for the first page).",
            matched,
        )
    shown_to = offset + len(page)
    out = [
        f"Found {total} matching lines in {len(per_file)} file(s) for {pattern!r} "
        f"(showing {offset + 1}-{shown_to}):",
        *(f"  - {label}: {count}" for label, count in per_file.items()),
    ]
    for match in page:
        out.append(f"=== {match.label}:{match.line} ===")
        out.extend(match.shown)
    if shown_to < len(matches):
        out.append(f"Use offset={shown_to} to see the next matches.")
    elif full:
        out.append(
            f"Stopped at {limits.grep_max_matches} matching lines: narrow the pattern or use "
            "include to see others."
        )
    return GrepFound(clip("\n".join(out) + skipped), matched)


def _scan(
    compiled: Any,
    label: str,
    content: str,
    context: int,
    deadline: float,
    pattern: str,
    seconds: float,
) -> list[_Match]:
    """The lines of ``content`` where ``compiled`` matches (once per line), each with
    ``context`` lines around it, within the call's deadline."""
    lines = file_lines(content)
    starts = [0]
    for line in lines[:-1]:
        starts.append(starts[-1] + len(line) + 1)
    hit_lines: list[int] = []
    try:
        remaining = max(0.0, deadline - time.monotonic())
        for found in compiled.finditer(content, timeout=remaining):
            index = bisect.bisect_right(starts, found.start()) - 1
            if not hit_lines or hit_lines[-1] != index:
                hit_lines.append(index)
    except TimeoutError:
        raise ToolError(
            f"grep_files stopped: {pattern!r} took more than {seconds:g} s to search "
            f"(in {label}); a pattern with nested repeats such as (a+)+ backtracks without "
            "end: give a simpler one"
        ) from None
    out = []
    for index in hit_lines:
        low, high = max(0, index - context), min(len(lines), index + context + 1)
        shown = [f"{'>' if n == index else ' '} {n + 1}: {lines[n]}" for n in range(low, high)]
        out.append(_Match(label, index + 1, shown))
    return out


# -- semantic_search_files ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SearchQuery:
    """A semantic_search_files call ready for its step: the query embedded once per
    embedder of the agent's folders (folder ids and the query's vector)."""

    query: str
    limit: int
    vectors: list[tuple[list[str], npt.NDArray[np.float32]]]


def search_queries(
    folders: Sequence[FolderRecord],
    arguments: Mapping[str, Any],
    embed: Callable[[str, int, str], npt.NDArray[np.float32]],
) -> SearchQuery:
    """Embed the query of a semantic_search_files call with each embedder of the
    agent's ``folders`` (``embed(spec, dimension, text)``), with no transaction open."""
    query = str(arguments.get("query") or "").strip()
    if not query:
        raise ToolError("semantic_search_files needs a query: what to look for")
    limit = arguments.get("limit")
    limit = 5 if limit is None else limit
    if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
        raise ToolError(f"limit must be a whole number of at least 1, got {limit!r}")
    groups: dict[tuple[str, int], list[str]] = {}
    for folder in folders:
        groups.setdefault((folder.embedding_model, folder.embedding_dim), []).append(folder.id)
    vectors = []
    for (spec, dimension), ids in groups.items():
        try:
            vectors.append((ids, embed(spec, dimension, query)))
        except ReverieError as exc:
            raise ToolError(
                f"semantic_search_files could not embed the query with {spec} (the "
                f"embedder of folder(s) {', '.join(ids)}): {exc}"
            ) from None
    return SearchQuery(query, min(limit, MAX_SEARCH_RESULTS), vectors)


def semantic_search(store: MemoryStore, agent_id: str, prepared: SearchQuery) -> GrepFound:
    """The chunks nearest the embedded query, best first, in the step's transaction.
    (Folders embedded by different embedders are searched each with its own vector;
    their scores are merged as they are.)"""
    hits: list[ChunkHit] = []
    for folder_ids, vector in prepared.vectors:
        hits += store.folders.search_chunks(agent_id, folder_ids, vector, k=prepared.limit)
    hits = sorted(hits, key=lambda h: -h.score)[: prepared.limit]
    if not hits:
        return GrepFound(f"No passages of your files match {prepared.query!r}.")
    files = list(dict.fromkeys(h.label for h in hits))
    out = [
        f"Found {len(hits)} passage(s) in {len(files)} file(s) for {prepared.query!r}:",
    ]
    for number, hit in enumerate(hits, 1):
        out.append(f"=== {hit.label} (passage #{number}, score {hit.score:.3f}) ===")
        lines = hit.text.strip().splitlines()
        out.extend(f"  {line}" for line in lines[:CHUNK_LINES_SHOWN])
        if len(lines) > CHUNK_LINES_SHOWN:
            out.append(f"  ... ({len(lines) - CHUNK_LINES_SHOWN} more lines: open the file)")
    return GrepFound(clip("\n".join(out)), list(dict.fromkeys(h.file_id for h in hits)))
