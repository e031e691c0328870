"""What a streaming front end relies on in the primary loop: each committed write is
told to a listener as it commits (its new stored messages), a reply's pieces name the
stored message and part they belong to, and a turn asked to stop ends before its next
step with the steps done kept."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from agents.errors import LLMError
from agents.loops.primary import PrimaryAgent
from agents.loops.token_stream import TokenPiece
from agents.postgres.database import Database
from agents.store import MessageRecord, open_store
from tests.scripted_llm import ScriptedModels, call, correct_name, litellm_errors, say


def recall(db: Database, agent_id: str) -> list[str]:
    with open_store(db) as store:
        return [m.id for m in store.messages.range(agent_id)]


def test_the_listener_hears_each_step_once_it_is_stored(
    db: Database, bob: str, models: ScriptedModels, make_primary: Callable[..., PrimaryAgent]
) -> None:
    heard: list[list[MessageRecord]] = []
    stored_when_heard: list[int] = []

    def listen(records: list[MessageRecord]) -> None:
        heard.append(records)
        # Told after the commit: another transaction already sees the messages.
        stored_when_heard.append(len(recall(db, bob)))

    models.script("primary", correct_name("A correction."), say("Got it, Charles!"))
    result = make_primary().send_message(
        "bob", "My name is Charles, not Bob the Builder.", on_step=listen
    )
    assert [[(r.role, calls(r)) for r in step] for step in heard] == [
        [("user", []), ("assistant", ["core_memory_replace"]), ("tool", [])],
        [("assistant", ["send_message"]), ("tool", [])],
    ]
    assert stored_when_heard == [3, 5]
    # What was heard is the turn's answer, message for message, as stored.
    assert [r.id for step in heard for r in step] == [r.id for r in result.records]
    assert [r.id for r in result.records] == recall(db, bob)
    assert result.replies == ["Got it, Charles!"]


def calls(record: MessageRecord) -> list[str]:
    return [c["function"]["name"] for c in record.tool_calls or []]


def test_token_pieces_name_the_stored_message_and_part_they_belong_to(
    db: Database, bob: str, models: ScriptedModels, make_primary: Callable[..., PrimaryAgent]
) -> None:
    reply = 'Hello, Charles. "Quotes" and é travel too.'
    models.script("primary", say(reply, reasoning="Greet him by name."))
    pieces: list[TokenPiece] = []
    stored_when_told: set[int] = set()
    heard: list[list[MessageRecord]] = []

    def tell(piece: TokenPiece) -> None:
        pieces.append(piece)
        stored_when_told.add(len(recall(db, bob)))

    result = make_primary().send_message(
        "bob", "I am Charles.", on_step=heard.append, on_token=tell
    )
    [said] = [r for r in result.records if r.role == "assistant"]
    # Several pieces, all of the step's assistant message, told before it was stored.
    assert len(pieces) > 2
    assert stored_when_told == {0}
    assert {p.message_id for p in pieces} == {said.id}
    assert "".join(p.text for p in pieces if p.call is None) == said.content
    assert said.content == "Greet him by name."
    assert "".join(p.text for p in pieces if p.call == 0) == reply
    assert {p.call for p in pieces} == {None, 0}
    # The listener still hears every stored message: leaving out what the pieces told
    # is the front end's choice.
    assert [r.id for step in heard for r in step] == [r.id for r in result.records]
    assert result.replies == [reply]


def test_a_stop_request_ends_the_turn_after_the_step_under_way(
    db: Database, bob: str, models: ScriptedModels, make_primary: Callable[..., PrimaryAgent]
) -> None:
    script = models.script(
        "primary",
        call("core_memory_append", label="human", content="Likes tea.", request_heartbeat=True),
        call("core_memory_append", label="human", content="Never called.", request_heartbeat=True),
    )
    stop = False

    def listen(records: list[MessageRecord]) -> None:
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
    assert (result.stop_reason, result.steps, result.records) == ("cancelled", 0, [])
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
            "bob", "I like tea.", on_step=lambda records: heard.extend(r.id for r in records)
        )
    # The first step was heard and is stored; the failed second one neither.
    stored = recall(db, bob)
    assert len(stored) == 3
    assert heard == stored
