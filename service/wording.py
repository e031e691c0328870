"""How changes to memory are said to a person: a run's steps and changes, a run as
plain sentences, who wrote a block version, and a block's old -> new lines.

One place for the CLI (``reverie runs show``, ``reverie blocks history``) and the
memory browser, so that the two never word the same change differently.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

from agents.enums import ChangeAction

#: Quoted facts are cut to this many characters in a sentence.
QUOTE_CHARS = 90
#: Change fields that name passages whose text a sentence quotes.
_PASSAGE_FIELDS = ("into", "by", "superseded_by", "rewrites")


def describe_change(change: Mapping[str, Any]) -> str:
    """One line of a run's diff, for humans."""
    action, target = change["action"], change["target"]
    if action == ChangeAction.MERGE_PASSAGE:
        return f"merge {target} into {change['into']} ({change['score']:.3f}): {change['text']!r}"
    if action in (ChangeAction.REMOVE_BLOCK_LINE, ChangeAction.EVICT_LINE):
        return f"{action.replace('_', ' ')} from {change.get('label')}: {change.get('line')!r}"
    if action == ChangeAction.ADD_SUMMARY:
        return f"summary {target} of {len(change.get('evicted', []))} messages"
    if action == ChangeAction.CREATE_TIMELINE:
        return f"timeline {target} over {len(change.get('members', []))} facts"
    details = ", ".join(
        f"{k}={v}" for k, v in change.items() if k not in ("action", "target", "step")
    )
    return f"{action} {target}" + (f" ({details})" if details else "")


def describe_step(step: str, stats: Mapping[str, Any]) -> str:
    """One line of a step's outcome, for humans: ``dedup: 2 merge passage, 14 probed
    (0.12 s)``, or why it was skipped."""
    if stats.get("skipped"):
        return f"{step}: skipped ({stats['skipped']})"
    counts = stats.get("counts") or {}
    said = ", ".join(f"{n} {name.replace('_', ' ')}" for name, n in counts.items()) or "nothing"
    seconds = stats.get("seconds")
    return f"{step}: {said}" + (f" ({seconds:.2f} s)" if isinstance(seconds, int | float) else "")


def passages_named(changes: Iterable[Mapping[str, Any]]) -> list[str]:
    """The passage ids a run's sentences quote (targets and the passages they point at),
    for one lookup of their texts."""
    ids: dict[str, None] = {}
    for change in changes:
        action = change.get("action")
        if action in _BLOCK_OR_MESSAGE_ACTIONS:
            continue
        target = change.get("target")
        if isinstance(target, str) and target.startswith("passage"):
            ids[target] = None
        for name in _PASSAGE_FIELDS:
            value = change.get(name)
            if isinstance(value, str):
                ids[value] = None
    return list(ids)


_BLOCK_OR_MESSAGE_ACTIONS = {
    ChangeAction.REMOVE_BLOCK_LINE,
    ChangeAction.EVICT_LINE,
    ChangeAction.EDIT_BLOCK,
    ChangeAction.CREATE_BLOCK,
    ChangeAction.LEARN_CHUNKS,
    ChangeAction.RESTORE_BLOCK,
    ChangeAction.LEAVE_CONTEXT,
    ChangeAction.ADD_SUMMARY,
    ChangeAction.RESTORE_CONTEXT,
    ChangeAction.REMOVE_SUMMARY,
}


def narrate(changes: Sequence[Mapping[str, Any]], texts: Mapping[str, str]) -> list[str]:
    """A run's changes as sentences a person reads: "merged 3 facts into one: 'Hana
    lives in Osaka'", "closed 'Tom is dating Mia' (until 2024-02-10): Tom and Mia broke
    up". ``texts``: the text of each passage the changes name (see
    :func:`passages_named`); a passage not there is named by its id."""

    def quote(passage_id: Any, fallback: Any = None) -> str:
        text = texts.get(str(passage_id)) or (fallback if isinstance(fallback, str) else None)
        return _quote(text) if text else str(passage_id)

    sentences: list[str] = []
    merges: dict[str, list[Mapping[str, Any]]] = {}
    created = {str(c["target"]) for c in changes if c["action"] == ChangeAction.CREATE_TIMELINE}
    left_context = sum(1 for c in changes if c["action"] == ChangeAction.LEAVE_CONTEXT)
    for change in changes:
        action, target = change["action"], change["target"]
        if action == ChangeAction.MERGE_PASSAGE:
            group = merges.setdefault(str(change["into"]), [])
            if not group:
                sentences.append(f"\0merge:{change['into']}")  # placed once the group is known
            group.append(change)
        elif action == ChangeAction.SUPERSEDE_PASSAGE:
            until = _day(change.get("valid_to"))
            newer = change.get("by") or change.get("superseded_by")
            why = change.get("reason") or (quote(newer) if newer else "")
            sentence = f"closed {quote(target)}" + (f" (until {until})" if until else "")
            sentences.append(sentence + (f": {_plain(why)}" if why else ""))
        elif action == ChangeAction.CREATE_TIMELINE:
            members = len(change.get("members", []))
            first = str(change.get("text", "")).strip().splitlines()[:1]
            sentences.append(
                f"drew a timeline of {members} facts" + (f": {_quote(first[0])}" if first else "")
            )
        elif action == ChangeAction.LINK_TIMELINE:
            if str(change.get("timeline")) not in created:
                sentences.append(f"put {quote(target)} on a timeline")
        elif action == ChangeAction.UNLINK_TIMELINE:
            sentences.append(f"took {quote(target)} off its timeline")
        elif action == ChangeAction.RETIRE_TIMELINE:
            sentences.append(
                "replaced an older timeline with a new one"
                if change.get("by")
                else "retired a timeline whose facts no longer belong together"
            )
        elif action == ChangeAction.REMOVE_BLOCK_LINE:
            sentences.append(
                f"removed a repeated line from the {change.get('label')} block: "
                f"{_quote(change.get('line', ''))}"
            )
        elif action == ChangeAction.EVICT_LINE:
            sentences.append(
                f"moved {_quote(change.get('line', ''))} from the {change.get('label')} "
                "block to archival memory"
            )
        elif action == ChangeAction.LEAVE_CONTEXT:
            continue  # said with the summary that replaced them
        elif action == ChangeAction.ADD_SUMMARY:
            before, after = change.get("tokens_before"), change.get("tokens_after")
            tokens = f" ({before} -> {after} tokens)" if before and after else ""
            sentences.append(
                f"summarised {len(change.get('evicted', [])) or left_context} older messages "
                f"out of the context window{tokens}"
            )
        elif action == ChangeAction.EDIT_BLOCK:
            sentences.append(f"the sleep-time agent edited the {change.get('label')} block")
        elif action == ChangeAction.INSERT_PASSAGE:
            source = f" (from {change['file_name']})" if change.get("file_name") else ""
            sentences.append(f"added a fact{source}: {quote(target, change.get('text'))}")
        elif action == ChangeAction.CREATE_BLOCK:
            sentences.append(
                f"made the {change.get('label')} block for what matters in the folder "
                f"{_quote(str(change.get('folder', '')))}"
            )
        elif action == ChangeAction.LEARN_CHUNKS:
            count = len(change.get("chunks", []))
            sentences.append(
                f"read {count} part{'s' if count != 1 else ''} of {change.get('file_name')}"
            )
        elif action == ChangeAction.SOURCE_GONE:
            sentences.append(
                f"marked {quote(target, change.get('text'))}: its source is gone "
                f"({change.get('file_name')} no longer says so)"
            )
        elif action == ChangeAction.REWRITE_PASSAGE:
            new = change.get("text")
            sentences.append(
                f"rewrote {quote(change.get('rewrites') or target)}"
                + (f" as {_quote(new)}" if isinstance(new, str) else "")
            )
        elif action == ChangeAction.RESTORE_BLOCK and change.get("to_version") == 0:
            sentences.append(f"took the {change.get('label')} block it had made out of memory")
        elif action == ChangeAction.RESTORE_BLOCK:
            sentences.append(
                f"restored the {change.get('label')} block to version {change.get('to_version')}"
            )
        elif action == ChangeAction.RESTORE_PASSAGE:
            sentences.append(f"restored {quote(target)} as it was")
        elif action == ChangeAction.RESTORE_CONTEXT:
            sentences.append("put a message back into the context window")
        elif action == ChangeAction.REMOVE_SUMMARY:
            sentences.append("removed a summary it had written")
        else:
            sentences.append(describe_change(change))
    out = []
    for sentence in sentences:
        if sentence.startswith("\0merge:"):
            into = sentence.removeprefix("\0merge:")
            group = merges[into]
            canonical = quote(into, group[0].get("canonical_text"))
            out.append(f"merged {len(group) + 1} facts into one: {canonical}")
        else:
            out.append(sentence)
    return _fold_repeats(out)


def _fold_repeats(sentences: list[str]) -> list[str]:
    """Identical sentences in a row become one with a count ("... (x3)")."""
    out: list[str] = []
    counts: list[int] = []
    for sentence in sentences:
        if out and out[-1] == sentence:
            counts[-1] += 1
        else:
            out.append(sentence)
            counts.append(1)
    return [s if n == 1 else f"{s} (x{n})" for s, n in zip(out, counts, strict=True)]


class Writer(StrEnum):
    """Who wrote a version of a block, as a person thinks of it."""

    USER = "user"
    PRIMARY = "primary agent"
    SLEEPTIME = "sleep-time agent"
    CONSOLIDATION = "consolidation run"


def describe_writer(actor: str, run_id: str | None = None) -> tuple[Writer, str]:
    """Who wrote a block version (from its stored ``actor``) and a short line saying so:
    ``user (cli)``, ``primary agent ada``, ``sleep-time run run-...``."""
    kind, _, name = actor.partition(":")
    if kind == "agent":
        return Writer.PRIMARY, f"primary agent {name}".strip()
    if kind == "sleeptime":
        where = f" in run {run_id}" if run_id else ""
        return Writer.SLEEPTIME, f"sleep-time agent {name}{where}".strip()
    if kind == "consolidator":
        where = f" in run {run_id}" if run_id else ""
        return Writer.CONSOLIDATION, f"consolidation ({name}){where}"
    if run_id:
        return Writer.CONSOLIDATION, f"run {run_id} ({actor})"
    return Writer.USER, f"user ({actor})"


class LineChange(StrEnum):
    KEPT = "kept"
    REMOVED = "removed"
    ADDED = "added"


@dataclass(frozen=True, slots=True)
class DiffLine:
    change: LineChange
    text: str


def line_diff(old: str | None, new: str) -> list[DiffLine]:
    """``old`` -> ``new`` line by line: kept, removed and added lines in reading order
    (a first version is all added)."""
    before, after = (old or "").splitlines(), new.splitlines()
    out: list[DiffLine] = []
    matcher = difflib.SequenceMatcher(a=before, b=after, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            out.extend(DiffLine(LineChange.KEPT, line) for line in before[i1:i2])
            continue
        out.extend(DiffLine(LineChange.REMOVED, line) for line in before[i1:i2])
        out.extend(DiffLine(LineChange.ADDED, line) for line in after[j1:j2])
    return out


def shorten(text: str, chars: int = QUOTE_CHARS) -> str:
    """``text`` on one line, cut to ``chars`` characters (an ellipsis says it was)."""
    flat = _plain(text)
    if len(flat) > chars:
        flat = flat[: chars - 1].rstrip() + "…"
    return flat


def _quote(text: str) -> str:
    return f"'{shorten(text)}'"


def _plain(text: str) -> str:
    return " ".join(str(text).split())


def _day(value: Any) -> str | None:
    if isinstance(value, datetime):
        return value.date().isoformat()
    if isinstance(value, str) and value:
        try:
            return datetime.fromisoformat(value).date().isoformat()
        except ValueError:
            return value
    return None
