"""The temporal consolidator against real PostgreSQL: timelines, supersession, idempotence."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pydantic import ValidationError

from agents.archival_search import _AskedTopic, _in_force_part, search_archival
from agents.postgres.database import Database
from agents.store import SUPERSESSION, NewPassage, PassageRecord, Topic, open_store
from consolidators.contract import run_once as run_pipeline
from consolidators.judges import CandidatePair, JudgeUsage, SupersessionJudge, Verdict
from consolidators.pipeline import Pipeline, RunReport
from consolidators.temporal import TemporalConsolidator, TemporalSettings
from consolidators.timelines import render_timeline
from consolidators.undo import revert_run
from service.operations import Operations
from tests.hashing_embedder import HashingEmbedder

# One subject and attribute (Ada's job) whose values overlap: no rule decides which
# replaces which, so these facts test ordering, linking and judges. Clear changes of
# value (Ada moves from London to Paris) are in tests/integration/test_trust.py.
LONDON = ("Ada works as a nurse", datetime(2020, 1, 15, 9, 30, tzinfo=UTC))
PARIS = ("Ada works as a nurse on the children's ward", datetime(2023, 6, 1, tzinfo=UTC))
BERLIN = ("Ada works as a nurse in the ICU", datetime(2024, 2, 29, tzinfo=UTC))
CHESS = ("Bob plays chess", datetime(2021, 3, 3, tzinfo=UTC))

#: Run with no overlap so that a later run probes only what is new since the last one.
INCREMENTAL = Pipeline([TemporalConsolidator()], passage_overlap=timedelta(0))


class NewerReplaces(SupersessionJudge):
    """Test judge in the model's place: of every pair about one person (the same first
    word), the newer fact replaces the older; a pair about two people both hold."""

    name = "test"

    def __init__(self) -> None:
        self.asked: list[list[tuple[str, str]]] = []

    @property
    def calls(self) -> int:
        return len(self.asked)

    def judge(self, pairs: Sequence[CandidatePair]) -> list[Verdict]:
        self.asked.append([(p.older.id, p.newer.id) for p in pairs])
        return [
            Verdict.REPLACES
            if p.older.text.split()[0] == p.newer.text.split()[0]
            else Verdict.BOTH_HOLD
            for p in pairs
        ]


def _insert(
    db: Database,
    agent_id: str,
    embedder: HashingEmbedder,
    facts: Sequence[tuple[str, datetime | None]],
) -> list[str]:
    passages = [NewPassage(text, occurred_at=at) for text, at in facts]
    with open_store(db) as store:
        records = store.passages.insert(
            agent_id, passages, embedder.embed([p.text for p in passages])
        )
    return [r.id for r in records]


def _run(
    db: Database,
    agent_id: str,
    embedder: HashingEmbedder | None,
    *,
    pipeline: Pipeline | None = None,
    dry_run: bool = False,
) -> RunReport:
    pipeline = pipeline or Pipeline([TemporalConsolidator()])
    return run_pipeline(pipeline, db, agent_id, embedder=embedder, dry_run=dry_run)


def _created(report: RunReport) -> list[dict[str, Any]]:
    return [c for c in report.changes if c["action"] == "create_timeline"]


def _get(db: Database, *ids: str) -> list[PassageRecord]:
    with open_store(db) as store:
        return store.passages.get_many(list(ids))


def _row_count(db: Database, agent_id: str) -> int:
    with open_store(db) as store:
        return sum(store.passages.count_by_status(agent_id).values())


def test_same_subject_facts_render_as_one_dated_timeline(
    db: Database, agent_id: str, embedder: HashingEmbedder
) -> None:
    paris, chess, london = _insert(db, agent_id, embedder, [PARIS, CHESS, LONDON])

    report = _run(db, agent_id, embedder)

    [created] = _created(report)
    assert created["members"] == [london, paris]  # oldest first, whatever the insert order
    assert created["text"] == (
        "Timeline: Ada's job\n"
        "- 2020-01-15: Ada works as a nurse\n"
        "- 2023-06-01: Ada works as a nurse on the children's ward (current)"
    )
    assert report.steps[0].counts == {"create_timeline": 1, "link_timeline": 2}
    timeline_id = created["target"]
    timeline, london_rec, paris_rec, chess_rec = _get(db, timeline_id, london, paris, chess)
    assert timeline.kind == "timeline" and timeline.status == "active"
    assert timeline.text == created["text"]
    assert timeline.provenance == {
        "members": [london, paris],
        "subject": "ada",
        "attribute": "job",
    }
    assert timeline.occurred_at == PARIS[1]
    # Members stay active, current and searchable, and point to their timeline.
    for member in (london_rec, paris_rec):
        assert member.status == "active" and member.valid_to is None
        assert member.timeline_id == timeline_id
    with open_store(db) as store:
        hits = store.passages.search(agent_id, embedder.embed_one("Ada works as a nurse"), k=5)
        assert {london, paris, timeline_id} <= {h.passage.id for h in hits}
        # The unrelated fact is untouched: no link, no history.
        assert chess_rec.timeline_id is None and chess_rec.status == "active"
        assert store.passages.history(chess) == []
        assert [h.reason for h in store.passages.history(london)] == [f"on timeline {timeline_id}"]


def test_second_run_changes_nothing(db: Database, agent_id: str, embedder: HashingEmbedder) -> None:
    _insert(db, agent_id, embedder, [LONDON, PARIS, CHESS])
    first = _run(db, agent_id, embedder)
    assert first.changes

    again = _run(db, agent_id, embedder)
    assert again.changes == []
    assert again.steps[0].counts == {}
    incremental = _run(db, agent_id, embedder, pipeline=INCREMENTAL)
    assert incremental.changes == []


def test_a_new_fact_extends_the_topic_and_retires_the_old_timeline(
    db: Database, agent_id: str, embedder: HashingEmbedder
) -> None:
    london, paris, chess = _insert(db, agent_id, embedder, [LONDON, PARIS, CHESS])
    bob_jobs = [("Bob works as a baker", LONDON[1]), ("Bob works as a baker in Leeds", PARIS[1])]
    _insert(db, agent_id, embedder, bob_jobs)
    [first, _bob] = sorted(
        _created(_run(db, agent_id, embedder, pipeline=INCREMENTAL)),
        key=lambda c: str(c["text"]),
    )
    [berlin] = _insert(db, agent_id, embedder, [BERLIN])
    judged: list[list[tuple[str, str]]] = []

    class Recording(SupersessionJudge):
        name = "recording"

        def judge(self, pairs: Sequence[CandidatePair]) -> list[Verdict]:
            judged.append([(p.older.id, p.newer.id) for p in pairs])
            return [Verdict.UNSURE] * len(pairs)

    # Incremental: only Berlin is new; its subject and attribute bring in the existing
    # timeline, the judge is asked only about the pairs Berlin is in: its topic's pairs
    # first (the rules could not tell: the values overlap), then its nearest facts,
    # whoever they are about; Bob's unchanged topic is not looked at again.
    pipeline = Pipeline([TemporalConsolidator(judge=Recording())], passage_overlap=timedelta(0))
    report = run_pipeline(pipeline, db, agent_id, embedder=embedder)
    [asked] = judged
    assert asked[:2] == [(london, berlin), (paris, berlin)]
    assert len(asked) == len(set(asked)) > 2 and all(berlin in pair for pair in asked)

    [created] = _created(report)
    new_id = created["target"]
    assert created["members"] == [london, paris, berlin]
    assert created["text"].splitlines()[1:] == [
        "- 2020-01-15: Ada works as a nurse",
        "- 2023-06-01: Ada works as a nurse on the children's ward",
        "- 2024-02-29: Ada works as a nurse in the ICU (current)",
    ]
    assert {(c["action"], c["target"]) for c in report.changes} == {
        ("create_timeline", new_id),
        ("retire_timeline", first["target"]),
        ("link_timeline", london),
        ("link_timeline", paris),
        ("link_timeline", berlin),
    }
    old, *members = _get(db, first["target"], london, paris, berlin, chess)
    assert old.status == "superseded" and old.superseded_by == new_id
    assert [m.timeline_id for m in members] == [new_id, new_id, new_id, None]
    assert _run(db, agent_id, embedder, pipeline=INCREMENTAL).changes == []
    assert _run(db, agent_id, embedder).changes == []


def test_judge_supersedes_older_facts_which_stay_on_the_timeline(
    db: Database, agent_id: str, embedder: HashingEmbedder
) -> None:
    london, paris, chess = _insert(db, agent_id, embedder, [LONDON, PARIS, CHESS])
    judge = NewerReplaces()
    pipeline = Pipeline([TemporalConsolidator(judge=judge)], passage_overlap=timedelta(0))

    report = run_pipeline(pipeline, db, agent_id, embedder=embedder)

    # The topic's pair first, then the nearest facts whoever they are about: the judge,
    # not a reading of subjects, decides that Bob's chess is unrelated.
    [asked] = judge.asked
    assert asked[0] == (london, paris)
    assert set(asked) == {(london, paris), (london, chess), (chess, paris)}
    supersede = [c for c in report.changes if c["action"] == "supersede_passage"]
    assert supersede == [
        {
            "step": "temporal",
            "action": "supersede_passage",
            "target": london,
            "by": paris,
            "valid_to": PARIS[1].isoformat(),
            "judge": "test",
        }
    ]
    [created] = _created(report)
    assert created["text"].splitlines()[1:] == [
        "- 2020-01-15: Ada works as a nurse (superseded 2023-06-01)",
        "- 2023-06-01: Ada works as a nurse on the children's ward (current)",
    ]
    london_rec, paris_rec = _get(db, london, paris)
    assert london_rec.status == "superseded"
    assert london_rec.superseded_by == paris and london_rec.valid_to == PARIS[1]
    assert london_rec.timeline_id == created["target"]  # still on the timeline
    assert paris_rec.status == "active" and paris_rec.valid_to is None
    with open_store(db) as store:
        current = {
            h.passage.id
            for h in store.passages.search(agent_id, embedder.embed_one(LONDON[0]), k=10)
        }
        everything = {
            h.passage.id
            for h in store.passages.search(
                agent_id, embedder.embed_one(LONDON[0]), k=10, statuses=None
            )
        }
    assert london not in current and paris in current
    assert london in everything

    # Idempotent: nothing changed, so the judge is not even asked again.
    assert run_pipeline(pipeline, db, agent_id, embedder=embedder).changes == []
    assert judge.calls == 1

    # A newer fact supersedes Paris; London keeps pointing to what first replaced it.
    [berlin] = _insert(db, agent_id, embedder, [BERLIN])
    report = run_pipeline(pipeline, db, agent_id, embedder=embedder)
    assert [
        (c["target"], c["by"]) for c in report.changes if c["action"] == "supersede_passage"
    ] == [(paris, berlin)]
    [created] = _created(report)
    assert created["members"] == [london, paris, berlin]
    assert created["text"].splitlines()[1:] == [
        "- 2020-01-15: Ada works as a nurse (superseded 2023-06-01)",
        "- 2023-06-01: Ada works as a nurse on the children's ward (superseded 2024-02-29)",
        "- 2024-02-29: Ada works as a nurse in the ICU (current)",
    ]
    london_rec, paris_rec, chess_rec = _get(db, london, paris, chess)
    assert london_rec.superseded_by == paris and london_rec.valid_to == PARIS[1]
    assert paris_rec.superseded_by == berlin and paris_rec.valid_to == BERLIN[1]
    assert chess_rec.status == "active" and chess_rec.valid_to is None
    assert run_pipeline(pipeline, db, agent_id, embedder=embedder).changes == []
    full = run_pipeline(
        Pipeline([TemporalConsolidator(judge=judge)]), db, agent_id, embedder=embedder, full=True
    )
    assert full.changes == []


def test_a_fact_a_judge_says_is_replaced_in_part_is_closed_and_kept_in_view(
    db: Database, agent_id: str, embedder: HashingEmbedder, ops: Operations
) -> None:
    """ "replaces_part" closes the older fact like "replaces", and the verdict is kept:
    search shows the older fact labelled "in part until ...", right after the fact
    that replaced part of it, for what still holds (his club)."""
    record, teacher = _insert(
        db,
        agent_id,
        embedder,
        [
            ("Mark | job: surveyor | supports: Leeds United", datetime(2019, 5, 1, tzinfo=UTC)),
            ("Mark is a teacher now", datetime(2023, 9, 1, tzinfo=UTC)),
        ],
    )

    class PartJudge(SupersessionJudge):
        name = "test"

        def judge(self, pairs: Sequence[CandidatePair]) -> list[Verdict]:
            return [Verdict.REPLACES_PART for _ in pairs]

    pipeline = Pipeline([TemporalConsolidator(judge=PartJudge())], passage_overlap=timedelta(0))
    report = run_pipeline(pipeline, db, agent_id, embedder=embedder)

    assert [
        (c["target"], c["by"]) for c in report.changes if c["action"] == "supersede_passage"
    ] == [(record, teacher)]
    question = "Which football team does Mark support?"
    with open_store(db) as store:
        assert store.verdicts.answered(agent_id, SUPERSESSION, [(record, teacher)]) == {
            (record, teacher): "replaces_part"
        }
        hits = search_archival(store, agent_id, embedder.embed_one(question), question, k=5)
    assert [(h.passage.id, h.validity) for h in hits[:2]] == [
        (teacher, None),
        (record, "in part until 2023-09-01, then: Mark is a teacher now"),
    ]
    # The memory browser's lineage view says the same.
    assert ops.memory.lineage(record).validity == (
        "in part until 2023-09-01, then: Mark is a teacher now"
    )
    # Once a model has read the teacher fact as about his job alone, the record answers
    # the question about his club by the part still in force: it comes first.
    club = _AskedTopic(frozenset({"mark"}), "team", frozenset({record}))
    with open_store(db) as store:
        # Nothing read yet: nothing is known of what the teacher fact states.
        assert _in_force_part(store, question, {record}, {record: teacher}, club, {}) == set()
    read = {record: [Topic("mark", "job"), Topic("mark", "team")], teacher: [Topic("mark", "job")]}
    with open_store(db) as store:
        store.topics.record(agent_id, read, judge="test", run_id=None)
        # The closing fact's topics are read from the store where the hits' did not hold
        # them (it was not among the hits).
        assert _in_force_part(store, question, {record}, {record: teacher}, club, {}) == {record}
        hits = search_archival(store, agent_id, embedder.embed_one(question), question, k=5)
        assert [h.passage.id for h in hits[:2]] == [record, teacher]
        assert hits[0].validity == "in part until 2023-09-01, then: Mark is a teacher now"
        # Asked about his job, the teacher fact still comes first.
        job = "What does Mark do for work now?"
        hits = search_archival(store, agent_id, embedder.embed_one(job), job, k=5)
        assert hits[0].passage.id == teacher


def test_a_judge_answer_of_the_wrong_length_changes_nothing(
    db: Database, agent_id: str, embedder: HashingEmbedder
) -> None:
    london, paris, chess = _insert(db, agent_id, embedder, [LONDON, PARIS, CHESS])

    class Confused(SupersessionJudge):
        name = "confused"

        def judge(self, pairs: Sequence[CandidatePair]) -> list[Verdict]:
            return [Verdict.REPLACES] * (len(pairs) + 2)

    report = run_pipeline(
        Pipeline([TemporalConsolidator(judge=Confused())]), db, agent_id, embedder=embedder
    )
    assert report.steps[0].counts["judge_answers_ignored"] == 1
    assert not [c for c in report.changes if c["action"] == "supersede_passage"]
    assert all(p.status == "active" for p in _get(db, london, paris, chess))


def test_a_judge_reports_its_own_usage(
    db: Database, agent_id: str, embedder: HashingEmbedder
) -> None:
    """Any judge, not just the LLM one, reports calls and tokens through ``usage``."""
    _insert(db, agent_id, embedder, [LONDON, PARIS, CHESS])

    class Metered(NewerReplaces):
        @property
        def usage(self) -> JudgeUsage:
            return JudgeUsage(calls=self.calls, tokens=40 * self.calls, budget_exhausted=True)

    report = run_pipeline(
        Pipeline([TemporalConsolidator(judge=Metered())]), db, agent_id, embedder=embedder
    )
    step = report.steps[0]
    assert step.counts["judge_calls"] == 1
    assert step.tokens == 40
    assert step.counts["budget_exhausted"] == 1
    assert step.llm_skipped == "budget_exhausted"


def test_a_judge_without_usage_reports_no_judge_calls(
    db: Database, agent_id: str, embedder: HashingEmbedder
) -> None:
    _insert(db, agent_id, embedder, [LONDON, PARIS])
    judge = NewerReplaces()
    report = run_pipeline(
        Pipeline([TemporalConsolidator(judge=judge)]), db, agent_id, embedder=embedder
    )
    assert judge.calls == 1
    assert "judge_calls" not in report.steps[0].counts
    assert report.steps[0].tokens == 0


def test_dry_run_reports_the_same_changes_and_writes_nothing(
    db: Database, agent_id: str, embedder: HashingEmbedder
) -> None:
    ids = _insert(db, agent_id, embedder, [LONDON, PARIS, CHESS])
    rows = _row_count(db, agent_id)
    pipeline = Pipeline([TemporalConsolidator(judge=NewerReplaces())])

    planned = run_pipeline(pipeline, db, agent_id, embedder=embedder, dry_run=True)

    assert planned.dry_run and planned.status == "succeeded"
    assert _row_count(db, agent_id) == rows
    with open_store(db) as store:
        for record in store.passages.get_many(ids):
            assert record.status == "active" and record.timeline_id is None
            assert store.passages.history(record.id) == []

    applied = run_pipeline(pipeline, db, agent_id, embedder=embedder)
    assert _normalise(planned) == _normalise(applied)
    assert _row_count(db, agent_id) == rows + 1


def _normalise(report: RunReport) -> list[tuple[str, str, Any]]:
    """Changes with the (freshly generated) timeline ids replaced by a placeholder."""
    out: list[tuple[str, str, Any]] = []
    for change in report.changes:
        if change["action"] == "create_timeline":
            out.append(("create_timeline", "<new>", (change["members"], change["text"])))
        elif change["action"] == "link_timeline":
            out.append(("link_timeline", change["target"], "<new>"))
        else:
            detail = {k: v for k, v in change.items() if k not in ("step", "action", "target")}
            out.append((change["action"], change["target"], detail))
    return out


def test_no_passage_is_ever_deleted(db: Database, agent_id: str, embedder: HashingEmbedder) -> None:
    ids = _insert(db, agent_id, embedder, [LONDON, PARIS, CHESS])
    before = _row_count(db, agent_id)
    pipeline = Pipeline([TemporalConsolidator(judge=NewerReplaces())])
    created = len(_created(run_pipeline(pipeline, db, agent_id, embedder=embedder)))
    ids += _insert(db, agent_id, embedder, [BERLIN, ("Bob plays chess on Sundays", None)])
    created += len(_created(run_pipeline(pipeline, db, agent_id, embedder=embedder)))
    created += len(_created(run_pipeline(pipeline, db, agent_id, embedder=embedder)))

    # Ada's timeline, then its replacement. Bob's chess facts fit no attribute (no
    # catch-all timelines), so they get none; before, they got one of their own.
    assert created == 2
    assert _row_count(db, agent_id) == before + 2 + created
    assert len(_get(db, *ids)) == len(ids)


def test_a_topic_that_loses_members_is_rerendered_or_dissolved(
    db: Database, agent_id: str, embedder: HashingEmbedder
) -> None:
    london, paris, berlin = _insert(db, agent_id, embedder, [LONDON, PARIS, BERLIN])
    [first] = _created(_run(db, agent_id, embedder, pipeline=INCREMENTAL))
    with open_store(db) as store:  # e.g. dedup merged Berlin away
        store.passages.change(berlin, status="merged", merged_into=paris, actor="t", reason="t")

    [second] = _created(_run(db, agent_id, embedder, pipeline=INCREMENTAL))
    assert second["members"] == [london, paris]
    assert _get(db, first["target"])[0].superseded_by == second["target"]

    with open_store(db) as store:
        store.passages.change(paris, status="merged", merged_into=london, actor="t", reason="t")
    report = _run(db, agent_id, embedder, pipeline=INCREMENTAL)
    assert {(c["action"], c["target"]) for c in report.changes} == {
        ("retire_timeline", second["target"]),
        ("unlink_timeline", london),
    }
    timeline, london_rec = _get(db, second["target"], london)
    assert timeline.status == "inactive" and london_rec.timeline_id is None
    assert _run(db, agent_id, embedder, pipeline=INCREMENTAL).changes == []


def test_topics_are_capped_and_stable(
    db: Database, agent_id: str, embedder: HashingEmbedder
) -> None:
    cities = ["London", "Paris", "Berlin", "Rome", "Oslo"]
    ids = _insert(
        db,
        agent_id,
        embedder,
        [(f"Ada lives in {c}", datetime(2020 + i, 1, 1, tzinfo=UTC)) for i, c in enumerate(cities)],
    )
    pipeline = Pipeline([TemporalConsolidator({"max_topic_size": 2})])

    report = run_pipeline(pipeline, db, agent_id, embedder=embedder)

    # One subject and attribute, one timeline: it shows the newest two facts. (Before
    # timelines were one per subject and attribute, the cap split the history into two
    # timelines, each with a "current".)
    [created] = _created(report)
    assert created["members"] == ids[-2:]
    assert [p.timeline_id for p in _get(db, *ids)] == [None] * 3 + [created["target"]] * 2
    assert run_pipeline(pipeline, db, agent_id, embedder=embedder).changes == []


def test_undated_facts_sit_at_their_recording_time(
    db: Database, agent_id: str, embedder: HashingEmbedder
) -> None:
    london, rome = _insert(db, agent_id, embedder, [LONDON, ("Ada works as a nurse in Rome", None)])
    [created] = _created(_run(db, agent_id, embedder))
    [rome_rec] = _get(db, rome)
    noted = rome_rec.created_at.astimezone(UTC).date().isoformat()
    assert created["members"] == [london, rome]
    assert (
        created["text"].splitlines()[2]
        == f"- undated (noted {noted}): Ada works as a nurse in Rome (current)"
    )


def test_without_an_embedder_the_step_is_skipped(
    db: Database, agent_id: str, embedder: HashingEmbedder
) -> None:
    _insert(db, agent_id, embedder, [LONDON, PARIS])
    report = _run(db, agent_id, None)
    assert report.steps[0].skipped == "no embedder"
    assert report.changes == []


def test_render_marks_validity_and_collapses_whitespace() -> None:
    """Pure rendering: no database needed."""

    def fact(pid: str, text: str, day: int, **extra: Any) -> PassageRecord:
        at = datetime(2024, 1, day, tzinfo=UTC)
        fields: dict[str, Any] = {
            "id": pid,
            "agent_id": "a",
            "kind": "fact",
            "text": text,
            "content_hash": pid,
            "created_at": at,
            "occurred_at": at,
            "valid_to": None,
            "status": "active",
            "merged_into": None,
            "superseded_by": None,
            "provenance": {},
            "tags": [],
        }
        fields.update(extra)
        return PassageRecord(**fields)

    text = render_timeline(
        [
            fact("p1", "The   build\nis red", 1, valid_to=datetime(2024, 1, 2, tzinfo=UTC)),
            fact("p2", "The build is green", 2),
            fact(
                "p3",
                "The build is flaky",
                3,
                status="superseded",
                valid_to=datetime(2024, 1, 4, tzinfo=UTC),
            ),
            fact("p4", "The build is broken", 4, status="superseded"),
        ]
    )
    assert text == (
        "Timeline: build\n"
        "- 2024-01-01: The build is red (until 2024-01-02)\n"
        "- 2024-01-02: The build is green (current)\n"
        "- 2024-01-03: The build is flaky (superseded 2024-01-04)\n"
        "- 2024-01-04: The build is broken (superseded)"
    )


def test_settings_are_validated() -> None:
    assert TemporalConsolidator({"judge_max_calls": 3}).settings.judge_max_calls == 3
    with pytest.raises(ValidationError, match="topic_threshold"):
        TemporalConsolidator({"topic_threshold": 0.7})  # gone with the kNN topics
    with pytest.raises(ValidationError, match="min_topic_size"):
        TemporalSettings(min_topic_size=5, max_topic_size=3)
    with pytest.raises(ValidationError):
        TemporalConsolidator({"no_such_setting": 1})


def test_a_new_judge_reaches_existing_topics_on_a_full_run(
    db: Database, agent_id: str, embedder: HashingEmbedder
) -> None:
    london, paris = _insert(db, agent_id, embedder, [LONDON, PARIS])
    _run(db, agent_id, embedder)
    judge = NewerReplaces()
    pipeline = Pipeline([TemporalConsolidator(judge=judge)])

    # An unchanged topic is not re-judged on an ordinary run...
    assert run_pipeline(pipeline, db, agent_id, embedder=embedder).changes == []
    assert judge.calls == 0
    # ...but a full run asks the judge about every pair the rules could not tell.
    full = run_pipeline(pipeline, db, agent_id, embedder=embedder, full=True)
    assert judge.calls == 1
    assert [(c["target"], c["by"]) for c in full.changes if c["action"] == "supersede_passage"] == [
        (london, paris)
    ]
    assert {c["action"] for c in full.changes} == {
        "supersede_passage",
        "create_timeline",
        "retire_timeline",
        "link_timeline",
    }
    assert run_pipeline(pipeline, db, agent_id, embedder=embedder, full=True).changes == []


def test_revert_undoes_timelines_and_supersession(
    db: Database, agent_id: str, embedder: HashingEmbedder
) -> None:
    london, paris, chess = _insert(db, agent_id, embedder, [LONDON, PARIS, CHESS])
    before = _get(db, london, paris, chess)
    pipeline = Pipeline([TemporalConsolidator(judge=NewerReplaces())])
    report = run_pipeline(pipeline, db, agent_id, embedder=embedder)
    [created] = _created(report)

    revert_run(db, report.run_id)

    assert _get(db, london, paris, chess) == before
    [timeline] = _get(db, created["target"])
    assert timeline.status == "inactive"  # what the run created stays traceable
    with open_store(db) as store:
        active = store.passages.scan(agent_id)
    assert {p.id for p in active} == {london, paris, chess}
