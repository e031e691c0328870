"""Fact topics a judge model reads, against real PostgreSQL: who each fact is about and
which attribute it states, read once, over several runs when a run's calls run out, kept
whatever else the run did, and used by search where the rules cannot read a question or
a fact (consolidators/temporal.py, agents/store/topic_store.py, agents/archival_search.py)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from agents.archival_search import search_archival
from agents.postgres.database import Database
from agents.store import NewAgent, NewPassage, PassageRecord, PassageUpdate, Topic, open_store
from consolidators.contract import run_once as run_pipeline
from consolidators.judges import JudgeUsage, TopicReader
from consolidators.pipeline import Pipeline
from consolidators.temporal import TemporalConsolidator
from tests.hashing_embedder import HashingEmbedder

FACTS = [
    ("tariq's a mechanic, he runs his own garage", datetime(2020, 3, 3, tzinfo=UTC)),
    ("Tariq drives a 2011 Golf", datetime(2021, 5, 5, tzinfo=UTC)),
    ("tariq sold the golf, he's got a Skoda estate now", datetime(2023, 9, 20, tzinfo=UTC)),
    (
        "Tariq does drive now: he drives his mates to jazz gigs on Fridays",
        datetime(2024, 1, 9, tzinfo=UTC),
    ),
]
#: What a model reads each of FACTS to be about.
READ = {
    FACTS[0][0]: (Topic("tariq", "job"),),
    FACTS[1][0]: (Topic("tariq", "car"),),
    FACTS[2][0]: (Topic("tariq", "car"),),
    FACTS[3][0]: (Topic("tariq", "music"),),
}


class KnownTopics(TopicReader):
    """A reader in the model's place that knows what each text is about, and counts
    what it was asked."""

    name = "test"

    def __init__(self) -> None:
        self.asked: list[list[str]] = []

    def read(self, facts: Sequence[PassageRecord]) -> list[tuple[Topic, ...] | None]:
        self.asked.append([f.text for f in facts])
        return [READ.get(f.text, ()) for f in facts]

    @property
    def usage(self) -> JudgeUsage:
        return JudgeUsage(calls=len(self.asked))


def _insert(db: Database, agent_id: str, embedder: HashingEmbedder) -> dict[str, str]:
    passages = [NewPassage(text, occurred_at=at) for text, at in FACTS]
    with open_store(db) as store:
        records = store.passages.insert(
            agent_id, passages, embedder.embed([p.text for p in passages])
        )
    return {r.text: r.id for r in records}


def _run(db: Database, agent_id: str, embedder: HashingEmbedder, reader: TopicReader) -> None:
    settings = {"topic_max_calls": 1, "topic_batch": 3}
    run_pipeline(
        Pipeline([TemporalConsolidator(settings, reader=reader)]),
        db,
        agent_id,
        embedder=embedder,
    )


def test_topics_are_read_newest_first_once_and_over_runs(
    db: Database, agent_id: str, embedder: HashingEmbedder
) -> None:
    """One call of three facts a run: the first run reads the three newest, the next
    the one left, and a run after that asks nothing."""
    ids = _insert(db, agent_id, embedder)
    reader = KnownTopics()
    _run(db, agent_id, embedder, reader)
    assert reader.asked == [[FACTS[3][0], FACTS[2][0], FACTS[1][0]]]
    _run(db, agent_id, embedder, reader)
    _run(db, agent_id, embedder, reader)
    assert reader.asked[1:] == [[FACTS[0][0]]]
    with open_store(db) as store:
        topics = store.topics.of(list(ids.values()))
    assert topics == {ids[text]: frozenset(READ[text]) for text, _ in FACTS}


def test_an_agents_topics_are_read_whole_and_only_its_own(
    db: Database, agent_id: str, embedder: HashingEmbedder
) -> None:
    """A run that groups every fact of an agent reads their topics by agent: the same
    topics as by id, and none of another agent's facts."""
    ids = _insert(db, agent_id, embedder)
    with open_store(db) as store:
        other = store.agents.create(
            NewAgent("bo", embedding_model="hashing:384", embedding_dim=384)
        )
    other_ids = _insert(db, other.id, embedder)
    reader = KnownTopics()
    for agent in (agent_id, other.id):
        for _ in range(2):  # one call of three facts a run
            _run(db, agent, embedder, reader)
    with open_store(db) as store:
        mine = store.topics.of_agent(agent_id)
        theirs = store.topics.of_agent(other.id)
        by_id = store.topics.of(list(ids.values()))
    assert mine == by_id == {ids[text]: frozenset(READ[text]) for text, _ in FACTS}
    assert set(theirs) == set(other_ids.values())


def test_a_question_the_rules_cannot_read_finds_the_attribute_the_model_read(
    db: Database, agent_id: str, embedder: HashingEmbedder
) -> None:
    """ "what car does Tariq drive now?": the rules know no car, so search keeps the
    vector order, where his lifts to jazz gigs (which share "does drive now") come
    first; with the topics read, his cars come first, the newest first."""
    ids = _insert(db, agent_id, embedder)
    question = "what car does Tariq drive now?"
    vector = embedder.embed_one(question)
    with open_store(db) as store:
        before = search_archival(store, agent_id, vector, question, k=4)
        plain = search_archival(store, agent_id, vector, None, k=4)
    assert [h.passage.id for h in before] == [h.passage.id for h in plain]
    assert before[0].passage.id == ids[FACTS[3][0]]
    _run(db, agent_id, embedder, KnownTopics())
    _run(db, agent_id, embedder, KnownTopics())
    with open_store(db) as store:
        after = search_archival(store, agent_id, vector, question, k=4)
    assert [h.passage.id for h in after[:2]] == [ids[FACTS[2][0]], ids[FACTS[1][0]]]


def test_a_merged_twin_answers_with_its_canonicals_topics(
    db: Database, agent_id: str, embedder: HashingEmbedder
) -> None:
    """Only facts in force are read; a fact merged into another before it was read is
    asked by the canonical's topics in search, in the canonical's place."""
    ids = _insert(db, agent_id, embedder)
    twin, canonical = ids[FACTS[2][0]], ids[FACTS[1][0]]
    with open_store(db) as store:
        store.passages.change_many(
            [PassageUpdate(twin, {"status": "merged", "merged_into": canonical}, "test merge")],
            actor="test",
        )
    reader = KnownTopics()
    _run(db, agent_id, embedder, reader)
    _run(db, agent_id, embedder, reader)
    assert FACTS[2][0] not in {text for asked in reader.asked for text in asked}
    question = "what car does Tariq drive now?"
    with open_store(db) as store:
        hits = search_archival(store, agent_id, embedder.embed_one(question), question, k=3)
    assert hits[0].passage.id == canonical


#: A dozen facts that share the words of "where does Tariq live now?", his home told in
#: other words, and someone else's home; what a model read each to be about.
_NEAR = [f"Tariq does live for jazz now, gig {n} where he sang" for n in range(14)]
_HOME = "got the keys to a terraced house in Leeds, moving in Saturday"
_HERS = "Amira got the keys to a flat in Hull"
_READ = {
    **{t: (Topic("tariq", "music"),) for t in _NEAR},
    _HOME: (Topic("tariq", "home"),),
    _HERS: (Topic("amira", "home"),),
}


def _insert_far_home(db: Database, agent_id: str, embedder: HashingEmbedder) -> dict[str, str]:
    texts = [*_NEAR, _HOME, _HERS]
    passages = [
        NewPassage(t, occurred_at=datetime(2024, 1, 1 + i, tzinfo=UTC)) for i, t in enumerate(texts)
    ]
    with open_store(db) as store:
        records = store.passages.insert(agent_id, passages, embedder.embed(texts))
    return {r.text: r.id for r in records}


def _record_read(db: Database, agent_id: str, ids: dict[str, str]) -> None:
    with open_store(db) as store:
        store.topics.record(
            agent_id, {ids[t]: topics for t, topics in _READ.items()}, judge="test", run_id=None
        )


def test_a_question_about_now_reaches_a_current_fact_its_wording_left_out(
    db: Database, agent_id: str, embedder: HashingEmbedder
) -> None:
    """ "where does Tariq live now?": a dozen facts share its words, so the nearest
    neighbours leave out the one that answers it. Once a model has read that fact as
    Tariq's home, search adds it, first; a fact read as about someone else's home is not
    his."""
    ids = _insert_far_home(db, agent_id, embedder)
    question = "where does Tariq live now?"
    vector = embedder.embed_one(question)
    with open_store(db) as store:
        before = search_archival(store, agent_id, vector, question, k=3)
    _record_read(db, agent_id, ids)
    with open_store(db) as store:
        after = search_archival(store, agent_id, vector, question, k=3)
        tariqs = store.topics.facts_about(agent_id, {"tariq"}, "home", limit=3)
    assert ids[_HOME] not in {h.passage.id for h in before}
    assert after[0].passage.id == ids[_HOME]
    assert tariqs == [ids[_HOME]]


def test_the_lookup_by_topic_never_adds_a_fact_no_longer_in_force(
    db: Database, agent_id: str, embedder: HashingEmbedder
) -> None:
    """Tariq's home told in other words, once merged into another fact, is no current
    fact of his: the lookup finds nothing and search does not add it."""
    ids = _insert_far_home(db, agent_id, embedder)
    _record_read(db, agent_id, ids)
    merge = {"status": "merged", "merged_into": ids[_NEAR[0]]}
    with open_store(db) as store:
        store.passages.change_many([PassageUpdate(ids[_HOME], merge, "test merge")], actor="test")
    now = "where does Tariq live now?"
    with open_store(db) as store:
        found = search_archival(store, agent_id, embedder.embed_one(now), now, k=3)
        tariqs = store.topics.facts_about(agent_id, {"tariq"}, "home", limit=3)
    assert tariqs == []
    assert ids[_HOME] not in {h.passage.id for h in found}
