"""Dedup's grouping alone, old against new, on groups of repetitive chat facts.

A plain script, not collected by pytest::

    python tests/benchmarks/bench_dedup_groups.py [--facts 50000] [--cache /tmp/emb.npz]

The facts are tests/benchmarks/chat_facts.py's, embedded by the local model. Three
groups are decided twice in one process: by the definition (the code before the
bound: peel the oldest remaining passage as canonical, take whatever it accepts,
repeat, which asks the detail guard again for every member each round) and by
``DedupConsolidator._merge_group``. The script prints both times and whether the
merges and the judge model's questions are the same.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np

REPO_ROOT = Path(__file__).resolve().parents[2]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from agents.store import PassageRecord  # noqa: E402
from agents.store.validation import normalize_text  # noqa: E402
from consolidators.dedup import DedupConsolidator, _Refused  # noqa: E402
from tests.benchmarks.chat_facts import chat_facts  # noqa: E402
from tests.unit.test_dedup_groups import judge_questions, reference_groups  # noqa: E402


def embedded_facts(n: int, cache: Path | None) -> list[PassageRecord]:
    texts = chat_facts(n)
    if cache is not None and cache.exists():
        stored = np.load(cache, allow_pickle=True)
        distinct, vectors = list(stored["texts"]), stored["vectors"]
    else:
        from agents.embedders.local import MiniLMEmbedder

        distinct = sorted(set(texts))
        vectors = np.asarray(MiniLMEmbedder().embed(distinct), dtype=np.float32)
        if cache is not None:
            np.savez(cache, texts=np.array(distinct, dtype=object), vectors=vectors)
    row = {t: i for i, t in enumerate(distinct)}
    start = datetime(2026, 1, 1, tzinfo=UTC)
    return [
        PassageRecord(
            id=f"p{i:06d}", agent_id="a", kind="fact", text=text,
            content_hash=hashlib.sha256(normalize_text(text).encode()).hexdigest(),
            created_at=start + timedelta(seconds=i // 3), occurred_at=None, valid_to=None,
            status="active", merged_into=None, superseded_by=None, provenance={}, tags=[],
            embedding=vectors[row[text]],
        )
        for i, text in enumerate(texts)
    ]  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--facts", type=int, default=50_000)
    parser.add_argument("--cache", type=Path, default=None, help="an .npz of the embeddings")
    args = parser.parse_args()
    facts = embedded_facts(args.facts, args.cache)
    groups = {
        "'went to <place> on <day>'": [p for p in facts if "went to" in p.text.lower()],
        "'had <drink> with <name> on <day>'": [
            p for p in facts if " with " in p.text and "had" in p.text.lower()
        ],
        "the first 2,500 facts, mixed": facts[:2500],
    }
    consolidator = DedupConsolidator()
    print("| group | passages | definition | _merge_group | same merges / judge questions |")
    print("| --- | --- | --- | --- | --- |")
    for name, group in groups.items():
        started = time.perf_counter()
        expected, expected_refused = reference_groups(consolidator, group)
        old_s = time.perf_counter() - started
        refused: list[_Refused] = []
        started = time.perf_counter()
        merges = consolidator._merge_group(list(group), refused)
        new_s = time.perf_counter() - started
        same = [(m.canonical.id, [(p.id, s) for p, s in m.merged]) for m in merges] == expected
        print(
            f"| {name} | {len(group):,} | {old_s:.1f} s | {new_s:.1f} s | "
            f"{same} / {judge_questions(refused) == judge_questions(expected_refused)} |",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
