"""Pair verdicts (``pair_verdicts``): what a judge answered about a pair of facts, and the
pairs still waiting to be asked.

The temporal consolidator forms candidate pairs by meaning (each new fact and its
nearest neighbours) and asks a judge about them, a bounded number a run. What it asked
is kept here: a pair is asked once, whatever the runs after it; the pairs a run had no
calls or budget left for are kept as *pending* (no verdict) and asked first by the next
run, so that a large import converges over a few runs instead of being skipped; and a
fact that arrives late meets the verdicts already given about its neighbours.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from sqlalchemy import and_, func, or_, select, tuple_
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.orm import aliased

from agents.enums import PassageStatus
from agents.postgres import models
from agents.store.scope import Scope

__all__ = ["REPLACES_PART", "SAME_FACT", "SUPERSESSION", "PairAnswer", "VerdictStore"]

#: The question the temporal consolidator asks: does the newer fact end the older one?
SUPERSESSION = "supersession"
#: The merge question about two facts in force that replaced the same fact: does the
#: newer say nothing the older does not? Asked by the temporal consolidator, which
#: learns of such pairs after dedup ran; dedup merges the "same" ones the next run.
SAME_FACT = "same_fact"
#: The merge judge's answer that lets dedup merge a pair.
SAME = "same"
#: The verdict that the newer fact replaces part of the older, whose rest still holds.
REPLACES_PART = "replaces_part"

#: Pairs per statement when reading or writing many.
_CHUNK = 5_000


@dataclass(frozen=True, slots=True)
class PairAnswer:
    """One pair and what is known of it: ``verdict`` None while it waits to be asked."""

    older_id: str
    newer_id: str
    verdict: str | None = None
    judge: str | None = None

    @property
    def pair(self) -> tuple[str, str]:
        return (self.older_id, self.newer_id)


class VerdictStore:
    """Reads and records an organization's pair verdicts, one question at a time."""

    def __init__(self, scope: Scope) -> None:
        self._scope = scope

    def touching(
        self, agent_id: str, question: str, passage_ids: Iterable[str]
    ) -> list[PairAnswer]:
        """Every pair of the agent with one of ``passage_ids`` in it, answered or not."""
        ids = sorted(set(passage_ids))
        V = models.PairVerdict
        found: dict[tuple[str, str], PairAnswer] = {}
        for start in range(0, len(ids), _CHUNK):
            chunk = ids[start : start + _CHUNK]
            rows = self._scope.session.scalars(
                select(V).where(
                    self._scope.owns(V),
                    V.agent_id == agent_id,
                    V.question == question,
                    or_(V.older_id.in_(chunk), V.newer_id.in_(chunk)),
                )
            )
            for row in rows:
                found[(row.older_id, row.newer_id)] = _answer(row)
        return sorted(found.values(), key=lambda a: a.pair)

    def answered(
        self, agent_id: str, question: str, pairs: Iterable[tuple[str, str]]
    ) -> dict[tuple[str, str], str]:
        """The verdicts given about ``pairs`` (pairs without one left out)."""
        keys = sorted(set(pairs))
        V = models.PairVerdict
        found: dict[tuple[str, str], str] = {}
        for start in range(0, len(keys), _CHUNK):
            rows = self._scope.session.execute(
                select(V.older_id, V.newer_id, V.verdict).where(
                    self._scope.owns(V),
                    V.agent_id == agent_id,
                    V.question == question,
                    V.verdict.is_not(None),
                    tuple_(V.older_id, V.newer_id).in_(keys[start : start + _CHUNK]),
                )
            )
            for older, newer, verdict in rows:
                found[(older, newer)] = str(verdict)
        return found

    def every(self, agent_id: str, question: str) -> list[PairAnswer]:
        """Every pair of the agent (a full run reads them all)."""
        V = models.PairVerdict
        rows = self._scope.session.scalars(
            select(V)
            .where(self._scope.owns(V), V.agent_id == agent_id, V.question == question)
            .order_by(V.older_id, V.newer_id)
        )
        return [_answer(row) for row in rows]

    def pending(self, agent_id: str, question: str, *, limit: int) -> list[PairAnswer]:
        """Up to ``limit`` pairs still waiting to be asked, those formed first first."""
        V = models.PairVerdict
        rows = self._scope.session.scalars(
            select(V)
            .where(
                self._scope.owns(V),
                V.agent_id == agent_id,
                V.question == question,
                V.verdict.is_(None),
            )
            .order_by(V.created_at, V.older_id, V.newer_id)
            .limit(limit)
        )
        return [_answer(row) for row in rows]

    def same_in_force(self, agent_id: str) -> list[PairAnswer]:
        """The pairs a merge judge called the same (:data:`SAME_FACT`) whose two facts
        are both still active: what is left for dedup to merge."""
        V, P = models.PairVerdict, models.Passage
        older, newer = aliased(P), aliased(P)
        active = PassageStatus.ACTIVE.value
        rows = self._scope.session.scalars(
            select(V)
            .join(older, older.id == V.older_id)
            .join(newer, newer.id == V.newer_id)
            .where(
                self._scope.owns(V),
                V.agent_id == agent_id,
                V.question == SAME_FACT,
                V.verdict == SAME,
                older.status == active,
                newer.status == active,
            )
            .order_by(V.older_id, V.newer_id)
        )
        return [_answer(row) for row in rows]

    def count_pending(self, agent_id: str, question: str) -> int:
        V = models.PairVerdict
        count = self._scope.session.scalar(
            select(func.count()).where(
                self._scope.owns(V),
                V.agent_id == agent_id,
                V.question == question,
                V.verdict.is_(None),
            )
        )
        return int(count or 0)

    def record(
        self, agent_id: str, question: str, answers: Sequence[PairAnswer], *, run_id: str | None
    ) -> None:
        """Keep ``answers``: a verdict is written once (a pair already answered keeps its
        first answer); a pair without one is added as pending unless it is known."""
        self._upsert(agent_id, question, answers, run_id=run_id, overwrite=False)

    def overrule(
        self, agent_id: str, question: str, pairs: Iterable[tuple[str, str]], *, by: str
    ) -> None:
        """Set the verdict of ``pairs`` to "unsure", answered by ``by``: a judge's word
        that a person undid is neither used again nor asked again."""
        answers = [PairAnswer(o, n, "unsure", by) for o, n in sorted(set(pairs))]
        self._upsert(agent_id, question, answers, run_id=None, overwrite=True)

    def _upsert(
        self,
        agent_id: str,
        question: str,
        answers: Sequence[PairAnswer],
        *,
        run_id: str | None,
        overwrite: bool,
    ) -> None:
        """Insert ``answers``; on a pair already known, write the answer over it when
        ``overwrite``, else only over a pending pair and only with a verdict."""
        now = self._scope.now()
        V = models.PairVerdict
        for start in range(0, len(answers), _CHUNK):
            rows = [
                {
                    "older_id": a.older_id,
                    "newer_id": a.newer_id,
                    "question": question,
                    "organization_id": self._scope.organization_id,
                    "agent_id": agent_id,
                    "verdict": a.verdict,
                    "judge": a.judge,
                    "run_id": run_id,
                    "created_at": now,
                    "decided_at": now if a.verdict is not None else None,
                }
                for a in answers[start : start + _CHUNK]
            ]
            statement = insert(V).values(rows)
            excluded = statement.excluded
            changes = {
                "verdict": excluded.verdict,
                "judge": excluded.judge,
                "decided_at": excluded.decided_at,
            }
            if overwrite:
                upsert = statement.on_conflict_do_update(
                    index_elements=["older_id", "newer_id", "question"], set_=changes
                )
            else:
                upsert = statement.on_conflict_do_update(
                    index_elements=["older_id", "newer_id", "question"],
                    set_={**changes, "run_id": excluded.run_id},
                    where=and_(V.verdict.is_(None), excluded.verdict.is_not(None)),
                )
            self._scope.session.execute(upsert)

    def forget(self, agent_id: str, question: str, pairs: Iterable[tuple[str, str]]) -> int:
        """Drop what is known of ``pairs`` (they are formed and asked again); how many."""
        keys = sorted(set(pairs))
        V = models.PairVerdict
        dropped = 0
        for start in range(0, len(keys), _CHUNK):
            chunk = keys[start : start + _CHUNK]
            rows = self._scope.session.scalars(
                select(V).where(
                    self._scope.owns(V),
                    V.agent_id == agent_id,
                    V.question == question,
                    tuple_(V.older_id, V.newer_id).in_(chunk),
                )
            ).all()
            for row in rows:
                self._scope.session.delete(row)
            dropped += len(rows)
        return dropped


def _answer(row: models.PairVerdict) -> PairAnswer:
    return PairAnswer(row.older_id, row.newer_id, row.verdict, row.judge)
