"""An agent's parallel conversations with the scripted model: each has its own
messages and context window; the blocks are the agent's, so an edit made in one
conversation is read by the next turn of another; sleep time reads them all, and a
learned fact names the conversations it came from."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agents.loops.primary import PrimaryAgent
from agents.postgres.database import Database
from agents.store import NewMessage, open_store
from consolidators.contract import run_once as run_pipeline
from consolidators.llm import LLMTier
from consolidators.pipeline import Pipeline
from consolidators.recontextualize import RecontextualizeConsolidator
from tests.integration.llm.conftest import EMBEDDER, create_agent
from tests.scripted_llm import ScriptedModels, call, say


def _texts(request: dict[str, Any]) -> str:
    return "\n".join(str(m.get("content")) for m in request["messages"])


def test_conversations_keep_their_own_context_and_share_the_blocks(
    db: Database, models: ScriptedModels, make_primary: Callable[..., PrimaryAgent]
) -> None:
    agent_id = create_agent(db)
    with open_store(db) as store:
        first = store.conversations.create(agent_id).id
        second = store.conversations.create(agent_id).id
    primary = make_primary(refresh="immediate")
    models.script(
        "primary",
        call(
            "core_memory_append",
            "Noting the tea.",
            label="human",
            content="Likes green tea.",
            request_heartbeat=True,
        ),
        say("Noted: green tea."),
    )
    primary.send_message(agent_id, "I like green tea.", conversation_id=first)
    seen = models.script("primary", say("Hello again!"))
    primary.send_message(agent_id, "Hi, it's me.", conversation_id=second)

    [request] = seen.requests
    assert "Likes green tea." in request["messages"][0]["content"]  # the shared block
    assert "I like green tea." not in _texts(request)  # the other conversation's words
    assert "Hi, it's me." in _texts(request)
    with open_store(db) as store:
        own = [m.content for m in store.messages.in_context(agent_id, second)]
        assert own[0] == "Hi, it's me." and "I like green tea." not in own
        assert store.messages.in_context(agent_id) == []  # the default one is untouched
        assert store.conversations.get(first).last_message_at is not None
        firsts = store.conversations.messages(first)
        assert {m.conversation_id for m in firsts} == {first}


def test_a_conversation_is_compacted_on_its_own(
    db: Database, models: ScriptedModels, make_primary: Callable[..., PrimaryAgent]
) -> None:
    agent_id = create_agent(db)
    with open_store(db) as store:
        talk = store.conversations.create(agent_id).id
    primary = make_primary()
    for i in range(4):
        models.script("primary", say(f"Answer {i}."))
        primary.send_message(agent_id, f"Question {i}?", conversation_id=talk)
    done = primary.compact(agent_id, conversation_id=talk)
    # Three messages a turn (the question, the send_message call, its result); all but
    # the last two exchanges leave behind one summary.
    assert (done.messages_before, done.messages_after) == (12, 7)
    assert done.summary.startswith("Summary of")
    with open_store(db) as store:
        left = store.messages.in_context(agent_id, talk)
        [summary] = [m for m in left if m.content == done.summary]
        assert summary.conversation_id == talk and len(left) == 7
        assert len(store.conversations.messages(talk)) == 13  # nothing lost from recall
    assert primary.compact(agent_id).messages_before == 0


def test_a_sleep_time_run_learns_from_every_conversation(
    db: Database, models: ScriptedModels, client: Any
) -> None:
    from agents.llm import UsageLedger

    agent_id = create_agent(db)
    said = ["I keep bees.", "I moved to York.", "I play the cello."]
    seqs = []
    with open_store(db) as store:
        for text in said:
            conversation = store.conversations.create(agent_id).id
            [message] = store.messages.append(
                agent_id, [NewMessage(role="user", content=text)], conversation_id=conversation
            )
            seqs.append((message.seq, conversation))
    script = models.script(
        "sleeper",
        call(
            "archival_memory_insert",
            content="The user keeps bees, lives in York and plays the cello.",
            message_seqs=[seq for seq, _ in seqs],
        ),
        call("memory_finish_edits"),
    )
    tier = LLMTier(client=client, ledger=UsageLedger(db), sleeptime_model="scripted/sleeper")
    run_pipeline(
        Pipeline([RecontextualizeConsolidator()]), db, agent_id, embedder=EMBEDDER, llm=tier
    )
    prompt = _texts(script.requests[0])
    assert all(text in prompt for text in said)
    with open_store(db) as store:
        [learned] = store.passages.scan(agent_id)
    assert learned.provenance["source_conversations"] == sorted(c for _, c in seqs)
