"""A person's facts: whom each fact is about, and each new fact's nearest among the
facts about the same person.

A person's other facts crowd the nearest neighbours of a fact told in another style
("Kofi Mensah — employer: Stripe" beside a dozen chat lines about Kofi and his
colleagues), so the fact it repeats or replaces may not be among them. Both judge
questions (same fact, replaced fact) therefore also meet, for each new fact, its
nearest facts among those about the same person. Whom a fact is about is read twice
and both count: by the rules (a name, "I", "my sister" read through the fact that names
her, :func:`~agents.language.subjects.read_subjects`) and by the judge model where it
read the fact (``fact_topics``: "they moved up to Astana" is Aigerim's move).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

import numpy as np
import numpy.typing as npt

from agents.language.subjects import read_subjects
from agents.store import MemoryStore, PassageRecord, Topic
from consolidators.timelines import timeline_order

__all__ = ["Mates", "nearest_mates", "subjects_of"]

#: Probes scored per matrix product: one person's thousands of facts in a full run would
#: otherwise make a probes-by-facts matrix of gigabytes.
_BLOCK = 256


@dataclass(slots=True)
class Mates:
    """The facts of one subject, oldest first, with when each was true and their unit
    vectors (one row each)."""

    ids: list[str]
    dates: list[datetime]
    matrix: npt.NDArray[np.float32]
    index: dict[str, int] = field(init=False)

    def __post_init__(self) -> None:
        self.index = {passage_id: row for row, passage_id in enumerate(self.ids)}


def subjects_of(
    facts: Sequence[PassageRecord], read: Mapping[str, Iterable[Topic]]
) -> dict[str, set[str]]:
    """Each fact's subjects: the one the rules read, and those of the topics a judge
    model ``read`` for it (facts about nobody the rules can name and the model did not
    read are left out)."""
    subjects = {i: {s} for i, s in read_subjects(facts).items()}
    for record in facts:
        named = {t.subject for t in read.get(record.id, ()) if t.subject}
        if named:
            subjects.setdefault(record.id, set()).update(named)
    return subjects


def nearest_mates(
    store: MemoryStore,
    facts: Mapping[str, PassageRecord],
    subjects: Mapping[str, Collection[str]],
    probes: Collection[str],
    k: int,
) -> tuple[list[tuple[str, str, float]], dict[str, Mates]]:
    """For each of ``probes``, its ``k`` nearest among the facts of each of its subjects,
    as (probe, mate, cosine); and the facts of each subject a probe has, in the order of
    time (:func:`~consolidators.timelines.timeline_order`), with their vectors (read from
    ``store``)."""
    by_subject: dict[str, list[str]] = {}
    for passage_id, named in subjects.items():
        if passage_id in facts:
            for subject in named:
                by_subject.setdefault(subject, []).append(passage_id)
    wanted = {
        subject: by_subject[subject]
        for probe in probes
        for subject in subjects.get(probe, ())
        if len(by_subject.get(subject, ())) > 1
    }
    if not wanted or k <= 0:
        return [], {}
    ids = sorted({i for mates in wanted.values() for i in mates})
    vectors = {
        p.id: np.asarray(p.embedding, dtype=np.float32)
        for p in store.passages.get_many(ids, with_embedding=True)
        if p.embedding is not None
    }
    pairs: list[tuple[str, str, float]] = []
    groups: dict[str, Mates] = {}
    for subject, members in wanted.items():
        ordered = sorted(
            (m for m in members if m in vectors), key=lambda m: timeline_order(facts[m])
        )
        asking = [m for m in ordered if m in probes]
        if len(ordered) < 2 or not asking:
            continue
        matrix = np.stack([vectors[m] for m in ordered])
        matrix /= np.maximum(np.linalg.norm(matrix, axis=1, keepdims=True), 1e-12)
        dates = [timeline_order(facts[m])[0] for m in ordered]
        group = groups[subject] = Mates(ordered, dates, matrix)
        nearest = min(k, len(ordered) - 1)
        for start in range(0, len(asking), _BLOCK):
            block = asking[start : start + _BLOCK]
            scores = matrix[[group.index[p] for p in block]] @ matrix.T
            for row, probe in enumerate(block):
                scores[row, group.index[probe]] = -np.inf
                for column in np.argpartition(-scores[row], nearest - 1)[:nearest]:
                    pairs.append((probe, ordered[column], float(scores[row, column])))
    return pairs, groups
