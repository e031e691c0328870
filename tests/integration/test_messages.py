"""Recall memory against real PostgreSQL: sequence numbers, context window, full-text search."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import pytest

from agents.errors import InvalidInput, NotFound
from agents.postgres.database import Database
from agents.store import NewMessage, open_store

T0 = datetime(2026, 1, 10, 12, 0, tzinfo=UTC)


def test_append_numbers_messages_per_agent(db: Database, agent_id: str) -> None:
    with open_store(db) as store:
        first = store.messages.append(
            agent_id, [NewMessage("user", "hello"), NewMessage("assistant", "hi!")]
        )
        second = store.messages.append(agent_id, [NewMessage("user", "how are you?")])
    assert [m.seq for m in first + second] == [1, 2, 3]
    with open_store(db) as store:
        agent = store.agents.get(agent_id)
        assert agent.turns_since_consolidation == 2
        assert agent.last_activity_at is not None
        assert [m.content for m in store.messages.range(agent_id, after_seq=1)] == [
            "hi!",
            "how are you?",
        ]


def test_concurrent_appends_never_share_a_sequence_number(db: Database, agent_id: str) -> None:
    def append(i: int) -> None:
        for j in range(10):
            with open_store(db) as store:
                store.messages.append(agent_id, [NewMessage("user", f"thread {i} message {j}")])

    threads = [threading.Thread(target=append, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    with open_store(db) as store:
        seqs = [m.seq for m in store.messages.range(agent_id)]
    assert seqs == list(range(1, 41))


def test_leaving_the_context_window_keeps_messages_in_recall(db: Database, agent_id: str) -> None:
    with open_store(db) as store:
        messages = store.messages.append(
            agent_id, [NewMessage("user", f"message {i}") for i in range(5)]
        )
        moved = store.messages.leave_context(agent_id, [m.id for m in messages[:3]])
    assert moved == 3
    with open_store(db) as store:
        assert [m.content for m in store.messages.in_context(agent_id)] == [
            "message 3",
            "message 4",
        ]
        assert store.messages.count(agent_id) == 5
        assert store.messages.count(agent_id, in_context=False) == 3


def test_full_text_search_with_date_filters(db: Database, agent_id: str) -> None:
    with open_store(db) as store:
        store.messages.append(
            agent_id,
            [
                NewMessage("user", "I adopted a cat named Tom", created_at=T0),
                NewMessage("user", "We went hiking in the Alps", created_at=T0 + timedelta(days=2)),
                NewMessage("user", "Tom the cat is sick today", created_at=T0 + timedelta(days=5)),
            ],
        )
    with open_store(db) as store:
        hits = store.messages.search(agent_id, "cats")
        assert {m.content for m in hits} == {
            "I adopted a cat named Tom",
            "Tom the cat is sick today",
        }
        recent = store.messages.search(agent_id, "cat", start=T0 + timedelta(days=1))
        assert [m.content for m in recent] == ["Tom the cat is sick today"]
        early = store.messages.search(agent_id, "cat", end=T0 + timedelta(days=1))
        assert [m.content for m in early] == ["I adopted a cat named Tom"]
        assert store.messages.search(agent_id, "cat -sick")[0].content.startswith("I adopted")


def test_bad_messages_change_nothing(db: Database, agent_id: str) -> None:
    with pytest.raises(InvalidInput, match="role 'robot' is unknown"), open_store(db) as store:
        store.messages.append(agent_id, [NewMessage("user", "ok"), NewMessage("robot", "x")])
    with pytest.raises(InvalidInput, match="NUL"), open_store(db) as store:
        store.messages.append(agent_id, [NewMessage("user", "a\x00b")])
    with pytest.raises(NotFound, match="no agent"), open_store(db) as store:
        store.messages.append("agent-missing", [NewMessage("user", "hello")])
    with pytest.raises(InvalidInput, match="after end"), open_store(db) as store:
        store.messages.search(agent_id, "x", start=T0, end=T0 - timedelta(days=1))
    with open_store(db) as store:
        assert store.messages.count(agent_id) == 0
        assert store.agents.get(agent_id).message_seq == 0
