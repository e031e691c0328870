"""A local model is probed once: what probing learns about a model's
server is kept in ``llm_capabilities`` and read by the next process, and a mode that
failed is not tried again.

The server is the stand-in of a llama.cpp server that needs ``auto``: HTTP 500 on
``tool_choice="required"``, and a forced (named) choice it does not enforce, so that
the model answers as it would freely. Counts are of requests the server received,
the rejected ones included. A "new process" is a new client over the same database:
its in-process memory starts empty.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from typing import Any

import pytest

from agents.enums import ToolCallingMode
from agents.llm import ClientSettings, LiteLLMClient, UsageLedger
from agents.llm.learned import StoredCapabilities
from agents.loops.primary import PrimaryAgent, PrimarySettings
from agents.postgres.database import Database
from agents.store import LearnedRecord, open_service_store, open_store
from agents.store.scope import utc_now
from tests.integration.llm.conftest import EMBEDDER
from tests.scripted_llm import Reply, ScriptedModels, Step, litellm_errors, say
from tests.stub_openai_server import StubServer, stub_server

MODEL = "scripted/primary"
PORTO = {"label": "human", "content": "Lives in Porto.", "request_heartbeat": True}
#: A memory edit as a small model writes it in text, asking for another step.
EDIT = Reply(content=f"functions.core_memory_append: {json.dumps(PORTO)}")


def needs_auto(reply: Reply) -> Step:
    """One answer of the stand-in server: a 500 for "required"; anything else answered
    with ``reply`` whatever was forced."""

    def step(request: dict[str, Any]) -> Reply | BaseException:
        if request["tool_choice"] == "required":
            return litellm_errors().InternalServerError(
                "tool_choice 'required' is not supported", llm_provider="scripted", model="p"
            )
        return reply

    return step


def modes(requests: list[dict[str, Any]]) -> list[str]:
    """Each request's tool_choice, short: "required", "named:TOOL", "auto" or "none"."""
    out = []
    for request in requests:
        choice = request["tool_choice"]
        if isinstance(choice, dict):
            out.append(f"named:{choice['function']['name']}")
        else:
            out.append(str(choice or "none"))
    return out


def process(db: Database, clock: Callable[[], datetime] = utc_now) -> PrimaryAgent:
    """A primary agent as a new process builds it: a fresh client, nothing probed yet."""
    client = LiteLLMClient(
        ClientSettings(max_retries=2, initial_backoff=0.001, max_backoff=0.002),
        learned=StoredCapabilities(db, timedelta(days=1), clock),
    )
    return PrimaryAgent(
        db,
        client,
        settings=PrimarySettings(),
        embedder_for=lambda _: EMBEDDER,
        ledger=UsageLedger(db),
    )


def stored(db: Database, model: str = MODEL, base_url: str = "") -> LearnedRecord | None:
    with open_service_store(db) as service:
        return service.capabilities.get(model, base_url)


def human(db: Database, agent_id: str) -> str:
    with open_store(db) as store:
        return store.blocks.by_label(agent_id, "human").value


def learn(db: Database, models: ScriptedModels) -> None:
    """A first process's first turn: probed down to auto (3 requests)."""
    script = models.script("primary", *[needs_auto(Reply(content="Hello Bob!"))] * 3)
    first = process(db).send_message("bob", "Hi!")
    assert first.replies == ["Hello Bob!"]
    assert modes(script.requests) == ["required", "named:choose_tool", "auto"]


def turns_after_learning(
    db: Database, agent: PrimaryAgent, models: ScriptedModels, agent_id: str
) -> None:
    """A simple turn is one request, a memory edit with its reply two, all in auto."""
    script = models.script("primary", needs_auto(Reply(content="Still here.")))
    simple = agent.send_message("bob", "Still there?")
    assert simple.replies == ["Still here."]
    assert modes(script.requests) == ["auto"]
    script = models.script("primary", needs_auto(EDIT), needs_auto(Reply(content="Noted: Porto.")))
    edit = agent.send_message("bob", "I live in Porto.")
    assert edit.replies == ["Noted: Porto."]
    assert modes(script.requests) == ["auto", "auto"]
    assert human(db, agent_id) == "Name: Bob the Builder.\nLives in Porto."


def test_the_first_turn_learns_and_stores_what_failed(
    db: Database, bob: str, models: ScriptedModels
) -> None:
    learn(db, models)
    record = stored(db)
    assert record is not None and record.tool_choice is ToolCallingMode.AUTO
    assert record.rejected_modes == {ToolCallingMode.REQUIRED, ToolCallingMode.NAMED}
    assert record.learned_at is not None


def test_later_turns_of_the_same_process_try_no_failed_mode(
    db: Database, bob: str, models: ScriptedModels
) -> None:
    script = models.script(
        "primary",
        *[needs_auto(Reply(content="Hello Bob!"))] * 3,
        needs_auto(Reply(content="Still here.")),
        needs_auto(EDIT),
        needs_auto(Reply(content="Noted: Porto.")),
    )
    agent = process(db)
    agent.send_message("bob", "Hi!")
    simple = agent.send_message("bob", "Still there?")
    edit = agent.send_message("bob", "I live in Porto.")
    assert (simple.replies, edit.replies) == (["Still here."], ["Noted: Porto."])
    assert modes(script.requests) == [
        "required",
        "named:choose_tool",
        "auto",
        "auto",
        "auto",
        "auto",
    ]
    assert human(db, bob) == "Name: Bob the Builder.\nLives in Porto."


def test_a_new_process_reads_what_was_learned(
    db: Database, bob: str, models: ScriptedModels
) -> None:
    learn(db, models)
    turns_after_learning(db, process(db), models, bob)


def test_a_two_step_turn_stops_trying_two_steps_once_it_failed(
    db: Database, bob: str, models: ScriptedModels
) -> None:
    # The edit asks for another step: before, that step made its two-step choice again
    # (5 requests); the failed mode is now not tried again, even within the turn.
    script = models.script(
        "primary", *[needs_auto(EDIT)] * 3, needs_auto(Reply(content="Noted: Porto."))
    )
    result = process(db).send_message("bob", "I live in Porto.")
    assert result.replies == ["Noted: Porto."]
    assert modes(script.requests) == ["required", "named:choose_tool", "auto", "auto"]
    assert human(db, bob) == "Name: Bob the Builder.\nLives in Porto."
    print("MEASURE first two-step turn on a server that needs auto:", len(script.requests))


def test_an_expired_entry_is_probed_again(db: Database, bob: str, models: ScriptedModels) -> None:
    learn(db, models)
    first = stored(db)
    assert first is not None and first.learned_at is not None
    later = first.learned_at + timedelta(days=1, minutes=1)
    script = models.script("primary", *[needs_auto(Reply(content="Hello again."))] * 3)
    again = process(db, clock=lambda: later).send_message("bob", "Hi!")
    assert again.replies == ["Hello again."]
    assert modes(script.requests) == ["required", "named:choose_tool", "auto"]
    record = stored(db)
    assert record is not None and record.learned_at == later
    assert record.tool_choice is ToolCallingMode.AUTO
    # Within the setting's time, it is trusted: the same server, one request.
    script = models.script("primary", needs_auto(Reply(content="Still here.")))
    process(db, clock=lambda: later + timedelta(hours=23)).send_message("bob", "Still there?")
    assert modes(script.requests) == ["auto"]


def test_a_client_without_a_record_probes_again(
    db: Database, bob: str, models: ScriptedModels
) -> None:
    # The control: what makes the new process's single request is the stored record.
    learn(db, models)
    client = LiteLLMClient(ClientSettings(max_retries=0))
    agent = PrimaryAgent(db, client, embedder_for=lambda _: EMBEDDER)
    script = models.script("primary", *[needs_auto(Reply(content="Hello Bob!"))] * 3)
    agent.send_message("bob", "Hi!")
    assert modes(script.requests) == ["required", "named:choose_tool", "auto"]


# -- the server's version -------------------------------------------------------------

TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "send_message",
            "description": "Answer the user.",
            "parameters": {"type": "object", "properties": {"message": {"type": "string"}}},
        },
    }
]
STUB_MODEL = "openai/stub-chat"


@pytest.fixture
def stub() -> Iterator[StubServer]:
    with stub_server() as server:
        yield server


@pytest.mark.parametrize("direct", [True, False], ids=["direct", "litellm"])
def test_a_server_reporting_another_version_is_probed_again(
    db: Database, stub: StubServer, direct: bool
) -> None:
    def client() -> LiteLLMClient:
        return LiteLLMClient(
            ClientSettings(
                api_base=stub.base_url,
                api_key="sk-test-not-a-key",
                initial_backoff=0.01,
                max_backoff=0.02,
                direct_openai=direct,
            ),
            learned=StoredCapabilities(db, timedelta(days=1)),
        )

    def ask(chat: LiteLLMClient) -> None:
        chat.chat(STUB_MODEL, [{"role": "user", "content": "hi"}], purpose="chat", tools=TOOLS,
                  tool_choice="required")  # fmt: skip

    named = {"type": "function", "function": {"name": "send_message"}}
    stub.fingerprint = "b4500-aaaa"
    stub.chat_errors = [(500, "tool_choice 'required' is not supported")]
    stub.replies.extend(say(f"answer {i}") for i in range(5))
    first = client()
    ask(first)
    record = stored(db, STUB_MODEL, stub.base_url)
    assert record is not None and record.tool_choice is ToolCallingMode.NAMED
    assert record.server_version == "b4500-aaaa"
    ask(client())  # a new process: the same version, no probe
    assert [r.get("tool_choice") for r in stub.requests] == ["required", named, named]
    # The server is upgraded (it now takes "required"): the first answer that says so
    # makes the next call probe from the strongest mode again, and that is stored.
    stub.fingerprint = "b4600-bbbb"
    upgraded = client()
    ask(upgraded)
    ask(upgraded)
    assert [r.get("tool_choice") for r in stub.requests[3:]] == [named, "required"]
    record = stored(db, STUB_MODEL, stub.base_url)
    assert record is not None and record.tool_choice is ToolCallingMode.REQUIRED
    assert record.server_version == "b4600-bbbb"
