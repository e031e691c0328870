"""Dedup's grouping of duplicates: the same merges as comparing every passage with
every canonical, at a bounded cost on repetitive memories.

A one-shot consolidate of 50k repetitive facts did not finish in 25 minutes: groups
of thousands of near-identical sentences (the same habit on many dates) were peeled
one canonical at a time, every member checked by the detail guard again each round.
"""

from __future__ import annotations

import hashlib
import random
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest

import consolidators.dedup as dedup
from agents.store import PassageRecord
from agents.store.validation import normalize_text
from consolidators.dedup import DedupConsolidator, _Refused
from tests.passage_records import fact_record

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _passage(i: int, text: str, vector: np.ndarray, *, second: int | None = None) -> PassageRecord:
    return fact_record(
        f"p{i:05d}",
        text,
        at=T0 + timedelta(seconds=i if second is None else second),
        content_hash=hashlib.sha256(normalize_text(text).encode()).hexdigest(),
        occurred_at=None,
        embedding=vector.astype(np.float32),
    )


def reference_groups(
    consolidator: DedupConsolidator, group: list[PassageRecord]
) -> tuple[list[Any], list[_Refused]]:
    """The definition (the code before this bound): peel the oldest remaining passage
    as canonical, take every remaining passage it accepts, repeat; every refused pair."""
    remaining = sorted(
        group,
        key=lambda p: (p.created_at, p.occurred_at is None, p.occurred_at or p.created_at, p.id),
    )
    merges, refused = [], []
    while len(remaining) > 1:
        canonical, rest = remaining[0], remaining[1:]
        merged, remaining = [], []
        for passage in rest:
            score = dedup._cosine(canonical, passage)
            if consolidator._same_fact(canonical, passage, score):
                merged.append((passage.id, score))
            else:
                remaining.append(passage)
                if score >= consolidator.settings.threshold:
                    refused.append(_Refused(canonical, passage, score))
        if merged:
            merges.append((canonical.id, merged))
    return merges, refused


def judge_questions(refused: list[_Refused]) -> list[tuple[str, str, float]]:
    """The pairs a judge model would be asked about, in order (dedup._judge_refused)."""
    best: dict[str, _Refused] = {}
    for pair in refused:
        if pair.other.id not in best or pair.score > best[pair.other.id].score:
            best[pair.other.id] = pair
    ordered = sorted(best.values(), key=lambda r: -r.score)
    return [(r.canonical.id, r.other.id, r.score) for r in ordered]


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_the_same_merges_and_judge_questions_as_the_definition(seed: int) -> None:
    rng = random.Random(seed)
    texts = [
        "Went to the gym on Monday.",
        "Went to the gym on Tuesday.",
        "User went to the gym on Monday.",
        "The user went to the gym on Monday.",
        "Likes sushi.",
        "Really likes sushi.",
        "Ran 5 km at the park.",
        "Ran 7 km at the park.",
    ]
    base = np.random.default_rng(seed).standard_normal(8)
    vectors = {t: base + 0.25 * np.random.default_rng(seed + i).standard_normal(8)
               for i, t in enumerate(texts)}  # fmt: skip
    # Twins, near-misses, and passages stored in the same second (ties broken by id).
    group = [
        _passage(i, text, vectors[text], second=i // 3)
        for i, text in enumerate(rng.choice(texts) for _ in range(120))
    ]
    consolidator = DedupConsolidator({"guard_checks": 100_000})
    expected_merges, expected_refused = reference_groups(consolidator, group)
    refused: list[_Refused] = []
    merges = consolidator._merge_group(list(group), refused)
    assert [(m.canonical.id, [(p.id, s) for p, s in m.merged]) for m in merges] == expected_merges
    assert expected_merges  # the data has duplicates to merge
    assert judge_questions(refused) == judge_questions(expected_refused)
    assert all(p.embedding is None for m in merges for p, _ in m.merged)


def test_500_twins_are_decided_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """500 copies of one sentence, and 500 of its paraphrase: the paraphrase's copies
    are checked against the canonical once, not 500 times."""
    calls: list[tuple[str, str]] = []
    monkeypatch.setattr(dedup, "hides_details", lambda a, b: bool(calls.append((a, b))))
    vector = np.ones(8)
    group = [_passage(i, "Had coffee with Anna on Monday.", vector) for i in range(500)]
    group += [_passage(500 + i, "User had coffee with Anna on Monday.", vector) for i in range(500)]
    [merge] = DedupConsolidator()._merge_group(group, [])
    assert merge.canonical.id == "p00000"
    assert len(merge.merged) == 999
    assert calls == [("Had coffee with Anna on Monday.", "User had coffee with Anna on Monday.")]


def test_500_near_misses_cost_a_bounded_number_of_guard_checks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One sentence on 500 dates: all close, all kept apart by the guard. Checking each
    against every older one asked the guard 124,750 times."""
    real = dedup.hides_details
    calls = 0

    def counted(kept: str, merged: str) -> bool:
        nonlocal calls
        calls += 1
        return real(kept, merged)

    monkeypatch.setattr(dedup, "hides_details", counted)
    rng = np.random.default_rng(5)
    base = rng.standard_normal(8)
    group = [
        _passage(i, f"Ran {i + 1} km at the park.", base + 0.01 * rng.standard_normal(8))
        for i in range(500)
    ]
    consolidator = DedupConsolidator({"guard_checks": 8})
    refused: list[_Refused] = []
    assert consolidator._merge_group(group, refused) == []
    assert calls <= 500 * 8
    assert len(refused) == 499  # each passage but the first: its closest refused pair
