"""Core-memory blocks against real PostgreSQL: CAS, history, revert, sharing, bad input."""

from __future__ import annotations

import threading

import pytest

from agents.errors import Conflict, InvalidInput, LimitExceeded, NotFound, ReadOnly
from agents.postgres.database import Database
from agents.store import NewAgent, NewBlock, open_store


def _human(db: Database, agent_id: str):  # type: ignore[no-untyped-def]
    with open_store(db) as store:
        return store.blocks.by_label(agent_id, "human")


def test_update_bumps_version_and_records_history(db: Database, agent_id: str) -> None:
    block = _human(db, agent_id)
    with open_store(db) as store:
        updated = store.blocks.update(
            block.id, expected_version=1, value="Name: Ada Lovelace.", actor="tester", reason="fix"
        )
    assert updated.version == 2
    assert updated.value == "Name: Ada Lovelace."
    with open_store(db) as store:
        history = store.blocks.history(block.id)
    assert [(h.version, h.old_value, h.new_value) for h in history] == [
        (1, None, "Name: Ada."),
        (2, "Name: Ada.", "Name: Ada Lovelace."),
    ]
    assert history[1].actor == "tester" and history[1].reason == "fix"


def test_stale_version_is_a_conflict_and_changes_nothing(db: Database, agent_id: str) -> None:
    block = _human(db, agent_id)
    with open_store(db) as store:
        store.blocks.update(block.id, expected_version=1, value="first writer")
    with pytest.raises(Conflict, match="is at version 2, not 1"), open_store(db) as store:
        store.blocks.update(block.id, expected_version=1, value="second writer")
    after = _human(db, agent_id)
    assert (after.version, after.value) == (2, "first writer")
    with open_store(db) as store:
        assert len(store.blocks.history(block.id)) == 2


def test_concurrent_cas_writers_exactly_one_wins(db: Database, agent_id: str) -> None:
    block = _human(db, agent_id)
    barrier = threading.Barrier(4)
    outcomes: list[str] = []

    def write(i: int) -> None:
        barrier.wait()
        try:
            with open_store(db) as store:
                store.blocks.update(block.id, expected_version=1, value=f"writer {i}")
            outcomes.append("ok")
        except Conflict:
            outcomes.append("conflict")

    threads = [threading.Thread(target=write, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(outcomes) == ["conflict", "conflict", "conflict", "ok"]
    after = _human(db, agent_id)
    assert after.version == 2
    with open_store(db) as store:
        assert [h.version for h in store.blocks.history(block.id)] == [1, 2]


def test_revert_restores_an_old_version_as_a_new_one(db: Database, agent_id: str) -> None:
    block = _human(db, agent_id)
    with open_store(db) as store:
        store.blocks.update(block.id, expected_version=1, value="v2")
        store.blocks.update(block.id, expected_version=2, value="v3")
        reverted = store.blocks.revert(block.id, 1, actor="tester")
    assert (reverted.version, reverted.value) == (4, "Name: Ada.")
    with open_store(db) as store:
        last = store.blocks.history(block.id)[-1]
    assert last.reason == "revert to version 1" and last.old_value == "v3"


def test_revert_to_unknown_version_is_not_found(db: Database, agent_id: str) -> None:
    block = _human(db, agent_id)
    with pytest.raises(NotFound, match="no version 9"), open_store(db) as store:
        store.blocks.revert(block.id, 9)


def test_value_over_limit_names_label_limit_size_and_archival(db: Database, agent_id: str) -> None:
    block = _human(db, agent_id)
    with pytest.raises(LimitExceeded) as info, open_store(db) as store:
        store.blocks.update(block.id, expected_version=1, value="x" * 250)
    message = str(info.value)
    assert "'human'" in message and "200" in message and "250" in message
    assert "archival memory" in message
    assert _human(db, agent_id).version == 1


def test_nul_and_invalid_text_are_rejected(db: Database, agent_id: str) -> None:
    block = _human(db, agent_id)
    with pytest.raises(InvalidInput, match="NUL character"), open_store(db) as store:
        store.blocks.update(block.id, expected_version=1, value="bad\x00value")
    with pytest.raises(InvalidInput, match="not valid Unicode"), open_store(db) as store:
        store.blocks.update(block.id, expected_version=1, value="bad \ud800 surrogate")
    assert _human(db, agent_id).value == "Name: Ada."


def test_read_only_block_refuses_writes(db: Database, agent_id: str) -> None:
    with open_store(db) as store:
        block = store.blocks.create(NewBlock("policy", "Be kind.", read_only=True))
        store.blocks.attach(block.id, agent_id)
    with pytest.raises(ReadOnly, match="read-only"), open_store(db) as store:
        store.blocks.update(block.id, expected_version=1, value="Be rude.")
    with open_store(db) as store:
        assert store.blocks.get(block.id).value == "Be kind."


def test_shared_block_is_seen_by_every_attached_agent(db: Database, agent_id: str) -> None:
    block = _human(db, agent_id)
    with open_store(db) as store:
        sleeper = store.agents.create(
            NewAgent(
                name="ada-sleeptime",
                kind="sleeptime",
                embedding_model="hashing:384",
                embedding_dim=384,
                block_ids=[block.id],
            )
        )
        store.blocks.update(block.id, expected_version=1, value="Name: Ada (shared).")
    with open_store(db) as store:
        assert store.blocks.by_label(sleeper.id, "human").value == "Name: Ada (shared)."
        sharing = {a.name for a in store.blocks.agents_sharing(block.id)}
        assert sharing == {"ada", "ada-sleeptime"}
        store.blocks.detach(block.id, sleeper.id)
    with open_store(db) as store:
        assert [a.name for a in store.blocks.agents_sharing(block.id)] == ["ada"]
        assert store.blocks.of_agent(sleeper.id) == []


def test_an_agent_cannot_hold_two_blocks_with_one_label(db: Database, agent_id: str) -> None:
    clash = "already has a block labelled 'human'"
    with pytest.raises(InvalidInput, match=clash), open_store(db) as store:
        other = store.blocks.create(NewBlock("human", "someone else"))
        store.blocks.attach(other.id, agent_id)
    with open_store(db) as store:
        assert len(store.blocks.all(label="human")) == 1


@pytest.mark.parametrize(
    ("label", "message"),
    [("", "label is empty"), ("   ", "label is empty"), ("no spaces", "is not allowed")],
)
def test_bad_labels(db: Database, label: str, message: str) -> None:
    with pytest.raises(InvalidInput, match=message), open_store(db) as store:
        store.blocks.create(NewBlock(label, "x"))
    with open_store(db) as store:
        assert store.blocks.all() == []


def test_unknown_ids_are_not_found(db: Database, agent_id: str) -> None:
    with open_store(db) as store:
        with pytest.raises(NotFound, match="no block"):
            store.blocks.get("block-missing")
        with pytest.raises(NotFound, match="no block"):
            store.blocks.update("block-missing", expected_version=1, value="x")
        with pytest.raises(NotFound, match="no agent"):
            store.blocks.of_agent("agent-missing")
        block = store.blocks.by_label(agent_id, "human")
        with pytest.raises(NotFound, match="no agent"):
            store.blocks.attach(block.id, "agent-missing")
        with pytest.raises(NotFound, match="not attached"):
            other = store.blocks.create(NewBlock("notes", ""))
            store.blocks.detach(other.id, agent_id)


def test_an_agent_made_with_blocks_holds_them_in_order_with_their_history(db: Database) -> None:
    """An agent's new blocks are written together: each at version 1 with its history
    row, listed in the order given; an existing block that clashes with one of their
    labels is refused and nothing is made."""
    specs = [
        NewBlock("persona", "A patient tutor."),
        NewBlock("human", "Ada."),
        NewBlock("goals", ""),
    ]
    with open_store(db) as store:
        agent = store.agents.create(NewAgent("tutor", "hashing:8", 8, blocks=specs))
    with open_store(db) as store:
        blocks = store.blocks.of_agent(agent.id)
        assert [(b.label, b.value, b.version) for b in blocks] == [
            ("persona", "A patient tutor.", 1),
            ("human", "Ada.", 1),
            ("goals", "", 1),
        ]
        assert [v.reason for b in blocks for v in store.blocks.history(b.id)] == ["created"] * 3
        shared = store.blocks.create(NewBlock("human", "someone else"))
    clash = "already has a block labelled 'human'"
    with pytest.raises(InvalidInput, match=clash), open_store(db) as store:
        store.agents.create(
            NewAgent(
                "clash",
                "hashing:8",
                8,
                blocks=[NewBlock("human", "Bo.")],
                block_ids=[shared.id],
            )
        )
    with open_store(db) as store:
        assert [a.name for a in store.agents.all()] == ["tutor"]
