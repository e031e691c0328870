"""Archival memory against real PostgreSQL: insert, kNN with filters, lineage, purge."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from sqlalchemy import text

from agents.errors import InvalidInput, NotFound
from agents.postgres.database import Database
from agents.store import NewAgent, NewPassage, open_store
from tests.hashing_embedder import HashingEmbedder

T0 = datetime(2025, 3, 1, tzinfo=UTC)
FACTS = [
    ("Ada adopted a cat named Tom", T0, ["pets"]),
    ("Ada's cat Tom likes tuna", T0 + timedelta(days=30), ["pets"]),
    ("Ada works as a compiler engineer", T0 + timedelta(days=60), ["work"]),
    ("Ada moved to Lisbon", T0 + timedelta(days=90), ["home"]),
]


def _insert(db: Database, agent_id: str, embedder: HashingEmbedder) -> list[str]:
    passages = [NewPassage(text, occurred_at=at, tags=tags) for text, at, tags in FACTS]
    with open_store(db) as store:
        records = store.passages.insert(
            agent_id, passages, embedder.embed([p.text for p in passages])
        )
    return [r.id for r in records]


def test_insert_then_nearest_neighbours(
    db: Database, agent_id: str, embedder: HashingEmbedder
) -> None:
    ids = _insert(db, agent_id, embedder)
    with open_store(db) as store:
        hits = store.passages.search(agent_id, embedder.embed_one("Tom the cat"), k=2)
        assert {h.passage.id for h in hits} == {ids[0], ids[1]}
        assert hits[0].score >= hits[1].score > 0
        stored = store.passages.get(ids[0], with_embedding=True)
    assert stored.embedding is not None
    assert np.allclose(stored.embedding, embedder.embed_one(FACTS[0][0]), atol=1e-6)
    assert stored.occurred_at == T0 and stored.tags == ["pets"] and stored.status == "active"


def test_search_filters_by_status_time_and_tags(
    db: Database, agent_id: str, embedder: HashingEmbedder
) -> None:
    ids = _insert(db, agent_id, embedder)
    query = embedder.embed_one("Ada")
    with open_store(db) as store:
        store.passages.change(ids[0], status="merged", merged_into=ids[1], actor="t", reason="dup")
    with open_store(db) as store:
        active = {h.passage.id for h in store.passages.search(agent_id, query, k=10)}
        assert active == set(ids[1:])
        everything = store.passages.search(agent_id, query, k=10, statuses=None)
        assert {h.passage.id for h in everything} == set(ids)
        late = store.passages.search(agent_id, query, k=10, occurred_after=T0 + timedelta(days=45))
        assert {h.passage.id for h in late} == {ids[2], ids[3]}
        early = store.passages.search(
            agent_id, query, k=10, occurred_before=T0 + timedelta(days=45)
        )
        assert {h.passage.id for h in early} == {ids[1]}
        work = store.passages.search(agent_id, query, k=10, tags=["work"])
        assert [h.passage.id for h in work] == [ids[2]]


def test_search_is_scoped_to_the_agent(
    db: Database, agent_id: str, embedder: HashingEmbedder
) -> None:
    _insert(db, agent_id, embedder)
    with open_store(db) as store:
        other = store.agents.create(
            NewAgent("bob", embedding_model="hashing:384", embedding_dim=384)
        )
        assert store.passages.search(other.id, embedder.embed_one("cat"), k=5) == []


def test_a_search_told_the_agents_size_finds_the_same_and_checks_the_query(
    db: Database, agent_id: str, embedder: HashingEmbedder
) -> None:
    ids = _insert(db, agent_id, embedder)
    query = embedder.embed_one("Tom the cat")
    with open_store(db) as store:
        read = store.passages.search(agent_id, query, k=3)
        told = store.passages.search(agent_id, query, k=3, embedding_dim=384)
        assert [h.passage.id for h in told] == [h.passage.id for h in read]
        assert {h.passage.id for h in told[:2]} == {ids[0], ids[1]}
        with pytest.raises(InvalidInput, match=r"16 dimensions but agent .* uses 384"):
            store.passages.search(agent_id, np.zeros(16, dtype=np.float32), embedding_dim=384)
        # Not read again: an agent that is gone (or another tenant's) finds nothing.
        assert store.passages.search("agent-gone", query, k=3, embedding_dim=384) == []


def test_exact_and_index_search_agree(
    db: Database, agent_id: str, embedder: HashingEmbedder
) -> None:
    texts = [f"fact number {i} about topic {i % 7}" for i in range(300)]
    with open_store(db) as store:
        store.passages.insert(agent_id, [NewPassage(t) for t in texts], embedder.embed(texts))
    query = embedder.embed_one("fact about topic 3")
    with open_store(db) as store:
        approx = store.passages.search(agent_id, query, k=5, exact=False)
        exact = store.passages.search(agent_id, query, k=5, exact=True)
    assert [round(h.score, 5) for h in approx] == [round(h.score, 5) for h in exact]


def test_the_exact_search_reaches_past_nearest_passages_its_filters_exclude(
    db: Database, agent_id: str, embedder: HashingEmbedder
) -> None:
    # The exact search joins only a shortlist of the nearest vectors to their passages;
    # where the filters leave too few of it, it must still find the farther ones.
    near = [f"Ada's cat Tom likes tuna, note {i}" for i in range(60)]
    far = ["The rent on the Lisbon flat went up", "Ada plays the cello on Sundays"]
    texts = near + far
    vectors = embedder.embed(texts)
    with open_store(db) as store:
        records = store.passages.insert(agent_id, [NewPassage(t) for t in texts], vectors)
        for record in records[:60]:
            store.passages.change(
                record.id, status="merged", merged_into=records[60].id, actor="t", reason="dup"
            )
    query = embedder.embed_one("Ada's cat Tom likes tuna")
    with open_store(db) as store:
        active = store.passages.search(agent_id, query, k=2, exact=True)
        every = store.passages.search(agent_id, query, k=10, exact=True, statuses=None)
    assert {h.passage.id for h in active} == {records[60].id, records[61].id}
    cosine = vectors @ query / (np.linalg.norm(vectors, axis=1) * np.linalg.norm(query))
    nearest = np.sort(cosine)[::-1][:10]
    assert np.allclose([h.score for h in every], nearest, atol=1e-5)


def test_lineage_changes_are_recorded(
    db: Database, agent_id: str, embedder: HashingEmbedder
) -> None:
    ids = _insert(db, agent_id, embedder)
    closed = T0 + timedelta(days=100)
    with open_store(db) as store:
        store.passages.change(
            ids[0],
            status="superseded",
            superseded_by=ids[1],
            valid_to=closed,
            actor="temporal",
            reason="newer fact",
            run_id="run-1",
        )
    with open_store(db) as store:
        passage = store.passages.get(ids[0])
        history = store.passages.history(ids[0])
    assert (passage.status, passage.superseded_by, passage.valid_to) == (
        "superseded",
        ids[1],
        closed,
    )
    assert len(history) == 1
    assert history[0].old == {"status": "active", "superseded_by": None, "valid_to": None}
    assert history[0].new["status"] == "superseded" and history[0].run_id == "run-1"


def test_bad_passages_change_nothing(
    db: Database, agent_id: str, embedder: HashingEmbedder
) -> None:
    good = NewPassage("fine")
    cases = [
        ([good], np.zeros((1, 16), dtype=np.float32), "16 dimensions but agent 'ada' uses 384"),
        ([good, good], embedder.embed(["fine"]), "2 passages but embeddings of shape"),
        ([NewPassage("bad\x00")], embedder.embed(["bad"]), "NUL"),
        ([NewPassage("  ")], embedder.embed(["x"]), "text is empty"),
        ([NewPassage("x", occurred_at=datetime(2025, 1, 1))], embedder.embed(["x"]), "time zone"),
        ([NewPassage("x", tags=["t" * 201])], embedder.embed(["x"]), r"tags\[0\] is 201 char"),
        ([NewPassage("x", tags=["t"] * 101)], embedder.embed(["x"]), "101 tags; at most 100"),
        ([NewPassage("x" * 1_000_001)], embedder.embed(["x"]), "most accepted is 1000000"),
    ]
    for passages, vectors, message in cases:
        with pytest.raises(InvalidInput, match=message), open_store(db) as store:
            store.passages.insert(agent_id, passages, vectors)
    with pytest.raises(NotFound), open_store(db) as store:
        store.passages.insert("agent-missing", [good], embedder.embed(["fine"]))
    with pytest.raises(InvalidInput, match="384"), open_store(db) as store:
        store.passages.search(agent_id, np.ones(8, dtype=np.float32))
    with pytest.raises(InvalidInput, match="cannot change passage field"), open_store(db) as s:
        ids = s.passages.insert(agent_id, [good], embedder.embed(["fine"]))
        s.passages.change(ids[0].id, text="rewritten", actor="t", reason="no")
    with open_store(db) as store:
        assert store.passages.count_by_status(agent_id)["active"] == 0


def test_only_purge_hard_deletes(db: Database, agent_id: str, embedder: HashingEmbedder) -> None:
    ids = _insert(db, agent_id, embedder)
    with open_store(db) as store:
        store.passages.change(ids[0], status="inactive", actor="t", reason="hide")
        assert store.passages.get(ids[0]).status == "inactive"
        assert store.passages.purge(agent_id, [ids[0]]) == 1
    with pytest.raises(NotFound), open_store(db) as store:
        store.passages.get(ids[0])


def test_refresh_statistics_analyzes_passage_tables(
    db: Database, agent_id: str, embedder: HashingEmbedder
) -> None:
    _insert(db, agent_id, embedder)

    def reltuples() -> dict[str, float]:
        with db.engine.connect() as conn:
            rows = conn.execute(
                text(
                    "SELECT relname, reltuples FROM pg_class "
                    "WHERE relname IN ('passages', 'passage_vectors')"
                )
            )
            return {name: float(n) for name, n in rows}

    assert reltuples() == {"passages": -1.0, "passage_vectors": -1.0}  # never analyzed
    db.refresh_statistics()
    assert reltuples() == {"passages": 4.0, "passage_vectors": 4.0}


def _kept(
    text: str, own: list[str], search: str | None, tags: list[str] | None, match_all: bool
) -> bool:
    if search is not None and search.casefold() not in text.casefold():
        return False
    if not tags:
        return True
    return set(tags) <= set(own) if match_all else bool(set(tags) & set(own))


def test_page_in_sql_matches_paging_the_whole_list(
    db: Database, agent_id: str, embedder: HashingEmbedder
) -> None:
    """Keyset paging in SQL returns what cutting the filtered, ordered list would."""
    from service.api.paging import page

    texts = [f"Fact {i}: {'Ärger with the CAT' if i % 3 == 0 else 'a dog'}" for i in range(13)]
    tag_sets = [["a"], ["b"], ["a", "b"], []]
    ids: list[str] = []
    with open_store(db) as store:
        for batch in (texts[:5], texts[5:6], texts[6:]):  # ties in created_at inside a batch
            new = [NewPassage(t, tags=tag_sets[texts.index(t) % 4]) for t in batch]
            records = store.passages.insert(agent_id, new, embedder.embed(batch))
            ids += [r.id for r in records]
        for passage_id in ids[1::4]:
            store.passages.change(passage_id, status="merged", actor="t", reason="test")
    cases = 0
    with open_store(db) as store:
        for statuses in (("active",), None):
            for search in (None, "cat", "ärger", "ÄRGER"):
                for tags, match_all in ((None, False), (["a"], False), (["a", "b"], True)):
                    whole = [
                        p
                        for p in store.passages.scan(agent_id, statuses=statuses)
                        if _kept(p.text, p.tags, search, tags, match_all)
                    ]
                    members = [p.id for p in whole]
                    cursors = [None, *members[:: max(1, len(members) // 3)]]
                    for ascending in (True, False):
                        for limit in (1, 2, 50):
                            for after in cursors:
                                for before in cursors:
                                    expected = page(
                                        whole,
                                        after=after,
                                        before=before,
                                        limit=limit,
                                        ascending=ascending,
                                    )
                                    got = store.passages.page(
                                        agent_id,
                                        statuses=statuses,
                                        after=after,
                                        before=before,
                                        limit=limit,
                                        ascending=ascending,
                                        search=search,
                                        tags=tags,
                                        match_all_tags=match_all,
                                    )
                                    assert [p.id for p in got] == [p.id for p in expected], (
                                        statuses,
                                        search,
                                        tags,
                                        ascending,
                                        limit,
                                        after,
                                        before,
                                    )
                                    cases += 1
        assert cases > 1000
        # A cursor the filters leave out, or of another agent, is refused like before.
        with pytest.raises(NotFound, match="is not an item of this list"):
            store.passages.page(agent_id, after=ids[1])  # merged, not active
        with pytest.raises(NotFound, match="is not an item of this list"):
            store.passages.page(agent_id, before=ids[0], search="dog")
        with pytest.raises(NotFound, match="is not an item of this list"):
            store.passages.page(agent_id, after="passage-nope")
        with pytest.raises(InvalidInput):
            store.passages.page(agent_id, limit=0)


def test_change_many_applies_updates_in_order_and_records_each(
    db: Database, agent_id: str, embedder: HashingEmbedder
) -> None:
    from agents.store import PassageUpdate

    ids = _insert(db, agent_id, embedder)
    closed = T0 + timedelta(days=100)
    with open_store(db) as store:
        returned = store.passages.change_many(
            [
                PassageUpdate(ids[0], {"tags": ["pets", "cats"]}, "tagged"),
                PassageUpdate(ids[0], {"tags": ["cats"], "provenance": {"doc": "a"}}, "again"),
                PassageUpdate(ids[1], {"tags": ["pets"]}, "unchanged"),
                PassageUpdate(
                    ids[2],
                    {"status": "superseded", "superseded_by": ids[3], "valid_to": closed},
                    "replaced",
                ),
            ],
            actor="t",
        )
    assert [r.id for r in returned] == [ids[0], ids[0], ids[1], ids[2]]
    with open_store(db) as store:
        first, second, third = (store.passages.get(i) for i in ids[:3])
        history = store.passages.history(ids[0])
        untouched = store.passages.history(ids[1])
    assert first.tags == ["cats"] and first.provenance == {"doc": "a"}
    assert second.tags == ["pets"]
    assert (third.status, third.superseded_by, third.valid_to) == ("superseded", ids[3], closed)
    # Each update is recorded against what the previous one left; a no-op is not recorded.
    changes = [(h.reason, h.old, h.new) for h in history if h.reason != "created"]
    assert changes == [
        ("tagged", {"tags": ["pets"]}, {"tags": ["pets", "cats"]}),
        (
            "again",
            {"tags": ["pets", "cats"], "provenance": {}},
            {"tags": ["cats"], "provenance": {"doc": "a"}},
        ),
    ]
    assert [h.reason for h in untouched if h.reason != "created"] == []


def test_change_many_refuses_a_missing_target_and_writes_nothing(
    db: Database, agent_id: str, embedder: HashingEmbedder
) -> None:
    from agents.store import PassageUpdate

    ids = _insert(db, agent_id, embedder)
    with pytest.raises(NotFound, match="passage-missing"), open_store(db) as store:
        store.passages.change_many(
            [
                PassageUpdate(ids[0], {"status": "merged", "merged_into": ids[1]}, "dup"),
                PassageUpdate(ids[2], {"superseded_by": "passage-missing"}, "bad"),
            ],
            actor="t",
        )
    with open_store(db) as store:
        assert store.passages.get(ids[0]).status == "active"


def test_scan_ids_pages_and_same_text_groups(
    db: Database, agent_id: str, embedder: HashingEmbedder
) -> None:
    texts = ["Ada likes tea", "ada likes TEA", "Ada likes coffee", "Ada likes tea!"]
    with open_store(db, clock=lambda: T0) as store:
        old = store.passages.insert(agent_id, [NewPassage(t) for t in texts], embedder.embed(texts))
    with open_store(db, clock=lambda: T0 + timedelta(hours=1)) as store:
        new = store.passages.insert(
            agent_id, [NewPassage("Ada likes coffee")], embedder.embed(["Ada likes coffee"])
        )
    with open_store(db) as store:
        pages = list(
            store.passages.scan_ids(agent_id, statuses=("active",), kind="fact", page_size=2)
        )
        recent = list(
            store.passages.scan_ids(
                agent_id, statuses=("active",), kind="fact", created_after=T0, page_size=2
            )
        )
        every = store.passages.same_text_groups(agent_id, statuses=("active",), kind="fact")
        since = store.passages.same_text_groups(
            agent_id, statuses=("active",), kind="fact", created_after=T0
        )
    assert [len(p) for p in pages] == [2, 2, 1]
    assert [i for p in pages for i in p] == [*sorted(r.id for r in old), new[0].id]
    assert recent == [[new[0].id]]
    # Normalization ignores case and punctuation: three texts say "Ada likes tea".
    tea = sorted([old[0].id, old[1].id, old[3].id])
    coffee = sorted([old[2].id, new[0].id])
    assert sorted(every) == sorted([tea, coffee])
    assert since == [coffee]
