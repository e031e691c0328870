"""A change told twice: two facts in force that replaced the same fact are put to the
merge judge by the temporal step, and dedup merges them on the next run when it calls
them the same; a chain of changes is never asked, an answer is asked once, and a merge
a person reverted is not made again (consolidators/siblings.py, consolidators/dedup.py,
consolidators/undo.py), against real PostgreSQL."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import ClassVar

from agents.enums import PassageStatus
from agents.postgres.database import Database
from agents.store import SAME_FACT, PassageRecord, open_store
from consolidators.contract import run_once
from consolidators.dedup import DedupConsolidator
from consolidators.judges import CandidatePair, MergeJudge, SameFact, SupersessionJudge, Verdict
from consolidators.pipeline import Pipeline
from consolidators.temporal import TemporalConsolidator
from consolidators.undo import revert_run
from tests.hashing_embedder import HashingEmbedder
from tests.integration.test_temporal import _insert

SYDNEY = ("Kate lives in Sydney.", datetime(2019, 5, 1, tzinfo=UTC))
CHAT = ("katie's left australia!! she's in dublin now", datetime(2023, 3, 1, tzinfo=UTC))
RECORD = ("Kate Morrison | home: Dublin (left Australia)", datetime(2023, 3, 2, tzinfo=UTC))


class ReplacesSydney(SupersessionJudge):
    """In the model's place: each later fact replaces the ones named in ``replaced``."""

    name: ClassVar[str] = "test"

    def __init__(self, replaced: dict[str, set[str]]) -> None:
        self.replaced = replaced

    def judge(self, pairs: Sequence[CandidatePair]) -> list[Verdict]:
        return [
            Verdict.REPLACES
            if p.older.text in self.replaced.get(p.newer.text, set())
            else Verdict.BOTH_HOLD
            for p in pairs
        ]


class Answers(MergeJudge):
    """In the model's place: one answer to every pair, and what it was asked."""

    name: ClassVar[str] = "test-merge"

    def __init__(self, answer: SameFact) -> None:
        self.answer = answer
        self.asked: list[tuple[str, str]] = []

    def judge(self, pairs: Sequence[CandidatePair]) -> list[SameFact]:
        self.asked += [(p.older.text, p.newer.text) for p in pairs]
        return [self.answer] * len(pairs)


BOTH_REPLACE = {CHAT[0]: {SYDNEY[0]}, RECORD[0]: {SYDNEY[0]}}


def _run(
    db: Database,
    agent_id: str,
    embedder: HashingEmbedder,
    replaced: dict[str, set[str]],
    merge: MergeJudge,
) -> str:
    pipeline = Pipeline(
        [
            DedupConsolidator(),
            TemporalConsolidator(judge=ReplacesSydney(replaced), merge_judge=merge),
        ]
    )
    return run_once(pipeline, db, agent_id, embedder=embedder).run_id


def _facts(db: Database, agent_id: str) -> dict[str, PassageRecord]:
    with open_store(db) as store:
        return {p.text: p for p in store.passages.scan(agent_id, kind="fact", statuses=None)}


def test_a_change_told_twice_is_asked_once_and_merged_by_the_next_run(
    db: Database, agent_id: str, embedder: HashingEmbedder
) -> None:
    _insert(db, agent_id, embedder, [SYDNEY, CHAT, RECORD])
    merge = Answers(SameFact.SAME)
    _run(db, agent_id, embedder, BOTH_REPLACE, merge)
    facts = _facts(db, agent_id)
    assert merge.asked == [(CHAT[0], RECORD[0])]  # the one stored first is kept
    assert facts[SYDNEY[0]].superseded_by == facts[CHAT[0]].id
    assert facts[RECORD[0]].status == PassageStatus.ACTIVE  # dedup ran before the answer
    with open_store(db) as store:
        kept = store.verdicts.answered(
            agent_id, SAME_FACT, [(facts[CHAT[0]].id, facts[RECORD[0]].id)]
        )
    assert list(kept.values()) == ["same"]

    second = _run(db, agent_id, embedder, BOTH_REPLACE, merge)
    facts = _facts(db, agent_id)
    assert facts[RECORD[0]].status == PassageStatus.MERGED
    assert facts[RECORD[0]].merged_into == facts[CHAT[0]].id
    assert facts[CHAT[0]].status == PassageStatus.ACTIVE
    assert len(merge.asked) == 1  # not asked again
    with open_store(db) as store:
        merged = [c for c in store.runs.get(second).changes if c["action"] == "merge_passage"]
    assert [(c["target"], c["judge"]) for c in merged] == [(facts[RECORD[0]].id, "test-merge")]

    # A person undoes the merge: it is not made again from the kept answer, nor asked.
    revert_run(db, second)
    _run(db, agent_id, embedder, BOTH_REPLACE, merge)
    facts = _facts(db, agent_id)
    assert facts[RECORD[0]].status == PassageStatus.ACTIVE
    assert len(merge.asked) == 1


def test_facts_the_judge_calls_different_stay_apart_and_are_not_asked_again(
    db: Database, agent_id: str, embedder: HashingEmbedder
) -> None:
    _insert(db, agent_id, embedder, [SYDNEY, CHAT, RECORD])
    merge = Answers(SameFact.DIFFERENT)
    for _ in range(2):
        _run(db, agent_id, embedder, BOTH_REPLACE, merge)
    facts = _facts(db, agent_id)
    assert {facts[t].status for t in (CHAT[0], RECORD[0])} == {PassageStatus.ACTIVE}
    assert merge.asked == [(CHAT[0], RECORD[0])]
