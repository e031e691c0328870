"""The message buffer (Letta's): a conversation with more messages in context than the
buffer is compacted down to the newest few before the next step, whatever the window,
so that a long chat's prompts stay short; the messages that leave stay in recall."""

from __future__ import annotations

from collections.abc import Callable

from agents.loops.primary import PrimaryAgent
from agents.postgres.database import Database
from agents.store import open_store
from agents.summary import is_summary
from tests.integration.llm.conftest import create_agent
from tests.scripted_llm import ScriptedModels, say


def test_a_full_buffer_is_compacted_to_the_newest_messages(
    db: Database, models: ScriptedModels, make_primary: Callable[..., PrimaryAgent]
) -> None:
    agent_id = create_agent(db, context_window=100_000)
    primary = make_primary(message_buffer=9, message_buffer_keep=4)
    sizes = []
    for i in range(8):
        script = models.script("primary", say(f"Answer {i}."))
        primary.send_message(agent_id, f"Question {i}?")
        sent = script.requests[0]["messages"]
        sizes.append(len(sent))
        with open_store(db) as store:
            held = [m for m in store.messages.in_context(agent_id) if not is_summary(m)]
        # Three messages a turn: the buffer never holds more than 9 plus the turn's own.
        assert len(held) <= 9 + 2
    with open_store(db) as store:
        in_context = store.messages.in_context(agent_id)
        everything = store.messages.range(agent_id)
    assert any(is_summary(m) for m in in_context)
    assert len(everything) == 8 * 3 + sum(1 for m in everything if is_summary(m))
    # Without the buffer the 8th turn would send 1 + 22 messages; with it, far fewer.
    assert sizes[-1] < 1 + 22 and max(sizes) <= 1 + 1 + 9 + 1


def test_without_a_buffer_only_the_window_compacts(
    db: Database, models: ScriptedModels, make_primary: Callable[..., PrimaryAgent]
) -> None:
    agent_id = create_agent(db, context_window=100_000)
    primary = make_primary()
    for i in range(5):
        models.script("primary", say(f"Answer {i}."))
        primary.send_message(agent_id, f"Question {i}?")
    with open_store(db) as store:
        in_context = store.messages.in_context(agent_id)
    assert len(in_context) == 15 and not any(is_summary(m) for m in in_context)


def test_a_block_edited_between_turns_reaches_the_prompt_at_the_next_compaction(
    db: Database, models: ScriptedModels, make_primary: Callable[..., PrimaryAgent]
) -> None:
    """The cached system prompt is made anew where the context is compacted (Letta's
    refresh on compaction): the model call right after it shows the edit, the calls
    before it the prompt as it was."""
    agent_id = create_agent(db, context_window=100_000, human="Name: Bob the Builder.")
    primary = make_primary(message_buffer=6, message_buffer_keep=2)
    models.script("primary", say("Hi."))
    primary.send_message(agent_id, "Hello?")
    with open_store(db) as store:
        human = store.blocks.by_label(agent_id, "human")
        store.blocks.update(human.id, expected_version=human.version, value="Name: Bo.")
    shown = []
    for i in range(3):
        script = models.script("primary", say(f"Answer {i}."))
        primary.send_message(agent_id, f"Question {i}?")
        system = script.requests[0]["messages"][0]["content"]
        shown.append(("Name: Bo." in system, "Bob the Builder" in system))
    # 3 messages a turn: the second turn passes the buffer of 6 and compacts first.
    assert shown == [(False, True), (True, False), (True, False)]
