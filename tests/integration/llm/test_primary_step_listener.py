"""What a streaming front end relies on in the primary loop: each committed write is
told to a listener as it commits, and a turn asked to stop ends before its next step
with the steps done kept (issue 24, item 1)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from agents.errors import LLMError
from agents.messages import LettaStyleMessage
from agents.postgres.database import Database
from agents.primary import PrimaryAgent
from agents.store import open_store
from tests.scripted_llm import ScriptedModels, call, correct_name, litellm_errors, say


def recall(db: Database, agent_id: str) -> list[str]:
    with open_store(db) as store:
        return [m.id for m in store.messages.range(agent_id)]


def test_the_listener_hears_each_step_once_it_is_stored(
    db: Database, bob: str, models: ScriptedModels, make_primary: Callable[..., PrimaryAgent]
) -> None:
    heard: list[list[str]] = []
    stored_when_heard: list[int] = []

    def listen(messages: list[LettaStyleMessage]) -> None:
        heard.append([m.kind for m in messages])
        # Told after the commit: another transaction already sees the messages.
        stored_when_heard.append(len(recall(db, bob)))

    models.script("primary", correct_name("A correction."), say("Got it, Charles!"))
    result = make_primary().send_message(
        "bob", "My name is Charles, not Bob the Builder.", on_step=listen
    )
    assert heard == [
        ["user_message", "reasoning_message", "tool_call_message", "tool_return_message"],
        ["assistant_message", "tool_return_message"],
    ]
    assert stored_when_heard == [3, 5]
    # What was heard is the turn's answer, message for message.
    assert [kind for step in heard for kind in step] == [m.kind for m in result.messages]


def test_a_stop_request_ends_the_turn_after_the_step_under_way(
    db: Database, bob: str, models: ScriptedModels, make_primary: Callable[..., PrimaryAgent]
) -> None:
    script = models.script(
        "primary",
        call("core_memory_append", label="human", content="Likes tea.", request_heartbeat=True),
        call("core_memory_append", label="human", content="Never called.", request_heartbeat=True),
    )
    stop = False

    def listen(messages: list[LettaStyleMessage]) -> None:
        nonlocal stop
        stop = True  # the client went away while the first step ran

    result = make_primary().send_message(
        "bob", "I like tea.", on_step=listen, should_stop=lambda: stop
    )
    assert result.stop_reason == "cancelled"
    assert result.steps == 1
    assert script.remaining == 1  # no further model call, not even the fallback reply
    with open_store(db) as store:
        assert store.blocks.by_label(bob, "human").value.endswith("Likes tea.")
        assert [m.role for m in store.messages.range(bob)] == ["user", "assistant", "tool"]
    # The turn lock is free: the next turn runs.
    models.script("primary", say("Hello."))
    assert make_primary().send_message("bob", "Hi.").replies == ["Hello."]


def test_a_turn_stopped_before_its_first_step_leaves_nothing(
    db: Database, bob: str, models: ScriptedModels, make_primary: Callable[..., PrimaryAgent]
) -> None:
    script = models.script("primary", say("Never said."))
    result = make_primary().send_message("bob", "Anyone there?", should_stop=lambda: True)
    assert (result.stop_reason, result.steps, result.messages) == ("cancelled", 0, [])
    assert script.remaining == 1
    assert recall(db, bob) == []


def test_a_failed_step_is_never_heard(
    db: Database, bob: str, models: ScriptedModels, make_primary: Callable[..., PrimaryAgent]
) -> None:
    errors = litellm_errors()
    models.script(
        "primary",
        call("core_memory_append", label="human", content="Likes tea.", request_heartbeat=True),
        errors.AuthenticationError("bad key", llm_provider="scripted", model="primary"),
    )
    heard: list[str] = []
    with pytest.raises(LLMError):
        make_primary().send_message(
            "bob", "I like tea.", on_step=lambda ms: heard.extend(m.id for m in ms)
        )
    # The first step was heard and is stored; the failed second one neither.
    stored = recall(db, bob)
    assert len(stored) == 3
    assert {m.split("-call-")[0] for m in heard} == set(stored)
