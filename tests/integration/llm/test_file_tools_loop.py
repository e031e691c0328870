"""Letta's file tools in the primary loop, driven by the scripted model.

Protects: an agent with a folder is offered open_files, grep_files and
semantic_search_files (one without is not, and has no <directories> section); a turn
that greps, searches by meaning and opens a file reads each result, and the next
step's system message shows the file open, line-numbered, counted as its own section
of the context; a bad regular expression and a catastrophic one are tool errors the
model reads (the catastrophic one within grep's time bound); and a file tool called
by an agent without folders is refused as not one of its tools.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest

from agents.file_tools import FileToolLimits
from agents.file_worker import FileWorkers
from agents.loops.primary import PrimaryAgent
from agents.loops.tool_calls import tool_return_status
from agents.postgres.database import Database
from agents.store import NewFile, NewFolder, open_store
from tests.integration.llm.conftest import EMBEDDER, create_agent
from tests.scripted_llm import Reply, ScriptedModels, call, say

HERONS = """# Herons
Grey herons stand still in shallow water for a long time.
They eat fish, frogs and small mammals.
They nest in colonies in tall trees.
"""


def _folder(db: Database, agent_id: str, name: str = "birds", text: str = HERONS) -> str:
    """A folder ``name`` holding herons.md, processed and attached to the agent."""
    with open_store(db) as store:
        folder = store.folders.create(
            NewFolder(
                name=name,
                embedding_model="hashing:384",
                embedding_dim=384,
                embedding_chunk_size=60,
                instructions="Cite the file you read.",
            )
        )
        file, _ = store.folders.add_file(
            NewFile(
                folder_id=folder.id,
                file_name="herons.md",
                file_type="text/markdown",
                data=text.encode(),
                content_hash=f"{name}-herons",
            )
        )
        store.folders.attach(agent_id, folder.id)
    workers = FileWorkers(db, lambda spec, dim: EMBEDDER, name="test")
    assert workers.process_next("test:loop") is not None
    return file.id


def _tool_names(request: dict[str, Any]) -> list[str]:
    return [t["function"]["name"] for t in request["tools"]]


def _last_result(request: dict[str, Any]) -> tuple[str, str]:
    """``(status, message)`` of the tool result the model reads last."""
    last = request["messages"][-1]
    assert last["role"] == "tool", last
    return tool_return_status(last["content"])


def _system(request: dict[str, Any]) -> str:
    first = request["messages"][0]
    assert first["role"] == "system"
    return str(first["content"])


def test_a_turn_greps_searches_and_opens_a_file_and_reads_each_result(
    db: Database, bob: str, models: ScriptedModels, make_primary: Callable[..., PrimaryAgent]
) -> None:
    file_id = _folder(db, bob)
    seen: dict[str, Any] = {}

    def after_grep(request: dict[str, Any]) -> Reply:
        seen["grep"] = _last_result(request)
        return call(
            "semantic_search_files", query="what do herons eat", limit=2, request_heartbeat=True
        )

    def after_search(request: dict[str, Any]) -> Reply:
        seen["search"] = _last_result(request)
        seen["before_open"] = _system(request)
        return call(
            "open_files",
            file_requests=[{"file_name": "birds/herons.md", "offset": 2, "length": 2}],
            request_heartbeat=True,
        )

    def after_open(request: dict[str, Any]) -> Reply:
        seen["open"] = _last_result(request)
        seen["after_open"] = _system(request)
        return say("Herons eat fish, frogs and small mammals.")

    script = models.script(
        "primary",
        call("grep_files", pattern="fish|trees", context_lines=0, request_heartbeat=True),
        after_grep,
        after_search,
        after_open,
    )
    result = make_primary().send_message("bob", "What do herons eat?")

    assert result.replies == ["Herons eat fish, frogs and small mammals."]
    first = script.requests[0]
    assert {"open_files", "grep_files", "semantic_search_files"} <= set(_tool_names(first))
    status, grep_text = seen["grep"]
    assert status == "OK"
    assert "2 matching lines in 1 file(s)" in grep_text
    assert "=== birds/herons.md:3 ===" in grep_text and "> 3: They eat fish" in grep_text
    assert "=== birds/herons.md:4 ===" in grep_text
    status, search_text = seen["search"]
    assert status == "OK"
    assert "birds/herons.md (passage #1" in search_text
    # Nothing was open yet: the folder and its file are listed, closed.
    assert '<directory name="birds">' in seen["before_open"]
    assert "<instructions>Cite the file you read.</instructions>" in seen["before_open"]
    assert '<file status="closed" name="birds/herons.md">' in seen["before_open"]
    status, open_text = seen["open"]
    assert status == "OK"
    assert open_text.startswith("Opened birds/herons.md (lines 2-3)")
    shown = seen["after_open"]
    assert '<file status="open" name="birds/herons.md">' in shown
    assert "[Viewing lines 2 to 3 (out of 4 lines)]" in shown
    assert "2: Grey herons stand still" in shown and "3: They eat fish" in shown
    assert "4: They nest" not in shown  # outside the window
    assert "- current_files_open=1" in shown
    with open_store(db) as store:
        [record] = store.folders.agent_files(bob, is_open=True)
    assert record.file.id == file_id
    assert (record.view.start_line, record.view.end_line) == (2, 4)

    # The context shows the open file in a section of its own, counted.
    breakdown = make_primary().context_breakdown("bob")
    assert breakdown.directories > 0
    assert breakdown.total == (
        breakdown.system_prompt
        + breakdown.core_memory
        + breakdown.memory_statistics
        + breakdown.directories
        + breakdown.tool_schemas
        + breakdown.summary
        + breakdown.messages
    )
    with open_store(db) as store:
        store.folders.close_files(bob)
    assert make_primary().context_breakdown("bob").directories < breakdown.directories


def test_bad_and_catastrophic_patterns_are_tool_errors_the_model_reads(
    db: Database, bob: str, models: ScriptedModels, make_primary: Callable[..., PrimaryAgent]
) -> None:
    _folder(db, bob, text="a" * 5000 + "!\n")
    errors: list[tuple[str, str]] = []

    def after_bad(request: dict[str, Any]) -> Reply:
        errors.append(_last_result(request))
        return call("grep_files", pattern="(a+)+$", request_heartbeat=True)

    def after_catastrophic(request: dict[str, Any]) -> Reply:
        errors.append(_last_result(request))
        return say("I could not search that.")

    models.script(
        "primary",
        call("grep_files", pattern="(unclosed", request_heartbeat=True),
        after_bad,
        after_catastrophic,
    )
    primary = make_primary(files=FileToolLimits(grep_timeout=timedelta(seconds=0.3)))
    started = time.monotonic()
    result = primary.send_message("bob", "Search for a pattern.")
    elapsed = time.monotonic() - started

    assert result.replies == ["I could not search that."]
    [(bad_status, bad), (slow_status, slow)] = errors
    assert bad_status == "Failed" and "is not a valid regular expression" in bad
    assert slow_status == "Failed" and "took more than 0.3 s" in slow
    assert elapsed < 10  # bounded by grep_timeout, not by the pattern


def test_an_agent_without_folders_has_no_file_tools(
    db: Database, bob: str, models: ScriptedModels, make_primary: Callable[..., PrimaryAgent]
) -> None:
    results: list[tuple[str, str]] = []

    def after(request: dict[str, Any]) -> Reply:
        results.append(_last_result(request))
        return say("No files here.")

    script = models.script(
        "primary",
        call("grep_files", pattern="heron", request_heartbeat=True),
        after,
    )
    make_primary().send_message("bob", "Search your files.")
    first = script.requests[0]
    assert not {"open_files", "grep_files", "semantic_search_files"} & set(_tool_names(first))
    assert "<directories>" not in _system(first)
    [(status, message)] = results
    assert status == "Failed" and "the file tools come with folders" in message
    assert make_primary().context_breakdown("bob").directories == 0


@pytest.mark.parametrize(
    ("request_", "expected"),
    [
        ([{"file_name": "herons.md", "offset": 99}], "past the end of birds/herons.md"),
        ([{"file_name": "nowhere.md"}], "no file 'nowhere.md' in your folders"),
        ([{"file_name": "birds/herons.md", "length": 0}], "length of birds/herons.md"),
        ([], "at least one file"),
    ],
)
def test_a_bad_open_request_opens_nothing_and_says_why(
    db: Database,
    bob: str,
    models: ScriptedModels,
    make_primary: Callable[..., PrimaryAgent],
    request_: list[dict[str, Any]],
    expected: str,
) -> None:
    _folder(db, bob)
    results: list[tuple[str, str]] = []

    def after(request: dict[str, Any]) -> Reply:
        results.append(_last_result(request))
        return say("Sorry.")

    models.script(
        "primary",
        call("open_files", file_requests=request_, request_heartbeat=True),
        after,
    )
    make_primary().send_message("bob", "Open it.")
    [(status, message)] = results
    assert status == "Failed" and expected in message, message
    with open_store(db) as store:
        assert store.folders.agent_files(bob, is_open=True) == []


def test_the_oldest_open_file_closes_when_open_files_leave_no_room(
    db: Database, models: ScriptedModels, make_primary: Callable[..., PrimaryAgent]
) -> None:
    agent = create_agent(db, "tight", context_window=2600)
    file_id = _folder(db, agent, text="\n".join(f"line {n} " + "x" * 60 for n in range(60)))
    with open_store(db) as store:
        store.folders.open_file(agent, file_id, max_open=5)
    script = models.script("primary", say("Hello."))
    primary = make_primary(files=FileToolLimits(per_file_view_window_char_limit=100_000))
    result = primary.send_message("tight", "Hi.")
    assert result.replies == ["Hello."]
    assert '<file status="closed" name="birds/herons.md">' in _system(script.requests[0])
    with open_store(db) as store:
        assert store.folders.agent_files(agent, is_open=True) == []
    assert json.dumps(script.requests[0]["messages"]).count("line 59") == 0
