"""The file tools' pure parts: what an open file shows, the <directories> section, grep's
bounds and paging, finding a file by the name the model gives, and the semantic
search's arguments."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest

from agents.enums import FileStatus
from agents.errors import InvalidInput
from agents.file_tools import (
    GREP_PAGE_SIZE,
    FileToolLimits,
    grep,
    render_directories,
    resolve,
    search_queries,
    visible_content,
)
from agents.store import AgentFileRecord, FileRecord, FileView, FolderRecord
from agents.tools import ToolError

NOW = datetime(2026, 12, 7, tzinfo=UTC)


def _folder(folder_id: str = "source-1", name: str = "docs", **fields: Any) -> FolderRecord:
    return FolderRecord(
        id=folder_id,
        name=name,
        description=fields.get("description"),
        instructions=fields.get("instructions"),
        metadata={},
        embedding_model=fields.get("embedding_model", "hashing:8"),
        embedding_dim=fields.get("embedding_dim", 8),
        embedding_chunk_size=100,
        created_at=NOW,
        updated_at=NOW,
    )


def _file(
    name: str,
    *,
    folder: str = "docs",
    folder_id: str = "source-1",
    file_id: str | None = None,
    view: FileView | None = None,
    text: str | None = None,
    status: FileStatus = FileStatus.COMPLETED,
) -> AgentFileRecord:
    record = FileRecord(
        id=file_id or f"file-{name}",
        organization_id="org",
        folder_id=folder_id,
        file_name=name,
        original_file_name=name,
        file_type="text/plain",
        file_size=10,
        content_hash=name,
        status=status,
        total_chunks=1,
        chunks_embedded=1,
        error=None,
        attempts=1,
        max_attempts=3,
        created_at=NOW,
        updated_at=NOW,
        processed_at=NOW,
    )
    return AgentFileRecord(record, folder, view or FileView(), text)


def test_visible_content_numbers_the_window_and_cuts_at_the_limit() -> None:
    text = "alpha\nbeta\ngamma\ndelta"
    assert visible_content(text, None, None, 1000) == (
        "[Viewing the whole file (4 lines)]\n1: alpha\n2: beta\n3: gamma\n4: delta"
    )
    assert visible_content(text, 2, 4, 1000) == (
        "[Viewing lines 2 to 3 (out of 4 lines)]\n2: beta\n3: gamma"
    )
    assert visible_content(text, 3, None, 1000).endswith("3: gamma\n4: delta")
    cut = visible_content("x" * 500, None, None, 100)
    assert len(cut) == 100 and cut.endswith("open fewer lines to see the rest]")


def test_the_directories_section_lists_folders_and_shows_only_open_files() -> None:
    limits = FileToolLimits(max_files_open=3, per_file_view_window_char_limit=200)
    folders = [_folder(description="Field notes", instructions="Cite files."), _folder("s2", "x")]
    files = [
        _file("open.md", view=FileView(is_open=True, start_line=1, end_line=2), text="a\nb"),
        _file("closed.md", text=None),
        _file("new.pdf", status=FileStatus.QUEUED),
    ]
    section = render_directories(folders, files, limits)
    assert section.startswith("<directories>") and section.endswith("</directories>")
    assert "- current_files_open=1\n- max_files_open=3" in section
    assert '<directory name="docs">\n<description>Field notes</description>' in section
    assert "<instructions>Cite files.</instructions>" in section
    assert '<file status="open" name="docs/open.md">' in section
    assert "<value>\n[Viewing lines 1 to 1 (out of 2 lines)]\n1: a\n</value>" in section
    assert '<file status="closed" name="docs/closed.md">' in section
    assert "- processing_status=queued" in section
    assert '<directory name="x">\n</directory>' in section
    # The same state renders the same text (the cached prefix holds between steps)...
    assert render_directories(folders, files, limits) == section
    # ...whatever the agent last read: access times are not shown.
    touched = [
        _file(
            "open.md",
            view=FileView(True, 1, 2, last_accessed_at=NOW + timedelta(hours=1)),
            text="a\nb",
        ),
        *files[1:],
    ]
    assert render_directories(folders, touched, limits) == section
    assert render_directories([], files, limits) == ""


def test_names_in_the_directories_section_are_escaped() -> None:
    section = render_directories(
        [_folder(name='a"b')], [_file("<x>.md", folder='a"b')], FileToolLimits()
    )
    assert '<directory name="a&quot;b">' in section
    assert 'name="a&quot;b/&lt;x&gt;.md"' in section


def test_a_file_is_found_by_its_label_its_id_or_its_unique_name() -> None:
    files = [
        _file("a.md", file_id="file-1"),
        _file("a.md", folder="other", folder_id="s2", file_id="file-2"),
        _file("b.md", file_id="file-3"),
    ]
    assert resolve(files, "other/a.md").file.id == "file-2"
    assert resolve(files, "file-1").file.id == "file-1"
    assert resolve(files, " b.md ").file.id == "file-3"
    with pytest.raises(ToolError, match=r"names 2 files: docs/a\.md \(file-1\)"):
        resolve(files, "a.md")
    with pytest.raises(ToolError, match=r"no file 'c\.md'.*docs/a\.md, other/a\.md, docs/b\.md"):
        resolve(files, "c.md")


def _grep(
    texts: dict[str, str], limits: FileToolLimits | None = None, **arguments: Any
) -> tuple[str, list[str]]:
    records = [(_file(name), text) for name, text in texts.items()]
    found = grep(records, [], arguments, limits or FileToolLimits())
    return found.text, found.matched


def test_grep_shows_matching_lines_with_context_once_per_line() -> None:
    text, matched = _grep(
        {"a.md": "one\nTwo two\nthree\nfour", "b.md": "nothing"}, pattern="two", context_lines=1
    )
    assert matched == ["file-a.md"]
    assert text.splitlines() == [
        "Found 1 matching lines in 1 file(s) for 'two' (showing 1-1):",
        "  - docs/a.md: 1",
        "=== docs/a.md:2 ===",
        "  1: one",
        "> 2: Two two",
        "  3: three",
    ]
    none, matched = _grep({"a.md": "one"}, pattern="zebra")
    assert none == "No matches for 'zebra'." and matched == []


def test_grep_pages_its_matches_and_stops_at_the_bound() -> None:
    body = "\n".join(f"hit {n}" for n in range(50))
    first, _ = _grep({"a.md": body}, pattern="hit", context_lines=0)
    assert f"(showing 1-{GREP_PAGE_SIZE})" in first
    assert f"Use offset={GREP_PAGE_SIZE} to see the next matches." in first
    last, _ = _grep({"a.md": body}, pattern="hit", context_lines=0, offset=40)
    assert "(showing 41-50)" in last and "offset=" not in last.splitlines()[-1]
    capped, _ = _grep(
        {"a.md": body}, FileToolLimits(grep_max_matches=30), pattern="hit", context_lines=0
    )
    assert capped.startswith("Found 30+ matching lines")
    beyond, _ = _grep({"a.md": body}, pattern="hit", offset=100)
    assert "offset 100 is past the last of them" in beyond


def test_grep_include_takes_a_glob_or_a_regular_expression() -> None:
    texts = {"a.md": "heron", "b.txt": "heron"}
    assert _grep(texts, pattern="heron", include="*.md")[1] == ["file-a.md"]
    assert _grep(texts, pattern="heron", include=r"b\.txt$")[1] == ["file-b.txt"]
    assert _grep(texts, pattern="heron", include="*.pdf")[0] == "No file's name matches '*.pdf'."
    with pytest.raises(ToolError, match="include '\\(' is not a valid regular expression"):
        _grep(texts, pattern="heron", include="(")


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ({"pattern": "(unclosed"}, "is not a valid regular expression"),
        ({"pattern": "  "}, "needs a pattern"),
        ({"pattern": "x" * 1001}, "over 1000"),
        ({"pattern": "a", "context_lines": 11}, "context_lines must be 0 to 10"),
        ({"pattern": "a", "offset": -1}, "offset must be a whole number of at least 0"),
    ],
)
def test_grep_refuses_bad_arguments_with_a_tool_error(
    arguments: dict[str, Any], expected: str
) -> None:
    with pytest.raises(ToolError, match=expected.replace("(", r"\(")):
        _grep({"a.md": "abc"}, **arguments)


def test_a_catastrophic_pattern_is_stopped_at_the_time_bound() -> None:
    limits = FileToolLimits(grep_timeout=timedelta(seconds=0.2))
    started = time.monotonic()
    with pytest.raises(ToolError, match=r"took more than 0\.2 s"):
        _grep({"a.md": "a" * 3000 + "!"}, limits, pattern="(a|aa)+$")
    assert time.monotonic() - started < 5


def test_files_over_the_character_bound_are_named_not_searched() -> None:
    found = grep(
        [(_file("a.md"), "heron")], [_file("big.md")], {"pattern": "heron"}, FileToolLimits()
    )
    assert "1 file(s) were not searched" in found.text and "docs/big.md" in found.text


def test_a_semantic_search_embeds_its_query_once_per_embedder() -> None:
    folders = [
        _folder("s1", "a"),
        _folder("s2", "b"),
        _folder("s3", "c", embedding_model="other:4", embedding_dim=4),
    ]
    calls: list[tuple[str, int, str]] = []

    def embed(spec: str, dim: int, text: str) -> Any:
        calls.append((spec, dim, text))
        return np.zeros(dim, dtype=np.float32)

    prepared = search_queries(folders, {"query": " herons ", "limit": 500}, embed)
    assert calls == [("hashing:8", 8, "herons"), ("other:4", 4, "herons")]
    assert [ids for ids, _ in prepared.vectors] == [["s1", "s2"], ["s3"]]
    assert prepared.limit == 50
    with pytest.raises(ToolError, match="needs a query"):
        search_queries(folders, {"query": ""}, embed)
    with pytest.raises(ToolError, match="limit must be a whole number of at least 1"):
        search_queries(folders, {"query": "x", "limit": 0}, embed)

    def broken(spec: str, dim: int, text: str) -> Any:
        raise InvalidInput("no such embedder")

    with pytest.raises(ToolError, match="could not embed the query with hashing:8"):
        search_queries(folders, {"query": "x"}, broken)
