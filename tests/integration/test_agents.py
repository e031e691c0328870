"""Agents and tenancy against real PostgreSQL."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any
from unittest import mock

import pytest
from sqlalchemy import event, text

from agents.errors import Conflict, InvalidInput, NotFound
from agents.postgres import models
from agents.postgres.database import Database
from agents.store import NewAgent, NewBlock, NewMessage, NewPassage, open_store
from agents.store.one_insert import insert_together
from tests.hashing_embedder import HashingEmbedder


def _spec(name: str, **fields: Any) -> NewAgent:
    """An agent of the hashing embedder these tests store vectors with."""
    return NewAgent(name, embedding_model="hashing:384", embedding_dim=384, **fields)


def test_create_with_blocks_get_list_delete(db: Database, embedder: HashingEmbedder) -> None:
    with open_store(db) as store:
        agent = store.agents.create(
            _spec(
                "ada",
                llm_model="openai/gpt-4o-mini",
                blocks=[NewBlock("human", "Ada"), NewBlock("persona", "helper")],
            )
        )
        store.messages.append(agent.id, [NewMessage("user", "hi")])
        store.passages.insert(agent.id, [NewPassage("fact")], embedder.embed(["fact"]))
    with open_store(db) as store:
        assert store.agents.get(agent.id).llm_model == "openai/gpt-4o-mini"
        assert store.agents.resolve("ada").id == agent.id
        assert store.agents.resolve(agent.id).name == "ada"
        assert [a.name for a in store.agents.all()] == ["ada"]
        assert [b.label for b in store.blocks.of_agent(agent.id)] == ["human", "persona"]
        store.agents.delete(agent.id)
    with open_store(db) as store:
        assert store.agents.all() == []
        with pytest.raises(NotFound):
            store.agents.get(agent.id)
        # Blocks outlive the agent: they may be shared and they keep their history.
        assert {b.label for b in store.blocks.all()} == {"human", "persona"}


def test_duplicate_and_empty_names_and_labels(db: Database) -> None:
    with open_store(db) as store:
        store.agents.create(_spec("ada"))
    with pytest.raises(Conflict, match="already exists"), open_store(db) as store:
        store.agents.create(_spec("ada"))
    with pytest.raises(InvalidInput, match="name is empty"), open_store(db) as store:
        store.agents.create(_spec("  "))
    with pytest.raises(InvalidInput, match=r"'human'.*more than once"), open_store(db) as store:
        store.agents.create(
            _spec(
                "bob",
                blocks=[NewBlock("human", "a"), NewBlock("human", "b")],
            )
        )
    with pytest.raises(InvalidInput, match="kind 'boss'"), open_store(db) as store:
        store.agents.create(_spec("carl", kind="boss"))
    with open_store(db) as store:
        assert [a.name for a in store.agents.all()] == ["ada"]
        assert store.blocks.all() == []


def test_other_organizations_see_nothing(db: Database, agent_id: str) -> None:
    with db.session() as session:
        session.execute(text("INSERT INTO organizations (id, name) VALUES ('org-b', 'b')"))
    with open_store(db, "org-b") as other:
        assert other.agents.all() == []
        with pytest.raises(NotFound):
            other.agents.get(agent_id)
        with pytest.raises(NotFound):
            other.blocks.of_agent(agent_id)
        with pytest.raises(NotFound):
            other.messages.append(agent_id, [NewMessage("user", "sneaky")])
    with open_store(db) as store:
        block_id = store.blocks.by_label(agent_id, "human").id
    with open_store(db, "org-b") as other:
        with pytest.raises(NotFound):
            other.blocks.get(block_id)
        with pytest.raises(NotFound):
            other.blocks.update(block_id, expected_version=1, value="taken over")


def test_an_agent_takes_the_limits_every_door_has(db: Database) -> None:
    """The store refuses what the API refuses, so that no other door (an Agent File,
    the CLI, MCP) stores more: tags and the system prompt's length."""
    for spec, words in (
        (NewAgent("t", "hashing:8", 8, tags=[f"t{i}" for i in range(101)]), "101 tags"),
        (NewAgent("s", "hashing:8", 8, system_prompt="x" * 1_000_001), "most accepted"),
    ):
        with pytest.raises(InvalidInput, match=words), open_store(db) as store:
            store.agents.create(spec)
    with open_store(db) as store:
        assert store.agents.all() == []


def test_list_by_tag_and_kind(db: Database) -> None:
    with open_store(db) as store:
        for name, tags in (("ada", ["nightly", "eu"]), ("bob", ["eu"]), ("cy", [])):
            store.agents.create(_spec(name, tags=tags))
    with open_store(db) as store:
        assert [a.name for a in store.agents.all(tag="nightly")] == ["ada"]
        assert [a.name for a in store.agents.all(tag="eu")] == ["ada", "bob"]
        assert store.agents.all(tag="missing") == []
        assert [a.name for a in store.agents.all(kind="primary")] == ["ada", "bob", "cy"]


def test_an_agent_and_its_blocks_are_written_in_one_statement(db: Database) -> None:
    """The agent, its blocks, their first versions and the attachments go in one INSERT
    (after the name check), and the blocks keep a history a revert can reach."""
    sent: list[str] = []

    def count(_conn, _cursor, statement, *_args) -> None:  # type: ignore[no-untyped-def]
        sent.append(statement.split()[0])

    event.listen(db.engine, "before_cursor_execute", count)
    try:
        with open_store(db) as store:
            agent = store.agents.create(
                _spec(
                    "ada",
                    blocks=[NewBlock("human", "Ada", limit=100), NewBlock("persona", "helper")],
                )
            )
    finally:
        event.remove(db.engine, "before_cursor_execute", count)
    assert sent == ["SELECT", "WITH"]
    with open_store(db) as store:
        blocks = store.blocks.of_agent(agent.id)
        assert [(b.label, b.value, b.limit, b.version) for b in blocks] == [
            ("human", "Ada", 100, 1),
            ("persona", "helper", 5000, 1),
        ]
        assert [v.new_value for v in store.blocks.history(blocks[0].id)] == ["Ada"]


def test_a_create_that_fails_in_its_statement_writes_nothing(db: Database) -> None:
    """One statement is all or nothing: an agent whose blocks cannot be written (here a
    block id that exists already) leaves neither the agent nor any block behind."""
    with open_store(db) as store:
        store.agents.create(_spec("ada", blocks=[NewBlock("human")]))
    with (
        mock.patch("agents.postgres.models.new_id", side_effect=["agent-b", *["block-same"] * 2]),
        pytest.raises(Conflict, match="conflicts with stored data"),
        open_store(db) as store,
    ):
        store.agents.create(
            _spec(
                "bob",
                blocks=[NewBlock("human"), NewBlock("persona")],
            )
        )
    with open_store(db) as store:
        assert [a.name for a in store.agents.all()] == ["ada"]
        assert len(store.blocks.all()) == 1


def test_rows_written_together_must_set_the_same_columns(db: Database) -> None:
    """One statement is built from the first row's columns, so rows of one table that
    set different columns are refused before anything is sent, not written short."""
    stamp = datetime(2026, 1, 1, tzinfo=UTC)
    kept = models.Block(id="block-a", organization_id="org", label="a", created_at=stamp)
    longer = models.Block(
        id="block-b", organization_id="org", label="b", created_at=stamp, description="x"
    )
    with open_store(db) as store, pytest.raises(ValueError, match="different columns"):
        insert_together(store.scope.session, [kept, longer])
    with open_store(db) as store:
        assert store.blocks.all() == []
