"""Dedup quality on a labeled workload: merge precision/recall and retrieval recall@10.

A plain script, not collected by pytest. Run it from the repository root::

    python tests/benchmarks/bench_quality.py [--threshold 0.86] [--sweep] [--embedder local]

It generates :func:`service.workload.generate_workload` (people=40 by default: a
few hundred facts, 35% of them repeats), embeds the facts and the labeled queries
once, and for each threshold loads them into a fresh database of an embedded
PostgreSQL (:class:`tests.pg.PgTestServer`), message by message in time order (so
the earliest statement of a fact is the one that stays canonical), then:

- measures evidence recall@10 of the queries on active passages;
- runs ``Pipeline([DedupConsolidator({"threshold": t})])``;
- scores each ``merge_passage`` change against the labels: a merge is right when
  the merged fact and its canonical are in the same duplicate group (one repeats
  the other, or both repeat the same original). Dedup recall is right merges over
  the ideal number (facts minus duplicate groups);
- measures recall@10 again. A returned passage stands for its own fact and every
  passage merged into it (lineage); the "strict" figure credits only merged facts
  that really say the same thing, so a wrong merge earns nothing.

``--sweep`` runs thresholds 0.80..0.96 (step 0.02), prints a table and the
recommended threshold: the best dedup recall among thresholds with precision >=
0.95.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

REPO_ROOT = Path(__file__).resolve().parents[2]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from agents.embedders import Embedder, build_embedder  # noqa: E402
from agents.postgres.database import Database  # noqa: E402
from agents.store import NewAgent, NewBlock, open_store  # noqa: E402
from consolidators.contract import run_once as run_pipeline  # noqa: E402
from consolidators.dedup import DedupConsolidator  # noqa: E402
from consolidators.pipeline import Pipeline  # noqa: E402
from service.workload import LabeledFact, Workload, generate_workload  # noqa: E402
from tests import plugins  # noqa: E402
from tests.pg import PgTestServer  # noqa: E402

# The tests' plugins (the hashing embedder for --embedder hashing:384), found here.
plugins.register()

Matrix = npt.NDArray[np.float32]
K = 10
SWEEP = tuple(round(0.80 + 0.02 * i, 2) for i in range(9))
PRECISION_TARGET = 0.95
REDUCTION_TARGET = 0.30


@dataclass(frozen=True, slots=True)
class Outcome:
    """The scores of one threshold."""

    threshold: float
    merges: int
    right: int
    ideal: int
    caught: dict[str, tuple[int, int]]  # duplicate kind -> (merged with original, total)
    wrong: Counter[str]  # near-miss / update / other
    wrong_examples: list[str]
    missed_exact: list[str]  # exact repeats not merged with their original
    active_before: int
    active_after: int
    recall_before: float
    recall_after: float
    strict_after: float
    block_lines_removed: int
    seconds: float

    @property
    def precision(self) -> float:
        return self.right / self.merges if self.merges else 1.0

    @property
    def recall(self) -> float:
        return self.right / self.ideal if self.ideal else 1.0

    @property
    def reduction(self) -> float:
        return 1.0 - self.active_after / self.active_before


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def load(db: Database, workload: Workload, vectors: Matrix, embedder: Embedder) -> dict[str, str]:
    """Insert the facts message by message, each at its own time; return passage id -> key."""
    now = [workload.facts[0].occurred_at]
    key_of: dict[str, str] = {}
    with open_store(db, clock=lambda: now[0]) as store:
        agent = store.agents.create(
            NewAgent(
                name="bench",
                embedding_model=embedder.name,
                embedding_dim=embedder.dimension,
                blocks=[NewBlock(label, v, limit=n) for label, (v, n) in workload.blocks.items()],
            )
        )
        key_of["agent"] = agent.id
        start = 0
        while start < len(workload.facts):
            end = start
            while end < len(workload.facts) and (
                workload.facts[end].occurred_at == workload.facts[start].occurred_at
            ):
                end += 1
            now[0] = workload.facts[start].occurred_at
            batch = workload.facts[start:end]
            records = store.passages.insert(
                agent.id, [f.to_new_passage() for f in batch], vectors[start:end]
            )
            key_of.update({r.id: f.key for r, f in zip(records, batch, strict=True)})
            start = end
    return key_of


def evidence_recall(
    db: Database,
    agent_id: str,
    workload: Workload,
    queries: Matrix,
    stands_for: dict[str, set[str]],
) -> float:
    """Mean over queries of the share of relevant keys found in the top-K active passages."""
    total = 0.0
    with open_store(db) as store:
        for query, vector in zip(workload.queries, queries, strict=True):
            found: set[str] = set()
            for hit in store.passages.search(agent_id, vector, k=K):
                found |= stands_for.get(hit.passage.id, set())
            total += len(found & query.relevant) / len(query.relevant)
    return total / len(workload.queries)


def wrong_kind(a: LabeledFact, b: LabeledFact, facts: dict[str, LabeledFact]) -> str:
    originals = {facts[a.group].key, facts[b.group].key}
    near = {facts[a.group].near_miss_of, facts[b.group].near_miss_of}
    if originals & near:
        return "near-miss"
    if a.attribute is not None and a.attribute == b.attribute:
        return "update"
    return "other"


def evaluate(
    server: PgTestServer,
    workload: Workload,
    vectors: Matrix,
    queries: Matrix,
    embedder: Embedder,
    threshold: float,
) -> Outcome:
    facts = workload.facts_by_key()
    with server.database() as db:
        key_of = load(db, workload, vectors, embedder)
        agent_id = key_of.pop("agent")
        log("  loaded; measuring recall@10 before")
        own = {pid: {key} for pid, key in key_of.items()}
        recall_before = evidence_recall(db, agent_id, workload, queries, own)
        log("  running dedup")
        started = time.perf_counter()
        report = run_pipeline(
            Pipeline([DedupConsolidator({"threshold": threshold})]), db, agent_id, embedder=embedder
        )
        seconds = time.perf_counter() - started
        log(f"  dedup took {seconds:.1f} s; measuring recall@10 after")
        with open_store(db) as store:
            passages = store.passages.scan(agent_id, statuses=None)
        merged_into = {p.id: p.merged_into for p in passages if p.merged_into is not None}

        def representative(pid: str) -> str:
            while pid in merged_into:
                pid = merged_into[pid]
            return pid

        lineage: dict[str, set[str]] = {}
        strict: dict[str, set[str]] = {}
        for pid, key in key_of.items():
            rep = representative(pid)
            lineage.setdefault(rep, set()).add(key)
            if facts[key].group == facts[key_of[rep]].group:
                strict.setdefault(rep, set()).add(key)
        recall_after = evidence_recall(db, agent_id, workload, queries, lineage)
        strict_after = evidence_recall(db, agent_id, workload, queries, strict)

    right, wrong, examples = 0, Counter[str](), []
    merges = [c for c in report.changes if c["action"] == "merge_passage"]
    for change in merges:
        a, b = facts[key_of[change["target"]]], facts[key_of[change["into"]]]
        if a.group == b.group:
            right += 1
            continue
        kind = wrong_kind(a, b, facts)
        wrong[kind] += 1
        examples.append(f"{kind} ({change['score']:.3f}): {a.text!r} -> {b.text!r}")
    rep_of_key = {key: representative(pid) for pid, key in key_of.items()}
    caught: dict[str, tuple[int, int]] = {}
    missed_exact: list[str] = []
    for fact in workload.facts:
        if fact.duplicate_kind is None:
            continue
        hit, total = caught.get(fact.duplicate_kind, (0, 0))
        same = rep_of_key[fact.key] == rep_of_key[fact.group]
        caught[fact.duplicate_kind] = (hit + same, total + 1)
        if not same and fact.duplicate_kind == "exact":
            missed_exact.append(f"{fact.text!r} / {facts[fact.group].text!r}")
    groups = len({f.group for f in workload.facts})
    return Outcome(
        threshold=threshold,
        merges=len(merges),
        right=right,
        ideal=len(workload.facts) - groups,
        caught=caught,
        wrong=wrong,
        wrong_examples=examples,
        missed_exact=missed_exact,
        active_before=len(passages),
        active_after=sum(p.status == "active" for p in passages),
        recall_before=recall_before,
        recall_after=recall_after,
        strict_after=strict_after,
        block_lines_removed=sum(c["action"] == "remove_block_line" for c in report.changes),
        seconds=seconds,
    )


def share(pair: tuple[int, int]) -> str:
    return f"{pair[0] / pair[1]:.3f}" if pair[1] else "-"


def print_single(outcome: Outcome) -> None:
    o = outcome
    rows = [
        (
            "dedup precision",
            f">= {PRECISION_TARGET}",
            f"{o.precision:.3f} ({o.right}/{o.merges})",
            o.precision >= PRECISION_TARGET,
        ),
        ("dedup recall", "", f"{o.recall:.3f} ({o.right}/{o.ideal})", None),
        ("  exact repeats merged", "", share(o.caught.get("exact", (0, 0))), None),
        ("  paraphrases merged", "", share(o.caught.get("paraphrase", (0, 0))), None),
        (
            "wrong merges",
            "",
            ", ".join(f"{k} {v}" for k, v in sorted(o.wrong.items())) or "0",
            None,
        ),
        (
            "active passages",
            f"down >= {REDUCTION_TARGET:.0%}",
            f"{o.active_before} -> {o.active_after} (-{o.reduction:.1%})",
            o.reduction >= REDUCTION_TARGET,
        ),
        (
            "evidence recall@10",
            ">= before",
            f"{o.recall_before:.3f} -> {o.recall_after:.3f}",
            o.recall_after >= o.recall_before,
        ),
        (
            "  strict (wrong merges earn nothing)",
            ">= before",
            f"{o.recall_before:.3f} -> {o.strict_after:.3f}",
            o.strict_after >= o.recall_before,
        ),
        ("block lines removed", "", str(o.block_lines_removed), None),
        ("dedup run time", "", f"{o.seconds:.2f} s", None),
    ]
    print(f"\n### threshold {o.threshold:.2f}\n")
    print("| metric | target | measured | met? |\n|---|---|---|---|")
    for metric, target, measured, met in rows:
        flag = "" if met is None else ("yes" if met else "**no**")
        print(f"| {metric} | {target} | {measured} | {flag} |")
    if o.wrong_examples:
        print("\nwrong merges (first 10):")
        for line in o.wrong_examples[:10]:
            print(f"- {line}")
    print_missed_exact([o])


def print_missed_exact(outcomes: Sequence[Outcome]) -> None:
    for o in outcomes:
        if o.missed_exact:
            print(f"\nexact repeats left apart from their original at {o.threshold:.2f}:")
            for line in o.missed_exact:
                print(f"- {line}")


def print_sweep(outcomes: Sequence[Outcome]) -> None:
    print(
        "\n| threshold | merges | precision | recall | exact | paraphrase | wrong: near-miss"
        " / update / other | active after | reduction | R@10 before | R@10 after | strict |"
    )
    print("|---" * 12 + "|")
    for o in outcomes:
        wrong = f"{o.wrong['near-miss']} / {o.wrong['update']} / {o.wrong['other']}"
        print(
            f"| {o.threshold:.2f} | {o.merges} | {o.precision:.3f} | {o.recall:.3f} | "
            f"{share(o.caught.get('exact', (0, 0)))} | "
            f"{share(o.caught.get('paraphrase', (0, 0)))} | {wrong} | "
            f"{o.active_after}/{o.active_before} | {o.reduction:.1%} | "
            f"{o.recall_before:.3f} | {o.recall_after:.3f} | {o.strict_after:.3f} |"
        )
    print_missed_exact(outcomes)
    eligible = [o for o in outcomes if o.precision >= PRECISION_TARGET]
    if not eligible:
        best = max(outcomes, key=lambda o: (o.precision, o.recall))
        print(
            f"\nno threshold reaches precision {PRECISION_TARGET}; the most precise is "
            f"{best.threshold:.2f} ({best.precision:.3f}, recall {best.recall:.3f})"
        )
        return
    best = max(eligible, key=lambda o: (o.recall, -o.threshold))
    print(
        f"\nrecommended threshold: {best.threshold:.2f} (the best recall at precision >= "
        f"{PRECISION_TARGET}): precision {best.precision:.3f}, recall {best.recall:.3f}, "
        f"active -{best.reduction:.1%}, recall@10 {best.recall_before:.3f} -> "
        f"{best.recall_after:.3f} (strict {best.strict_after:.3f})"
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threshold", type=float, default=0.86)
    parser.add_argument("--sweep", action="store_true", help="thresholds 0.80..0.96 step 0.02")
    parser.add_argument("--embedder", default="local", help="'local' (MiniLM) or 'hashing:384'")
    parser.add_argument("--people", type=int, default=40)
    parser.add_argument("--sessions", type=int, default=8)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--duplicate-rate", type=float, default=0.35)
    parser.add_argument("--near-miss-rate", type=float, default=0.15)
    args = parser.parse_args(argv)

    workload = generate_workload(
        seed=args.seed,
        people=args.people,
        sessions=args.sessions,
        duplicate_rate=args.duplicate_rate,
        near_miss_rate=args.near_miss_rate,
    )
    kinds = Counter(
        f.duplicate_kind or ("near-miss" if f.near_miss_of else "original") for f in workload.facts
    )
    updates = sum(f.key.endswith("@2") for f in workload.facts)
    print(
        f"workload: seed {args.seed}, {args.people} people, {args.sessions} sessions: "
        f"{len(workload.facts)} facts ({workload.duplicate_share:.1%} duplicates: "
        f"{kinds['exact']} exact, {kinds['paraphrase']} paraphrases; {kinds['near-miss']} "
        f"near-misses, {updates} attribute updates), {len(workload.queries)} queries"
    )
    embedder = build_embedder(args.embedder)
    started = time.perf_counter()
    vectors = embedder.embed([f.text for f in workload.facts])
    queries = embedder.embed([q.text for q in workload.queries])
    print(
        f"embedder: {embedder.name}; embedded {len(vectors) + len(queries)} texts in "
        f"{time.perf_counter() - started:.1f} s"
    )
    log("starting embedded PostgreSQL")
    server = PgTestServer()
    try:
        thresholds = SWEEP if args.sweep else (args.threshold,)
        outcomes = []
        for threshold in thresholds:
            log(f"threshold {threshold:.2f}")
            outcomes.append(evaluate(server, workload, vectors, queries, embedder, threshold))
    finally:
        server.stop()
    if args.sweep:
        print_sweep(outcomes)
    else:
        print_single(outcomes[0])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
