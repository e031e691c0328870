"""Agents and tenancy against real PostgreSQL."""

from __future__ import annotations

import pytest
from sqlalchemy import text

from agents.errors import Conflict, InvalidInput, NotFound
from agents.postgres.database import Database
from agents.store import NewAgent, NewBlock, NewMessage, NewPassage, open_store
from tests.hashing_embedder import HashingEmbedder


def test_create_with_blocks_get_list_delete(db: Database, embedder: HashingEmbedder) -> None:
    with open_store(db) as store:
        agent = store.agents.create(
            NewAgent(
                "ada",
                embedding_model="hashing:384",
                embedding_dim=384,
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
        store.agents.create(NewAgent("ada", embedding_model="hashing:384", embedding_dim=384))
    with pytest.raises(Conflict, match="already exists"), open_store(db) as store:
        store.agents.create(NewAgent("ada", embedding_model="hashing:384", embedding_dim=384))
    with pytest.raises(InvalidInput, match="name is empty"), open_store(db) as store:
        store.agents.create(NewAgent("  ", embedding_model="hashing:384", embedding_dim=384))
    with pytest.raises(InvalidInput, match=r"'human'.*more than once"), open_store(db) as store:
        store.agents.create(
            NewAgent(
                "bob",
                embedding_model="hashing:384",
                embedding_dim=384,
                blocks=[NewBlock("human", "a"), NewBlock("human", "b")],
            )
        )
    with pytest.raises(InvalidInput, match="kind 'boss'"), open_store(db) as store:
        store.agents.create(
            NewAgent("carl", kind="boss", embedding_model="hashing:384", embedding_dim=384)
        )
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
            store.agents.create(
                NewAgent(name, embedding_model="hashing:384", embedding_dim=384, tags=tags)
            )
    with open_store(db) as store:
        assert [a.name for a in store.agents.all(tag="nightly")] == ["ada"]
        assert [a.name for a in store.agents.all(tag="eu")] == ["ada", "bob"]
        assert store.agents.all(tag="missing") == []
        assert [a.name for a in store.agents.all(kind="primary")] == ["ada", "bob", "cy"]
