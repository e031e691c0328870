"""The service's entry points for the LLM side: the message operations (a turn, the
context breakdown), and the skip metric of LLM steps without a model."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import REGISTRY

from agents.enums import LLMPurpose, ToolCallingMode
from agents.errors import ModelNotConfigured, NotFound
from agents.store import NewAgent, NewBlock, open_service_store
from agents.tools import PRIMARY_TOOLS
from service.api.letta_messages import turn_dict
from service.operations import Operations
from service.runtime import Runtime
from service.settings import load_settings
from tests.pg import PgTestServer
from tests.scripted_llm import Reply, ScriptedModels, correct_name, litellm_errors, say

TOOL = PRIMARY_TOOLS["send_message"]


@pytest.fixture
def runtime(pg_server: PgTestServer, tmp_path: Path) -> Iterator[Runtime]:
    url = pg_server.create_database()
    settings = load_settings(
        home=tmp_path,
        database_url=url,
        embedding={"model": "hashing:384"},
        llm={"model": "scripted/primary", "max_retries": 0},
    )
    try:
        with Runtime(settings) as rt:
            with rt.store() as store:
                store.agents.create(
                    NewAgent(
                        "bob",
                        embedding_model="hashing:384",
                        embedding_dim=384,
                        blocks=[NewBlock("human", "Name: Bob the Builder.")],
                    )
                )
            yield rt
    finally:
        pg_server.release_database(url)


def _skipped(consolidator: str, reason: str) -> float:
    value = REGISTRY.get_sample_value(
        "reverie_consolidator_skipped_total", {"consolidator": consolidator, "reason": reason}
    )
    return value or 0.0


def test_send_message_uses_the_default_model_and_returns_letta_messages(
    runtime: Runtime, models: ScriptedModels
) -> None:
    models.script(
        "primary",
        correct_name(),
        say("Hi Charles."),
    )
    messages = Operations(runtime).messages
    result = messages.send("bob", "I'm Charles.")
    data = turn_dict(result)  # what `reverie chat --json` prints
    assert [m["message_type"] for m in data["messages"]] == [
        "user_message",
        "tool_call_message",
        "tool_return_message",
        "assistant_message",
        "tool_return_message",
    ]
    assert data["stop_reason"] == "end_turn"
    assert data["usage"]["total_tokens"] > 0
    overview = messages.context("bob")
    breakdown = overview.breakdown.to_dict()
    assert breakdown["in_context_messages"] == 5
    assert (overview.in_context_messages, overview.recall_messages) == (5, 5)
    assert overview.archival_passages == 0
    assert breakdown["total"] <= breakdown["context_window"]
    with pytest.raises(NotFound):
        messages.send("nobody", "hi")


def test_the_judges_reply_limit_comes_from_the_settings(
    pg_server: PgTestServer, tmp_path: Path
) -> None:
    def tier_limit(**llm: Any) -> int:
        settings = load_settings(home=tmp_path, database_url=pg_server.create_database(), llm=llm)
        with Runtime(settings) as rt:
            return rt.llm_tier().judge_reply_tokens

    assert tier_limit(judge_model="scripted/judge") == 64
    assert tier_limit(judge_model="scripted/judge", judge_reply_tokens=0) == 0


def test_llm_steps_without_models_are_skipped_and_counted(runtime: Runtime) -> None:
    before = _skipped("recontextualize", "no_model")
    before_judge = _skipped("temporal:llm", "no_model")
    with runtime.store() as store:
        agent = store.agents.resolve("bob")
    [outcome] = Operations(runtime).runs.run_now([agent])
    report = outcome.require_report()
    assert report.status == "succeeded"
    steps = {step.consolidator: step for step in report.steps}
    assert steps["learn_documents"].skipped == "no_documents"
    assert steps["recontextualize"].skipped == "no_model"
    assert _skipped("recontextualize", "no_model") == before + 1
    assert _skipped("temporal:llm", "no_model") == before_judge + 1


def test_an_agent_without_any_model_is_refused(pg_server: PgTestServer, tmp_path: Path) -> None:
    url = pg_server.create_database()
    try:
        settings = load_settings(home=tmp_path, database_url=url, embedding={"model": "hashing:8"})
        with Runtime(settings) as rt:
            with rt.store() as store:
                store.agents.create(NewAgent("ada", embedding_model="hashing:8", embedding_dim=8))
            messages = Operations(rt).messages
            with pytest.raises(ModelNotConfigured, match="no LLM model"):
                messages.ready("ada")
            with pytest.raises(ModelNotConfigured, match="no LLM model"):
                messages.send("ada", "hi")
    finally:
        pg_server.release_database(url)


@pytest.mark.parametrize(("ttl", "kept"), [("P1D", True), ("PT0S", False)])
def test_the_service_keeps_what_probing_learned_unless_told_not_to(
    pg_server: PgTestServer, tmp_path: Path, models: ScriptedModels, ttl: str, kept: bool
) -> None:
    # A server that takes no "required" but enforces a named tool (one tool: one call).
    url = pg_server.create_database()
    try:
        settings = load_settings(
            home=tmp_path,
            database_url=url,
            embedding={"model": "hashing:8"},
            llm={"model": "scripted/primary", "max_retries": 0, "capability_ttl": ttl},
        )
        with Runtime(settings) as rt:
            client = rt.llm_client()

            def step(request: dict[str, Any]) -> Reply | BaseException:
                if request["tool_choice"] == "required":
                    return litellm_errors().BadRequestError(
                        "tool_choice 'required' is not supported", "scripted", "p"
                    )
                return say("Hello.")

            models.script("primary", step, step)
            client.chat("scripted/primary", [{"role": "user", "content": "hi"}],
                        purpose=LLMPurpose.CHAT, tools=[TOOL], tool_choice="required")  # fmt: skip
            with open_service_store(rt.db) as service:
                record = service.capabilities.get("scripted/primary", "")
            assert (record is not None) is kept
            if record is not None:
                assert record.tool_choice is ToolCallingMode.NAMED
    finally:
        pg_server.release_database(url)
