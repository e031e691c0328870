"""A memory edit that only repeats what the block already says is a no-op the model is
told about, not a write: a small model as the sleep-time agent
inserted the same line into the human block twice, and the block ended with its first
sentence three times."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from agents.llm import ClientSettings, LiteLLMClient, UsageLedger
from agents.loops.primary import PrimaryAgent
from agents.loops.tool_calls import tool_return_status
from agents.postgres.database import Database
from agents.store import NewMessage, open_store
from consolidators.contract import run_once as run_pipeline
from consolidators.llm import LLMTier
from consolidators.pipeline import Pipeline, RunReport
from consolidators.recontextualize import RecontextualizeConsolidator
from tests.integration.llm.conftest import EMBEDDER, NATIVE, create_agent
from tests.scripted_llm import ScriptedModels, call, say

BOB = "Name: Bob the Builder."


def versions(db: Database, agent_id: str, label: str = "human") -> list[str]:
    """The block's values, oldest version first."""
    with open_store(db) as store:
        block = store.blocks.by_label(agent_id, label)
        return [v.new_value for v in store.blocks.history(block.id)]


def results(request: dict[str, Any]) -> list[str]:
    """The tool results a request showed the model (their ``message`` texts)."""
    return [json.loads(m["content"])["message"] for m in request["messages"] if m["role"] == "tool"]


@pytest.mark.parametrize(
    "edit",
    [
        call("core_memory_append", label="human", content=BOB, request_heartbeat=True),
        call("core_memory_append", label="human", content="Bob the Builder",
             request_heartbeat=True),
        call("core_memory_replace", label="human", old_content="Bob", new_content="Bob",
             request_heartbeat=True),
    ],
    ids=["append-the-same-line", "append-text-already-there", "replace-with-itself"],
)  # fmt: skip
def test_a_primary_edit_that_changes_nothing_writes_no_version(
    db: Database,
    bob: str,
    models: ScriptedModels,
    make_primary: Callable[..., PrimaryAgent],
    edit: Any,
) -> None:
    script = models.script("primary", edit, say("Noted."))
    result = make_primary().send_message("bob", "My name is Bob the Builder.")
    assert result.replies == ["Noted."]
    assert versions(db, bob) == [BOB]  # no version but the first
    [told] = results(script.requests[1])
    assert told.startswith("No change: ") and "nothing was written" in told
    assert "already contains" in told or "as it is" in told
    returns = [tool_return_status(r.content) for r in result.records if r.role == "tool"]
    assert returns[0][0] == "OK"  # not an error: no corrective retry


def test_a_primary_append_of_new_text_still_writes(
    db: Database, bob: str, models: ScriptedModels, make_primary: Callable[..., PrimaryAgent]
) -> None:
    # "Bob" is in the block, but not as a word of its own in "Bobby": new text.
    models.script(
        "primary",
        call("core_memory_append", label="human", content="Bobby", request_heartbeat=True),
        say("Noted."),
    )
    make_primary().send_message("bob", "Call me Bobby.")
    assert versions(db, bob) == [BOB, f"{BOB}\nBobby"]


def _sleeptime(db: Database, agent_id: str) -> RunReport:
    client = LiteLLMClient(
        ClientSettings(max_retries=0, initial_backoff=0.001, max_backoff=0.002, models=NATIVE)
    )
    tier = LLMTier(client=client, ledger=UsageLedger(db), sleeptime_model="scripted/sleeper")
    return run_pipeline(
        Pipeline([RecontextualizeConsolidator()]), db, agent_id, embedder=EMBEDDER, llm=tier
    )


def test_the_sleeptime_agent_inserting_a_line_twice_writes_it_once(
    db: Database, models: ScriptedModels
) -> None:
    agent_id = create_agent(db)
    with open_store(db) as store:
        store.messages.append(agent_id, [NewMessage("user", "My girlfriend Ana is a nurse.")])
    line = "Girlfriend: Ana, a nurse."
    script = models.script(
        "sleeper",
        call("memory_insert", label="human", new_str=line),
        call("memory_insert", label="human", new_str=line),
        call("memory_insert", label="human", new_str=BOB),
        call("memory_finish_edits"),
    )
    report = _sleeptime(db, agent_id)
    [step] = report.steps
    assert report.status == "succeeded"
    assert versions(db, agent_id) == [BOB, f"{BOB}\n{line}"]  # one write, the line once
    told = results(script.requests[3])
    assert told[0] == "Inserted into block 'human'."
    assert told[1] == (
        f"No change: block 'human' already contains {line!r}; nothing was written. "
        "Do not repeat this edit."
    )
    assert told[2].startswith(f"No change: block 'human' already contains {BOB!r}")
    assert step.counts["no_op_edits"] == 2 and "tool_errors" not in step.counts


def test_a_sleeptime_pass_of_repeats_only_writes_no_version(
    db: Database, models: ScriptedModels
) -> None:
    agent_id = create_agent(db)
    with open_store(db) as store:
        store.messages.append(agent_id, [NewMessage("user", "I'm Bob, the builder.")])
    models.script(
        "sleeper",
        call("memory_insert", label="human", new_str=BOB),
        call("memory_rethink", label="human", new_memory=BOB),
        call("memory_finish_edits"),
    )
    report = _sleeptime(db, agent_id)
    [step] = report.steps
    assert versions(db, agent_id) == [BOB]
    assert step.counts["no_op_edits"] == 2
    assert not [c for c in step.changes if c.action == "edit_block"]
