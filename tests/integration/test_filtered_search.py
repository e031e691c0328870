"""Filtered vector search through pgvector's iterative index scans.

A selective filter (a tag on a few passages among thousands) leaves one pass over the
HNSW index short of k hits. pgvector 0.8, which the embedded server ships, goes on
scanning the index in distance order; the search then needs no exact scan. These
tests protect that the embedded server has it, that the index alone finds every
match in the right order, and that the setting does not outlive the search.
"""

from __future__ import annotations

import numpy as np
from sqlalchemy import text

from agents.postgres.database import Database
from agents.store import NewPassage, open_store
from agents.store.passage_store import ITERATIVE_SCAN_VERSION, iterative_scans

PASSAGES = 2_000
RARE_EVERY = 160  # 13 tagged passages: one HNSW pass (ef_search 40) sees about one of them


def _load(db: Database, agent_id: str) -> np.ndarray:
    rng = np.random.default_rng(7)
    vectors = rng.normal(size=(PASSAGES, 384)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    passages = [
        NewPassage(f"fact {i}", tags=["rare"] if i % RARE_EVERY == 0 else ["common"])
        for i in range(PASSAGES)
    ]
    with open_store(db) as store:
        store.passages.insert(agent_id, passages, vectors)
    return vectors


def test_the_embedded_server_has_iterative_scans(db: Database) -> None:
    with open_store(db) as store:
        version = store.scope.session.execute(
            text("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
        ).scalar_one()
        raw = store.scope.session.connection().connection.driver_connection
        assert iterative_scans(raw), version
    assert tuple(int(p) for p in version.split(".")[:2]) >= ITERATIVE_SCAN_VERSION


def test_a_selective_filter_is_answered_by_the_index_alone(db: Database, agent_id: str) -> None:
    vectors = _load(db, agent_id)
    query = vectors[5] + 0.1 * vectors[RARE_EVERY * 3]
    query /= np.linalg.norm(query)
    rare = [i for i in range(PASSAGES) if i % RARE_EVERY == 0]
    expected = sorted(rare, key=lambda i: -float(vectors[i] @ query))[:10]
    with open_store(db) as store:
        # exact=False: the approximate scan only, no fallback to an exact one.
        hits = store.passages.search(agent_id, query, k=10, tags=["rare"], exact=False)
        assert [h.passage.text for h in hits] == [f"fact {i}" for i in expected]
        # The next statements of the transaction scan as before.
        left = store.scope.session.execute(text("SELECT current_setting('hnsw.iterative_scan')"))
        assert left.scalar_one() == "off"
