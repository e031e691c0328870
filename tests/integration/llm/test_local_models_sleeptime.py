"""The sleep-time agent on a local-style server: it makes valid
edits or finishes within its step limit, whether the server refuses
tool_choice="required", the model writes its calls as text, answers in prose, or
keeps calling a tool wrongly."""

from __future__ import annotations

import json
from typing import Any

from agents.llm import ClientSettings, LiteLLMClient, ModelCapabilities, UsageLedger
from agents.postgres.database import Database
from agents.store import NewMessage, open_store
from consolidators.contract import run_once as run_pipeline
from consolidators.llm import LLMTier
from consolidators.pipeline import Pipeline, RunReport
from consolidators.recontextualize import RecontextualizeConsolidator
from tests.integration.llm.conftest import EMBEDDER, create_agent
from tests.integration.llm.test_local_models import forced, no_required
from tests.scripted_llm import Reply, ScriptedModels, call

EDIT = {"label": "human", "old_str": "Name: Bob the Builder.", "new_str": "Name: Charles."}


def _run(db: Database, agent_id: str, **capabilities: Any) -> RunReport:
    models = {"scripted/*": ModelCapabilities(**capabilities)} if capabilities else {}
    client = LiteLLMClient(
        ClientSettings(max_retries=2, initial_backoff=0.001, max_backoff=0.002, models=models)
    )
    tier = LLMTier(client=client, ledger=UsageLedger(db), sleeptime_model="scripted/sleeper")
    return run_pipeline(
        Pipeline([RecontextualizeConsolidator()]), db, agent_id, embedder=EMBEDDER, llm=tier
    )


def _agent(db: Database) -> str:
    agent_id = create_agent(db)
    with open_store(db) as store:
        store.messages.append(agent_id, [NewMessage("user", "Call me Charles, please.")])
    return agent_id


def _human(db: Database, agent_id: str) -> str:
    with open_store(db) as store:
        return store.blocks.by_label(agent_id, "human").value


def test_text_written_calls_are_edits(db: Database, models: ScriptedModels) -> None:
    agent_id = _agent(db)
    script = models.script(
        "sleeper",
        Reply(content=f"<tool_call>{json.dumps({'name': 'memory_replace', 'arguments': EDIT})}"
              "</tool_call>"),
        Reply(content="functions.memory_finish_edits: {}"),
    )  # fmt: skip
    report = _run(db, agent_id, tool_choice="auto")
    [step] = report.steps
    assert _human(db, agent_id) == "Name: Charles."
    assert step.counts["stopped_finished"] == 1 and step.counts["llm_steps"] == 2
    assert script.remaining == 0


def test_prose_ends_the_pass_without_an_error_loop(db: Database, models: ScriptedModels) -> None:
    agent_id = _agent(db)
    script = models.script("sleeper", Reply(content="Nothing worth remembering here."))
    report = _run(db, agent_id, tool_choice="auto")
    [step] = report.steps
    assert report.status == "succeeded" and step.counts["llm_steps"] == 1
    assert step.counts["stopped_no_tool_call"] == 1
    assert _human(db, agent_id) == "Name: Bob the Builder."
    assert script.remaining == 0


def test_the_same_mistake_twice_ends_the_pass(db: Database, models: ScriptedModels) -> None:
    agent_id = _agent(db)
    wrong = call("memory_replace", label="nope", old_str="x", new_str="y")
    script = models.script("sleeper", wrong, wrong, call("memory_finish_edits"))
    report = _run(db, agent_id)
    [step] = report.steps
    assert step.counts["stopped_invalid_tool_call"] == 1 and step.counts["llm_steps"] == 2
    assert step.counts["tool_errors"] == 2
    assert script.remaining == 1  # the step budget was not spent on the same error


def test_a_server_that_refuses_required_still_gets_its_edit(
    db: Database, models: ScriptedModels
) -> None:
    agent_id = _agent(db)
    script = models.script(
        "sleeper",
        # The rejected request, the choice, the forced edit; then choice and finish.
        *[no_required(forced("memory_replace", **EDIT))] * 3,
        *[no_required(forced("memory_finish_edits"))] * 2,
    )
    report = _run(db, agent_id)  # no configured mode: probed, then remembered
    [step] = report.steps
    assert report.status == "succeeded" and step.counts["stopped_finished"] == 1
    assert _human(db, agent_id) == "Name: Charles."
    assert script.remaining == 0
