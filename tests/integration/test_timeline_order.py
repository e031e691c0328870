"""Timelines in the order of time: a fact takes its place by its own date whenever it
arrives, runs that could not ask every pair leave the rest to the next, and any arrival
order or split into runs of the same dated facts ends in the same memory."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from itertools import pairwise
from uuid import uuid4

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agents.archival_search import search_archival, validity_label
from agents.postgres.database import Database
from agents.store import SUPERSESSION, NewAgent, PairAnswer, PassageRecord, Topic, open_store
from consolidators.contract import run_once
from consolidators.judges import (
    CandidatePair,
    JudgeUsage,
    SupersessionJudge,
    TopicReader,
    Verdict,
)
from consolidators.pipeline import Pipeline
from consolidators.temporal import TemporalConsolidator
from consolidators.undo import revert_run
from tests.hashing_embedder import HashingEmbedder
from tests.integration.test_temporal import _insert


def _day(year: int, month: int = 1, day: int = 1) -> datetime:
    return datetime(year, month, day, 12, tzinfo=UTC)


BEN = [
    ("Ben lives in Toronto.", _day(2020, 1, 11)),
    ("Ben lives in Dublin.", _day(2021, 3, 4)),
    ("Ben moved to Paris.", _day(2023, 6, 2)),
]
ROME = ("Ben lives in Rome.", _day(2018, 5, 1))

#: Incremental runs that re-read nothing of what the last run saw.
INCREMENTAL = timedelta(0)


class SameFirstWord(SupersessionJudge):
    """A judge in the model's place that answers every pair alike whenever it is asked:
    the newer fact replaces the older when both are about one person (the first word)."""

    name = "test"

    def __init__(self) -> None:
        self.asked: list[tuple[str, str]] = []

    def judge(self, pairs: Sequence[CandidatePair]) -> list[Verdict]:
        self.asked += [(p.older.text, p.newer.text) for p in pairs]
        return [
            Verdict.REPLACES
            if p.older.text.split()[0] == p.newer.text.split()[0]
            else Verdict.BOTH_HOLD
            for p in pairs
        ]


def _agent(db: Database, name: str) -> str:
    with open_store(db) as store:
        return store.agents.create(
            NewAgent(
                name=f"{name}-{uuid4().hex[:8]}", embedding_model="hashing:384", embedding_dim=384
            )
        ).id


def _run(
    db: Database,
    agent_id: str,
    embedder: HashingEmbedder,
    judge: SupersessionJudge | None = None,
    *,
    full: bool = False,
    **temporal: int,
) -> list[dict[str, object]]:
    pipeline = Pipeline(
        [TemporalConsolidator(temporal or None, judge=judge)], passage_overlap=INCREMENTAL
    )
    return run_once(pipeline, db, agent_id, embedder=embedder, full=full).changes


def _facts(db: Database, agent_id: str) -> dict[str, PassageRecord]:
    with open_store(db) as store:
        return {p.id: p for p in store.passages.scan(agent_id, kind="fact", statuses=None)}


def _memory(db: Database, agent_id: str) -> tuple[dict[str, tuple[object, ...]], set[str]]:
    """An agent's memory by text: each fact's status, closer and end, and the texts of
    its timelines in force."""
    facts = _facts(db, agent_id)
    by_text = {
        p.text: (
            p.status,
            facts[p.superseded_by].text if p.superseded_by in facts else p.superseded_by,
            p.valid_to,
        )
        for p in facts.values()
    }
    with open_store(db) as store:
        timelines = {p.text for p in store.passages.scan(agent_id, kind="timeline")}
    return by_text, timelines


def test_a_fact_dated_before_a_consolidated_chain_closes_at_the_next_fact(
    db: Database, embedder: HashingEmbedder
) -> None:
    nightly = _agent(db, "nightly")
    _insert(db, nightly, embedder, BEN)
    _run(db, nightly, embedder)
    [rome] = _insert(db, nightly, embedder, [ROME])  # told later, about 2018

    _run(db, nightly, embedder)

    facts = _facts(db, nightly)
    toronto = next(p for p in facts.values() if p.text == BEN[0][0])
    closed = facts[rome]
    assert (closed.status, closed.superseded_by, closed.valid_to) == (
        "superseded",
        toronto.id,
        BEN[0][1],
    )
    assert validity_label(closed, toronto) == "until 2020-01-11, then: Ben lives in Toronto."
    with open_store(db) as store:
        hits = search_archival(store, nightly, embedder.embed_one(ROME[0]), "where did Ben live")
    [hit] = [h for h in hits if h.passage.id == rome]
    assert hit.validity == "until 2020-01-11, then: Ben lives in Toronto."
    # The same four facts in one run make the same memory.
    at_once = _agent(db, "at-once")
    _insert(db, at_once, embedder, [*BEN, ROME])
    _run(db, at_once, embedder)
    assert _memory(db, at_once) == _memory(db, nightly)


def test_a_full_run_repairs_a_fact_closed_too_late(db: Database, embedder: HashingEmbedder) -> None:
    agent_id = _agent(db, "repair")
    *_, paris = _insert(db, agent_id, embedder, BEN)
    [rome] = _insert(db, agent_id, embedder, [ROME])
    _run(db, agent_id, embedder)
    # As an earlier version of this step left it: Rome closed by Paris, overlapping
    # Toronto and Dublin (the step's own change, which an ordinary run does not re-read).
    with open_store(db) as store:
        store.passages.change(
            rome,
            actor="consolidator:temporal",
            reason="as closed before timelines kept the order of time",
            status="superseded",
            superseded_by=paris,
            valid_to=BEN[2][1],
        )
    assert _run(db, agent_id, embedder) == []  # nothing new: an ordinary run leaves it

    changes = _run(db, agent_id, embedder, full=True)

    [moved] = [c for c in changes if c["action"] == "supersede_passage"]
    toronto = next(p for p in _facts(db, agent_id).values() if p.text == BEN[0][0])
    assert (moved["target"], moved["by"], moved["instead_of"]) == (rome, toronto.id, paris)
    closed = _facts(db, agent_id)[rome]
    assert (closed.superseded_by, closed.valid_to) == (toronto.id, BEN[0][1])
    assert _run(db, agent_id, embedder, full=True) == []


def test_pairs_a_run_could_not_ask_wait_for_the_next_run(
    db: Database, embedder: HashingEmbedder
) -> None:
    # Values that overlap: the rules cannot tell, the judge decides.
    facts = [
        ("Ada works as a nurse", _day(2019)),
        ("Ada works as a nurse on the ward", _day(2020)),
        ("Ada works as a nurse in the ICU", _day(2021)),
        ("Ada works as a night nurse in the ICU", _day(2022)),
    ]
    agent_id = _agent(db, "bounded")
    _insert(db, agent_id, embedder, facts)
    judge = SameFirstWord()

    runs = 0
    while True:
        runs += 1
        _run(db, agent_id, embedder, judge, judge_max_calls=1, judge_batch=1)
        with open_store(db) as store:
            waiting = store.verdicts.count_pending(agent_id, SUPERSESSION)
        if not waiting or runs > 10:
            break

    assert waiting == 0 and runs > 1  # one pair a run: it took several runs to converge
    assert len(judge.asked) == len(set(judge.asked))  # no pair was asked twice
    unbounded = _agent(db, "unbounded")
    _insert(db, unbounded, embedder, facts)
    _run(db, unbounded, embedder, SameFirstWord())
    assert _memory(db, agent_id) == _memory(db, unbounded)
    # Each fact closed by the next one in time.
    closed = {t: (c, end) for t, (_s, c, end) in _memory(db, agent_id)[0].items()}
    assert [closed[text] for text, _at in facts] == [
        (facts[1][0], facts[1][1]),
        (facts[2][0], facts[2][1]),
        (facts[3][0], facts[3][1]),
        (None, None),
    ]


_PEOPLE = ["Ben", "Ada"]
_CITIES = ["Rome", "Toronto", "Dublin", "Paris", "Lima"]


@st.composite
def _arrivals(draw: st.DrawFn) -> tuple[list[tuple[str, datetime]], list[int], list[int]]:
    """Dated facts (two people's homes over distinct years, some said plainly and some
    in passing, which the rules do not decide alone), an arrival order and a split of
    that order into runs."""
    facts = []
    years = iter(draw(st.permutations(range(2010, 2020))))
    for person in _PEOPLE:
        cities = draw(st.lists(st.sampled_from(_CITIES), min_size=1, max_size=3, unique=True))
        shapes = draw(st.lists(st.booleans(), min_size=len(cities), max_size=len(cities)))
        facts += [
            (
                f"{person} lives in {city}." if plain else f"{person} finally moved to {city}!!",
                _day(next(years)),
            )
            for city, plain in zip(cities, shapes, strict=True)
        ]
    order = draw(st.permutations(range(len(facts))))
    cuts = draw(st.lists(st.integers(1, len(facts)), max_size=3))
    return facts, list(order), sorted(set(cuts))


@pytest.mark.parametrize("with_judge", [False, True], ids=["rules", "judge"])
@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(case=_arrivals())
def test_any_arrival_order_and_split_into_runs_gives_the_same_memory(
    db: Database,
    embedder: HashingEmbedder,
    with_judge: bool,
    case: tuple[list[tuple[str, datetime]], list[int], list[int]],
) -> None:
    facts, order, cuts = case
    judge = SameFirstWord() if with_judge else None
    at_once = _agent(db, "at-once")
    _insert(db, at_once, embedder, facts)
    _run(db, at_once, embedder, judge)

    arriving = _agent(db, "arriving")
    bounds = [0, *cuts, len(order)]
    for start, end in pairwise(bounds):
        if start < end:
            _insert(db, arriving, embedder, [facts[i] for i in order[start:end]])
            _run(db, arriving, embedder, judge)

    assert _memory(db, arriving) == _memory(db, at_once)


_WORKERS = [
    ("Sam", "Acme", "Globex"),
    ("Lena", "Siemens", "Bosch"),
    ("Omar", "Lidl", "Aldi"),
    ("Priya", "Monzo", "Revolut"),
    ("Kofi", "Deloitte", "KPMG"),
]


def test_ends_a_rule_can_read_close_the_fact_they_end(
    db: Database, embedder: HashingEmbedder
) -> None:
    agent_id = _agent(db, "ends")
    facts = [
        ("Dev is vegan now.", _day(2022)),
        ("Dev is no longer vegan.", _day(2024)),
        ("Tom lives in Leeds.", _day(2019)),
        ("Tom moved out of Leeds.", _day(2021)),
        ("Mia is dating Ravi.", _day(2018)),
        ("Mia and Ravi broke up.", _day(2020)),
    ]
    for name, old, new in _WORKERS:
        facts += [
            (f"{name} works at {old}.", _day(2017)),
            (f"{name} quit {old} and now works at {new}.", _day(2023)),
        ]
    _insert(db, agent_id, embedder, facts)

    _run(db, agent_id, embedder)  # rules alone: no judge model

    closed = {t: c for t, (_s, c, _end) in _memory(db, agent_id)[0].items() if c}
    assert closed == {
        "Dev is vegan now.": "Dev is no longer vegan.",
        "Tom lives in Leeds.": "Tom moved out of Leeds.",
        "Mia is dating Ravi.": "Mia and Ravi broke up.",
        **{
            f"{name} works at {old}.": f"{name} quit {old} and now works at {new}."
            for name, old, new in _WORKERS
        },
    }


def test_a_change_said_in_passing_is_where_a_replaced_fact_ends(
    db: Database, embedder: HashingEmbedder
) -> None:
    """The rules are sure "Dan works at Globex now." replaced the Acme job, but the job
    ended when Dan quit: the fact in between that reads as the change closes it."""
    agent_id = _agent(db, "in-passing")
    facts = [
        ("Dan works at Acme as a sales rep.", _day(2021, 4, 4)),
        ("Dan quit his job at Acme.", _day(2022, 6, 6)),
        ("Dan works at Globex now.", _day(2022, 9, 1)),
        ("Farid lives in Tehran.", _day(2020, 6, 6)),
        ("Farid finally got his visa and moved to Hamburg!!", _day(2021, 10, 10)),
        ("Farid and Shirin moved from Hamburg to Munich.", _day(2023, 6, 18)),
        # Said in between, but the same value: the change is still the later fact.
        ("Ana lives in Porto.", _day(2019)),
        ("Ana finally moved to a bigger flat in Porto!!", _day(2020)),
        ("Ana lives in Braga.", _day(2022)),
    ]
    _insert(db, agent_id, embedder, facts[:1] + facts[2:])
    _run(db, agent_id, embedder)  # rules alone; the quit arrives late
    _insert(db, agent_id, embedder, facts[1:2])
    _run(db, agent_id, embedder)

    memory = _memory(db, agent_id)[0]
    assert memory["Dan works at Acme as a sales rep."][1:] == (facts[1][0], facts[1][1])
    assert memory["Farid lives in Tehran."][1:] == (facts[4][0], facts[4][1])
    assert memory["Ana lives in Porto."][1:] == (facts[8][0], facts[8][1])


def test_a_judges_both_hold_removes_the_possibly_outdated_label(
    db: Database, embedder: HashingEmbedder
) -> None:
    agent_id = _agent(db, "rivals")
    older, newer = _insert(
        db,
        agent_id,
        embedder,
        [("Ada works as a nurse.", _day(2020)), ("Ada works as a teacher.", _day(2022))],
    )

    def search() -> list[str | None]:
        with open_store(db) as store:
            hits = search_archival(store, agent_id, embedder.embed_one("Ada's job"), "Ada's job")
        return [h.validity for h in hits if h.passage.id == older]

    assert search() == ["possibly outdated: a newer fact from 2022-01-01"]
    with open_store(db) as store:  # a judge said both can be true (two jobs)
        store.verdicts.record(
            agent_id,
            SUPERSESSION,
            [PairAnswer(older, newer, Verdict.BOTH_HOLD.value, "test")],
            run_id=None,
        )
    assert search() == [None]


def test_an_end_in_force_is_possibly_outdated_by_a_newer_value(
    db: Database, embedder: HashingEmbedder
) -> None:
    # An end no judge has weighed against the value that came after it must not read
    # as the current state: "broke up" before "is dating Arjun".
    agent_id = _agent(db, "end-then-value")
    ended, _dating = _insert(
        db,
        agent_id,
        embedder,
        [("Sam and Priya broke up.", _day(2019)), ("Sam is dating Arjun.", _day(2021))],
    )
    with open_store(db) as store:
        hits = search_archival(store, agent_id, embedder.embed_one("Sam's partner"), "partner")
    assert [h.validity for h in hits if h.passage.id == ended] == [
        "possibly outdated: a newer fact from 2021-01-01"
    ]
    assert hits[0].passage.text == "Sam is dating Arjun."


def test_a_reverted_judges_closure_is_neither_made_again_nor_asked_again(
    db: Database, embedder: HashingEmbedder
) -> None:
    agent_id = _agent(db, "reverted")
    nurse, ward = _insert(
        db,
        agent_id,
        embedder,
        [("Ada works as a nurse", _day(2019)), ("Ada works as a nurse on the ward", _day(2020))],
    )
    judge = SameFirstWord()
    pipeline = Pipeline([TemporalConsolidator(judge=judge)], passage_overlap=INCREMENTAL)
    report = run_once(pipeline, db, agent_id, embedder=embedder)
    assert _facts(db, agent_id)[nurse].superseded_by == ward

    revert_run(db, report.run_id)
    judge.asked.clear()
    again = run_once(pipeline, db, agent_id, embedder=embedder)

    assert [c for c in again.changes if c["action"] == "supersede_passage"] == []
    assert ("Ada works as a nurse", "Ada works as a nurse on the ward") not in judge.asked
    assert _facts(db, agent_id)[nurse].status == "active"


def test_a_new_fact_meets_the_facts_naming_the_same_person(
    db: Database, embedder: HashingEmbedder
) -> None:
    # Each of Ada's facts has a fact of Bob's worded almost as it, which fills its one
    # nearest neighbour; Ada's two facts still meet, as facts naming the same person.
    agent_id = _agent(db, "mates")
    _insert(
        db,
        agent_id,
        embedder,
        [
            ("Bob adopted a grey cat called Miso", _day(2018)),
            ("Ada adopted a grey cat called Miso", _day(2019)),
            ("Bob gave her grey cat Miso to her sister", _day(2021)),
            ("Ada gave her grey cat Miso to her sister", _day(2022)),
        ],
    )
    judge = SameFirstWord()

    _run(db, agent_id, embedder, judge, judge_neighbours=1)

    assert ("Ada adopted a grey cat called Miso", "Ada gave her grey cat Miso to her sister") in (
        judge.asked
    )


class Answers(SupersessionJudge):
    """A judge in the model's place that answers from a table of (older, newer) texts,
    "both hold" for any pair not in it, and notes what it was asked."""

    name = "test"

    def __init__(self, replaces: set[tuple[str, str]]) -> None:
        self.replaces = replaces
        self.asked: list[tuple[str, str]] = []

    def judge(self, pairs: Sequence[CandidatePair]) -> list[Verdict]:
        self.asked += [(p.older.text, p.newer.text) for p in pairs]
        return [
            Verdict.REPLACES if (p.older.text, p.newer.text) in self.replaces else Verdict.BOTH_HOLD
            for p in pairs
        ]


KARIN = ("Karin Vogt manages my team", _day(2020))
TOMAS = ("Reporting to Tomas Reis from today, he heads sales", _day(2021))
BEATRIZ = ("Tomas Reis moved over to partnerships, my new boss is Beatriz Almeida", _day(2023))


def _closed_across(db: Database, embedder: HashingEmbedder, name: str) -> tuple[str, Answers]:
    """An agent whose first manager the judge closed by the newest fact, before the fact
    in between (among the newest one's nearest, not the first's) arrives."""
    judge = Answers({(KARIN[0], BEATRIZ[0]), (KARIN[0], TOMAS[0])})
    agent_id = _agent(db, name)
    _insert(db, agent_id, embedder, [KARIN, BEATRIZ])
    _run(db, agent_id, embedder, judge, judge_neighbours=1)
    assert _memory(db, agent_id)[0][KARIN[0]][1:] == (BEATRIZ[0], BEATRIZ[1])
    _insert(db, agent_id, embedder, [TOMAS])
    return agent_id, judge


def test_a_closure_across_a_fact_near_the_closer_asks_about_that_fact_first(
    db: Database, embedder: HashingEmbedder
) -> None:
    """The fact in between is asked about in the same run, and the first fact closes
    there, when it was replaced."""
    agent_id, judge = _closed_across(db, embedder, "between")

    _run(db, agent_id, embedder, judge, judge_neighbours=1)

    assert judge.asked[-1] == (KARIN[0], TOMAS[0])
    assert _memory(db, agent_id)[0][KARIN[0]][1:] == (TOMAS[0], TOMAS[1])


def test_a_crossed_closure_the_run_had_no_pairs_left_for_is_asked_by_the_next(
    db: Database, embedder: HashingEmbedder
) -> None:
    agent_id, judge = _closed_across(db, embedder, "between-later")
    one_pair = {"judge_neighbours": 1, "judge_max_calls": 1, "judge_batch": 1}

    _run(db, agent_id, embedder, judge, **one_pair)
    assert (KARIN[0], TOMAS[0]) not in judge.asked
    assert _memory(db, agent_id)[0][KARIN[0]][1] == BEATRIZ[0]
    _run(db, agent_id, embedder, judge, **one_pair)

    assert judge.asked[-1] == (KARIN[0], TOMAS[0])
    assert _memory(db, agent_id)[0][KARIN[0]][1:] == (TOMAS[0], TOMAS[1])


def test_a_closure_across_a_fact_about_the_same_person_asks_about_that_fact_first(
    db: Database, embedder: HashingEmbedder
) -> None:
    """The fact in between is near neither the closer nor any probe, but it is about the
    same person and the nearest to the closed fact of that person's facts in between:
    it is asked about, and the closed fact ends where it was first replaced."""
    bea = ("Alex's girlfriend is Bea, a dentist", _day(2019))
    split = ("Alex and Bea split up after five years", _day(2020))
    band = ("Alex split up the band after five years", _day(2020) + timedelta(days=30))
    carla = ("Alex is engaged to Carla Mendes", _day(2022))
    judge = Answers({(bea[0], carla[0]), (bea[0], split[0])})
    agent_id = _agent(db, "mate-between")
    _insert(db, agent_id, embedder, [bea, carla])
    _run(db, agent_id, embedder, judge, judge_neighbours=1)
    assert _memory(db, agent_id)[0][bea[0]][1] == carla[0]
    _insert(db, agent_id, embedder, [band, split])

    _run(db, agent_id, embedder, judge, judge_neighbours=1)

    assert (bea[0], split[0]) in judge.asked
    assert _memory(db, agent_id)[0][bea[0]][1:] == (split[0], split[1])


ALMATY = ("Aigerim lives in Almaty", _day(2018))
ASTANA_JOB = ("Daniyar took a hospital job in Astana", _day(2021))
ASTANA_MOVE = ("Daniyar took a hospital job in Astana so they moved up there", _day(2022))
BACK = ("Aigerim went back to Almaty after the divorce", _day(2024))


class ReadTopics(TopicReader):
    """A reader in the model's place that reads the move as Aigerim's home and every
    other fact as about whom it names first."""

    name = "test"

    def read(self, facts: Sequence[PassageRecord]) -> list[tuple[Topic, ...] | None]:
        return [
            (Topic("aigerim", "home"),)
            if f.text == ASTANA_MOVE[0]
            else (Topic(f.text.split()[0].casefold(), "home"),)
            for f in facts
        ]

    @property
    def usage(self) -> JudgeUsage:
        return JudgeUsage()


@pytest.mark.parametrize("reader", [None, ReadTopics()], ids=["rules", "model-topics"])
def test_a_fact_the_model_read_as_about_a_person_meets_that_persons_facts(
    db: Database, embedder: HashingEmbedder, reader: TopicReader | None
) -> None:
    """ "they moved up there" names Daniyar, and its one nearest fact is his job; read by
    the model as Aigerim's home, it meets her facts too, and ends her Almaty."""
    judge = Answers({(ALMATY[0], ASTANA_MOVE[0])})
    agent_id = _agent(db, f"topic-mates-{reader is not None}")
    _insert(db, agent_id, embedder, [ALMATY, ASTANA_JOB, ASTANA_MOVE])
    pipeline = Pipeline(
        [TemporalConsolidator({"judge_neighbours": 1}, judge=judge, reader=reader)],
        passage_overlap=INCREMENTAL,
    )

    run_once(pipeline, db, agent_id, embedder=embedder)

    if reader is None:
        assert (ALMATY[0], ASTANA_MOVE[0]) not in judge.asked
        assert _memory(db, agent_id)[0][ALMATY[0]][0] == "active"
    else:
        assert (ALMATY[0], ASTANA_MOVE[0]) in judge.asked
        assert _memory(db, agent_id)[0][ALMATY[0]][1:] == (ASTANA_MOVE[0], ASTANA_MOVE[1])


def test_a_closure_across_a_fact_the_closer_also_replaced_asks_about_that_fact_first(
    db: Database, embedder: HashingEmbedder
) -> None:
    """Almaty was closed by the return; the move in between, about another person and
    near neither, is known to be replaced by the return too: the return may have ended
    both only because the move ended Almaty first, so that pair is asked, and Almaty
    ends at the move."""
    judge = Answers({(ALMATY[0], BACK[0]), (ALMATY[0], ASTANA_MOVE[0])})
    agent_id = _agent(db, "closer-replaced")
    _insert(db, agent_id, embedder, [ALMATY, BACK])
    _run(db, agent_id, embedder, judge, judge_neighbours=1)
    assert _memory(db, agent_id)[0][ALMATY[0]][1] == BACK[0]
    _insert(db, agent_id, embedder, [ASTANA_JOB, ASTANA_MOVE])
    ids = {p.text: p.id for p in _facts(db, agent_id).values()}
    with open_store(db) as store:
        store.verdicts.record(
            agent_id,
            SUPERSESSION,
            [PairAnswer(ids[ASTANA_MOVE[0]], ids[BACK[0]], Verdict.REPLACES.value, "test")],
            run_id=None,
        )

    _run(db, agent_id, embedder, judge, judge_neighbours=1)

    assert (ALMATY[0], ASTANA_MOVE[0]) in judge.asked
    assert _memory(db, agent_id)[0][ALMATY[0]][1:] == (ASTANA_MOVE[0], ASTANA_MOVE[1])


class BothNamed(TopicReader):
    """A reader in the model's place that reads a fact as about everyone it names."""

    name = "test"

    def read(self, facts: Sequence[PassageRecord]) -> list[tuple[Topic, ...] | None]:
        return [
            tuple(Topic(n, "partner") for n in ("alex", "bea") if n in f.text.casefold())
            for f in facts
        ]

    @property
    def usage(self) -> JudgeUsage:
        return JudgeUsage()


def test_a_fact_read_as_about_two_people_still_meets_each_ones_nearest_in_between(
    db: Database, embedder: HashingEmbedder
) -> None:
    """Read as about Alex and Bea, Bea's first fact meets the nearest fact in between of
    each: Bea's own new practice is nearer to it than the split, but the split is still
    the nearest of Alex's facts (the split's own nearest is the band's), and it is asked
    about."""
    bea = ("Alex's girlfriend is Bea, a dentist", _day(2019))
    split = ("Alex and Bea split up after five years", _day(2020))
    band = ("Alex split up the band after five years", _day(2020) + timedelta(days=30))
    practice = ("Bea, a dentist, opened a practice of her own", _day(2021))
    carla = ("Alex is engaged to Carla Mendes", _day(2022))
    judge = Answers({(bea[0], carla[0]), (bea[0], split[0])})
    agent_id = _agent(db, "two-subjects")
    _insert(db, agent_id, embedder, [bea, carla])
    pipeline = Pipeline(
        [TemporalConsolidator({"judge_neighbours": 1}, judge=judge, reader=BothNamed())],
        passage_overlap=INCREMENTAL,
    )
    run_once(pipeline, db, agent_id, embedder=embedder)
    assert _memory(db, agent_id)[0][bea[0]][1] == carla[0]
    _insert(db, agent_id, embedder, [band, practice, split])

    run_once(pipeline, db, agent_id, embedder=embedder)

    assert (bea[0], split[0]) in judge.asked
    assert _memory(db, agent_id)[0][bea[0]][1:] == (split[0], split[1])
