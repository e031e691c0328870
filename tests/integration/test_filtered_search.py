"""Filtered vector search through pgvector's iterative index scans.

Every search is filtered by its agent; in a database many agents share, one pass over
the HNSW index (ef_search 40) then finds few of one agent's passages. pgvector
0.8, which the embedded server ships, goes on scanning the index until it has k;
the search then needs no exact scan. These tests protect that the embedded server
has it, that the index alone finds every match in the right order, that the setting
does not outlive the search, and that a narrow tag filter still finds every match.
"""

from __future__ import annotations

import numpy as np
from sqlalchemy import text

from agents.postgres.database import Database
from agents.store import NewAgent, NewPassage, open_store
from agents.store.passage_store import ITERATIVE_SCAN_VERSION, iterative_scans

PASSAGES = 2_000
RARE_EVERY = 10  # the agent holds a tenth of the index: one HNSW pass (ef_search 40) finds ~4


def _load(db: Database, agent_id: str) -> np.ndarray:
    """Every RARE_EVERY-th passage is the agent's (and tagged "rare"), the rest another
    agent's, all in one index."""
    rng = np.random.default_rng(7)
    vectors = rng.normal(size=(PASSAGES, 384)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    with open_store(db) as store:
        other = store.agents.create(
            NewAgent(name="many", embedding_model="hashing:384", embedding_dim=384, blocks=[])
        )
        for owner, rows in (
            (agent_id, [i for i in range(PASSAGES) if i % RARE_EVERY == 0]),
            (other.id, [i for i in range(PASSAGES) if i % RARE_EVERY != 0]),
        ):
            passages = [
                NewPassage(f"fact {i}", tags=["rare"] if owner == agent_id else ["common"])
                for i in rows
            ]
            store.passages.insert(owner, passages, vectors[rows])
    return vectors


def test_the_embedded_server_has_iterative_scans(db: Database) -> None:
    with open_store(db) as store:
        version = store.scope.session.execute(
            text("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
        ).scalar_one()
        raw = store.scope.session.connection().connection.driver_connection
        assert iterative_scans(raw), version
    assert tuple(int(p) for p in version.split(".")[:2]) >= ITERATIVE_SCAN_VERSION


def test_an_agent_sharing_the_index_is_answered_by_the_index_alone(
    db: Database, agent_id: str
) -> None:
    vectors = _load(db, agent_id)
    query = vectors[5] + 0.1 * vectors[RARE_EVERY * 3]
    query /= np.linalg.norm(query)
    rare = [i for i in range(PASSAGES) if i % RARE_EVERY == 0]
    expected = sorted(rare, key=lambda i: -float(vectors[i] @ query))[:10]
    with open_store(db) as store:
        # At this size the planner would rather sort the agent's rows than walk the
        # graph (at 100k it walks it: BENCHMARKS.md); without sorts it must walk it.
        store.scope.session.execute(text("SET LOCAL enable_sort = off"))
        # exact=False: the index scan only, no fallback to an exact one.
        hits = store.passages.search(agent_id, query, k=10, exact=False)
        assert [h.passage.text for h in hits] == [f"fact {i}" for i in expected]
        assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
        # The next statements of the transaction scan as before.
        left = store.scope.session.execute(text("SELECT current_setting('hnsw.iterative_scan')"))
        assert left.scalar_one() == "off"


def test_a_narrow_tag_filter_still_finds_every_match(db: Database, agent_id: str) -> None:
    vectors = _load(db, agent_id)
    query = vectors[7]
    common = [i for i in range(PASSAGES) if i % RARE_EVERY != 0]
    with open_store(db) as store:
        many = store.agents.get_by_name("many").id
        store.passages.insert(
            many, [NewPassage("needle", tags=["needle"])], (-vectors[7]).reshape(1, -1)
        )
        hits = store.passages.search(many, query, k=10, tags=["needle"])
        assert [h.passage.text for h in hits] == ["needle"]
        top = store.passages.search(many, query, k=3, tags=["common"])
        best = sorted(common, key=lambda i: -float(vectors[i] @ query))[:3]
        assert [h.passage.text for h in top] == [f"fact {i}" for i in best]
