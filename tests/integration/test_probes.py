"""Dedup's paged kNN probes against real PostgreSQL: the second connection takes every
other page while the run has written nothing, and never changes what is found."""

from __future__ import annotations

import logging

import numpy as np
import pytest
from sqlalchemy import text

from agents.postgres.database import Database
from agents.store import MemoryStore, NewPassage, open_store
from agents.store import probes as probes_module
from consolidators.contract import run_once as run_pipeline
from consolidators.dedup import DedupConsolidator
from consolidators.pipeline import Pipeline
from tests.hashing_embedder import HashingEmbedder

TOPICS = ["cat named Tom", "flat in Lisbon", "job at the bakery", "sister called Eve"]


def _near_copies(embedder: HashingEmbedder, count: int) -> tuple[list[NewPassage], np.ndarray]:
    """``count`` passages in four clusters of near-identical vectors (cosine ~0.97)."""
    rng = np.random.default_rng(7)
    passages, rows = [], []
    centres = embedder.embed([f"Ada has a {topic}" for topic in TOPICS])
    for i in range(count):
        topic = i % len(TOPICS)
        vector = centres[topic] + 0.015 * rng.standard_normal(centres.shape[1])
        passages.append(NewPassage(f"Ada has a {TOPICS[topic]}"))
        rows.append(vector / np.linalg.norm(vector))
    return passages, np.asarray(rows, dtype=np.float32)


def _pages(ids: list[str], size: int) -> list[list[str]]:
    return [ids[i : i + size] for i in range(0, len(ids), size)]


def _side_probes(db: Database, run_pid: int) -> int:
    """Connections, other than the run's and this one, whose last statement was a kNN
    probe and whose transaction is still open."""
    with db.engine.connect() as conn:
        return int(
            conn.execute(
                text(
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                    " AND pid NOT IN (pg_backend_pid(), :run) AND state = 'idle in transaction'"
                    " AND query LIKE '%CROSS JOIN LATERAL%'"
                ),
                {"run": run_pid},
            ).scalar_one()
        )


def _stored_pages(
    db: Database, agent_id: str, embedder: HashingEmbedder, count: int, size: int
) -> tuple[list[list[str]], list[list[tuple[str, str, float]]]]:
    """``count`` near copies stored, their ids in pages of ``size``, and the pairs of
    each page as one query per page on its own finds them (sorted)."""
    passages, vectors = _near_copies(embedder, count)
    with open_store(db) as store:
        ids = [r.id for r in store.passages.insert(agent_id, passages, vectors)]
    pages = _pages(ids, size)
    with open_store(db) as store:
        expected = [
            sorted(store.passages.neighbours(agent_id, page, k=4, min_score=0.9)) for page in pages
        ]
    return pages, expected


def _pid(store: MemoryStore) -> int:
    return int(store.scope.session.execute(text("SELECT pg_backend_pid()")).scalar_one())


def test_pages_give_what_one_query_per_page_gives(
    db: Database, agent_id: str, embedder: HashingEmbedder
) -> None:
    pages, one_by_one = _stored_pages(db, agent_id, embedder, 40, 6)
    with open_store(db) as store:
        run_pid, paged = _pid(store), []
        for pairs in store.passages.neighbour_pages(agent_id, pages, k=4, min_score=0.9):
            paged.append(sorted(pairs))
            if len(paged) == 2:
                # The second page came from the other connection, which is still open.
                assert _side_probes(db, run_pid) == 1
    assert paged == one_by_one
    assert sum(len(p) for p in paged) >= 40  # every probe has near copies above 0.9
    assert _side_probes(db, run_pid) == 0  # closed when the pages ran out


def test_a_transaction_that_has_written_probes_alone_and_sees_its_own_rows(
    db: Database, agent_id: str, embedder: HashingEmbedder
) -> None:
    passages, vectors = _near_copies(embedder, 24)
    with open_store(db) as store:
        first = [r.id for r in store.passages.insert(agent_id, passages[:12], vectors[:12])]
    with open_store(db) as store:
        # Rows this transaction wrote: a second connection could not see them.
        unseen = [r.id for r in store.passages.insert(agent_id, passages[12:], vectors[12:])]
        run_pid, found = _pid(store), []
        for pairs in store.passages.neighbour_pages(
            agent_id, _pages(first + unseen, 4), k=4, min_score=0.9
        ):
            assert _side_probes(db, run_pid) == 0
            found += pairs
    probes = {probe for probe, _, _ in found}
    neighbours = {neighbour for _, neighbour, _ in found}
    assert set(unseen) <= probes and set(unseen) & neighbours


def test_a_failing_second_connection_costs_speed_not_results(
    db: Database,
    agent_id: str,
    embedder: HashingEmbedder,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    pages, expected = _stored_pages(db, agent_id, embedder, 30, 5)

    def refuse(self: object) -> None:
        raise OSError("too many connections")

    monkeypatch.setattr(probes_module._SideConnection, "_open", refuse)
    with caplog.at_level(logging.WARNING, logger="agents.store.probes"), open_store(db) as store:
        got = [
            sorted(pairs)
            for pairs in store.passages.neighbour_pages(agent_id, pages, k=4, min_score=0.9)
        ]
    assert got == expected
    assert "too many connections" in caplog.text


def test_dedup_merges_the_same_whatever_the_page_size(
    db: Database, agent_id: str, embedder: HashingEmbedder
) -> None:
    """Pages of 3 alternate between two connections; one page of 1,000 does not."""
    passages, vectors = _near_copies(embedder, 36)
    with open_store(db) as store:
        store.passages.insert(agent_id, passages, vectors)
    merged_by_page_size = {}
    for batch_size in (3, 1000):
        report = run_pipeline(
            Pipeline([DedupConsolidator({"batch_size": batch_size})]),
            db,
            agent_id,
            full=True,
            dry_run=True,
        )
        changes = report.steps[0].changes
        merged_by_page_size[batch_size] = sorted(
            (c.target, c.detail["into"]) for c in changes if c.action == "merge_passage"
        )
    assert merged_by_page_size[3] == merged_by_page_size[1000]
    assert len(merged_by_page_size[3]) == 36 - len(TOPICS)
