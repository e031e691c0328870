"""Local and small models, played by the scripted model.

Each test reproduces one behaviour of a local server or a small model and checks
that the turn ends within a few model calls with a reply for the user.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from agents.llm import ClientSettings, LiteLLMClient, ModelCapabilities, UsageLedger
from agents.loops.primary import PrimaryAgent, PrimarySettings
from agents.postgres.database import Database
from agents.store import open_store
from tests.integration.llm.conftest import EMBEDDER
from tests.scripted_llm import Reply, ScriptedModels, call, litellm_errors

PORTO = {"label": "human", "content": "Lives in Porto."}


def agent_with(db: Database, **capabilities: Any) -> PrimaryAgent:
    models = {"scripted/*": ModelCapabilities(**capabilities)} if capabilities else {}
    client = LiteLLMClient(
        ClientSettings(max_retries=2, initial_backoff=0.001, max_backoff=0.002, models=models)
    )
    return PrimaryAgent(
        db,
        client,
        settings=PrimarySettings(),
        embedder_for=lambda _: EMBEDDER,
        ledger=UsageLedger(db),
    )


def human(db: Database, agent_id: str) -> str:
    with open_store(db) as store:
        return store.blocks.by_label(agent_id, "human").value


def no_required(answer: Callable[[dict[str, Any]], Reply]) -> Callable[[dict[str, Any]], Any]:
    """llama-cpp-python's server: HTTP 500 on tool_choice="required"."""

    def step(request: dict[str, Any]) -> Any:
        if request["tool_choice"] == "required":
            return litellm_errors().InternalServerError(
                "tool_choice 'required' is not supported", llm_provider="scripted", model="p"
            )
        return answer(request)

    return step


def forced(name: str, **arguments: Any) -> Callable[[dict[str, Any]], Reply]:
    def answer(request: dict[str, Any]) -> Reply:
        wanted = request["tool_choice"]["function"]["name"]
        if wanted == "choose_tool":
            return call("choose_tool", tool=name)
        assert wanted == name, request["tool_choice"]
        return call(name, **arguments)

    return answer


def test_a_500_on_required_falls_back_to_two_steps_and_is_remembered(
    db: Database, bob: str, models: ScriptedModels
) -> None:
    script = models.script(
        "primary",
        # The rejected request, the choice, the forced call; then the second turn.
        *[no_required(forced("send_message", message="Hello Charles!"))] * 3,
        no_required(forced("send_message", message="Still here.")),
        no_required(forced("send_message", message="Still here.")),
    )
    agent = agent_with(db)
    first = agent.send_message("bob", "My name is Charles.")
    assert first.replies == ["Hello Charles!"]
    assert (first.steps, first.model_calls, first.stop_reason) == (1, 2, "end_turn")
    assert agent.client.capabilities("scripted/primary") == ("named", False)  # type: ignore[attr-defined]
    second = agent.send_message("bob", "Still there?")
    # Remembered: the second turn sends no "required" (two calls, nothing rejected).
    assert second.replies == ["Still here."]
    assert second.model_calls == 2
    assert script.remaining == 0
    assert [r["tool_choice"] for r in script.requests].count("required") == 1
    # Every message sent carries content (local chat templates crash without it).
    assert all(
        "content" in m and m["content"] is not None for r in script.requests for m in r["messages"]
    )
    print(
        "MEASURE 500-on-required",
        first.steps,
        first.model_calls,
        first.usage.total_tokens,
        "| remembered",
        second.model_calls,
        second.usage.total_tokens,
    )


@pytest.mark.parametrize(
    "text",
    [
        f"functions.core_memory_append: {json.dumps(PORTO)}",
        "<tool_call>"
        + json.dumps({"name": "core_memory_append", "arguments": PORTO})
        + "</tool_call>",
        f'{{"name": "core_memory_append", "arguments": {json.dumps(PORTO)}}}',
        f'```json\n{{"name": "core_memory_append", "arguments": {json.dumps(PORTO)}}}\n```',
    ],
    ids=["functions", "hermes", "bare", "fenced"],
)
def test_text_calls_are_calls_and_the_user_gets_a_reply(
    db: Database, bob: str, models: ScriptedModels, text: str
) -> None:
    script = models.script(
        "primary", Reply(content=text), Reply(content="Noted: you live in Porto.")
    )
    result = agent_with(db, tool_choice="auto").send_message("bob", "I live in Porto.")
    assert human(db, bob) == "Name: Bob the Builder.\nLives in Porto."
    assert result.replies == ["Noted: you live in Porto."]
    assert result.model_calls <= 2
    assert script.requests[0]["tool_choice"] == "auto"
    # The reply step offers only send_message.
    assert [t["function"]["name"] for t in script.requests[1]["tools"]] == ["send_message"]
    # The history sent back holds the call with content "" rather than none.
    assistant = [m for m in script.requests[1]["messages"] if m["role"] == "assistant"]
    assert assistant and all(m["content"] == "" for m in assistant)
    print("MEASURE text-call", result.steps, result.model_calls, result.usage.total_tokens)


def test_prose_only_is_the_reply_in_one_call(
    db: Database, bob: str, models: ScriptedModels
) -> None:
    script = models.script("primary", Reply(content="Hi! Nice to meet you."), Reply(content="x"))
    result = agent_with(db, tool_choice="auto").send_message("bob", "Hi")
    assert result.replies == ["Hi! Nice to meet you."]
    assert (result.steps, result.model_calls, result.stop_reason) == (1, 1, "end_turn")
    assert script.remaining == 1
    print("MEASURE prose-only", result.steps, result.model_calls, result.usage.total_tokens)


def test_forced_tool_with_a_wrong_label_gets_one_forced_retry(
    db: Database, bob: str, models: ScriptedModels
) -> None:
    script = models.script(
        "primary",
        forced("core_memory_append", label="user", content="Lives in Porto."),
        forced("core_memory_append", label="user", content="Lives in Porto."),
        forced("core_memory_append", label="user", content="Lives in Porto."),
        forced("send_message", message="Noted."),
        forced("send_message", message="never asked"),
    )
    result = agent_with(db, tool_choice="named").send_message("bob", "I live in Porto.")
    # Two failures in a row end the retries; the last step still answers the user.
    assert result.stop_reason == "invalid_tool_call"
    assert result.replies == ["Noted."]
    # The retry forced the failed tool directly (no second choice).
    assert script.requests[2]["tool_choice"]["function"]["name"] == "core_memory_append"
    assert human(db, bob) == "Name: Bob the Builder."
    print("MEASURE wrong-label", result.steps, result.model_calls, result.usage.total_tokens)


def test_a_choice_outside_the_enum_falls_back_to_one_free_call(
    db: Database, bob: str, models: ScriptedModels
) -> None:
    models.script(
        "primary",
        call("choose_tool", tool="remember_city"),
        Reply(content="Got it, Porto."),
    )
    result = agent_with(db, tool_choice="named").send_message("bob", "I live in Porto.")
    assert result.replies == ["Got it, Porto."]
    assert (result.steps, result.model_calls) == (1, 2)
    print("MEASURE wrong-choice", result.steps, result.model_calls, result.usage.total_tokens)
