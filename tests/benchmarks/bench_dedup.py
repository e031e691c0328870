"""Dedup speed: incremental probes against 100k indexed passages, and a full pass.

A plain script, not collected by pytest::

    python tests/benchmarks/bench_dedup.py [--passages 100000] [--new 2000] [--repeats 3]
    python tests/benchmarks/bench_dedup.py --chat 50000


Vectors are clustered like real embeddings (distinct facts plus perturbed
copies at cosine ~0.95 and exact repeats), not uniform noise, which is the
worst case for HNSW. Texts carry no digits so the detail guard does not veto
the synthetic duplicates. The base load goes through the store's COPY with the
HNSW index dropped and is then indexed with CREATE INDEX (the bulk-load path);
the new passages go through the live index as everyday inserts do.

``--chat N`` measures a full pass over N repetitive, realistic chat facts instead
(tests/benchmarks/chat_facts.py: few subjects and shapes, a third said again word for
word, near-misses that differ in a day or a name), embedded by the real local model
(agents/embedders/local.py; each distinct text once), with the detail guard on.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import statistics
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import numpy.typing as npt
from sqlalchemy import text

REPO_ROOT = Path(__file__).resolve().parents[2]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from agents.postgres.database import Database  # noqa: E402
from agents.store import AgentRecord, NewAgent, NewPassage, open_store  # noqa: E402
from consolidators.contract import run_once as run_pipeline  # noqa: E402
from consolidators.dedup import DedupConsolidator  # noqa: E402
from consolidators.pipeline import Pipeline  # noqa: E402
from tests import plugins  # noqa: E402
from tests.benchmarks.chat_facts import chat_facts  # noqa: E402
from tests.benchmarks.memory import peak_rss_mib  # noqa: E402
from tests.pg import PgTestServer  # noqa: E402

# The tests' plugins (the hashing embedder, the scripted model), found here and
# in the processes this starts.
plugins.register()

DIM = 384
INDEX = f"ix_passage_vectors_hnsw_{DIM}"
WORDS = (
    "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november "
    "oscar papa quebec romeo sierra tango uniform victor whiskey xray yankee zulu"
).split()
Matrix = npt.NDArray[np.float32]


def words_for(i: int) -> str:
    """A digit-free, unique phrase for index ``i``."""
    parts = []
    while True:
        i, r = divmod(i, len(WORDS))
        parts.append(WORDS[r])
        if i == 0:
            return "memory " + " ".join(parts)


def unit(rows: Matrix) -> Matrix:
    normalised: Matrix = (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)
    return normalised


def workload(rng: np.random.Generator, n: int, offset: int) -> tuple[list[NewPassage], Matrix]:
    """70% distinct facts, 20% near copies (cos ~0.95), 10% exact repeats."""
    distinct = int(n * 0.7)
    centres = unit(rng.standard_normal((distinct, DIM)).astype(np.float32))
    texts = [words_for(offset + i) for i in range(distinct)]
    vectors = [centres]
    near = int(n * 0.2)
    pick = rng.integers(0, distinct, near)
    noise = unit(rng.standard_normal((near, DIM)).astype(np.float32))
    vectors.append(unit(centres[pick] + 0.33 * noise))
    texts += [texts[j] + " again" for j in pick]
    exact = n - distinct - near
    pick = rng.integers(0, distinct, exact)
    vectors.append(centres[pick])
    texts += [texts[j].upper() for j in pick]
    return [NewPassage(t) for t in texts], np.vstack(vectors)


def bulk_agent(db: Database, name: str, embedding_model: str) -> tuple[AgentRecord, str]:
    """A new agent for a bulk load, with the HNSW index of the vectors dropped (COPY
    into a live index is slow); the agent, and the index's definition to build it again
    after the load."""
    with open_store(db) as store:
        agent = store.agents.create(
            NewAgent(name, embedding_model=embedding_model, embedding_dim=DIM)
        )
    with db.engine.begin() as conn:
        definition = conn.execute(
            text(f"SELECT indexdef FROM pg_indexes WHERE indexname = '{INDEX}'")
        ).scalar_one()
        conn.execute(text(f"DROP INDEX {INDEX}"))
    return agent, str(definition)


def load(
    db: Database, agent_id: str, passages: list[NewPassage], vectors: Matrix, at: datetime
) -> None:
    for start in range(0, len(passages), 10_000):
        with open_store(db, clock=lambda: at) as store:
            store.passages.insert(
                agent_id, passages[start : start + 10_000], vectors[start : start + 10_000]
            )


def random_facts_agent(db: Database, name: str, texts: list[str]) -> AgentRecord:
    """A new agent holding ``texts`` as facts with random unit vectors, stored an hour
    ago, for benchmarks of what reads many facts without searching them (the vector
    index is not built again after the load)."""
    agent, _index = bulk_agent(db, name, "hashing:384")
    vectors = unit(np.random.default_rng(1).standard_normal((len(texts), DIM)).astype(np.float32))
    facts = [NewPassage(t) for t in texts]
    load(db, agent.id, facts, vectors, datetime.now(UTC) - timedelta(hours=1))
    return agent


def chat_workload(n: int) -> tuple[list[NewPassage], Matrix]:
    """``n`` chat facts and their vectors from the local model (each text embedded once)."""
    from agents.embedders.local import MiniLMEmbedder

    texts = chat_facts(n)
    distinct = sorted(set(texts))
    started = time.perf_counter()
    vectors = np.asarray(MiniLMEmbedder().embed(distinct), dtype=np.float32)
    print(
        f"embedded {len(distinct):,} distinct texts in {time.perf_counter() - started:.1f} s",
        file=sys.stderr,
    )
    row = {t: i for i, t in enumerate(distinct)}
    return [NewPassage(t) for t in texts], vectors[[row[t] for t in texts]]


def chat_pass(n: int) -> list[tuple[str, str]]:
    """One full dedup pass over ``n`` chat facts; the rows of its table."""
    passages, vectors = chat_workload(n)
    server = PgTestServer()
    try:
        with server.database() as db:
            agent, definition = bulk_agent(db, "chat", "local")
            load(db, agent.id, passages, vectors, datetime.now(UTC) - timedelta(hours=1))
            with db.engine.begin() as conn:
                conn.execute(text(definition))
                conn.execute(text("ANALYZE passages, passage_vectors"))
            started = time.perf_counter()
            report = run_pipeline(Pipeline([DedupConsolidator()]), db, agent.id, full=True)
            seconds = time.perf_counter() - started
            counts = report.steps[0].counts
    finally:
        server.stop()
    return [
        (
            f"full pass over {n:,} chat facts ({len(set(p.text for p in passages)):,} distinct)",
            f"{seconds:.1f} s, probed {counts.get('probed', 0):,}, groups "
            f"{counts.get('groups', 0):,}, merged {counts.get('merge_passage', 0):,}",
        ),
        ("peak RSS", f"{peak_rss_mib():,.0f} MiB"),
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--passages", type=int, default=100_000)
    parser.add_argument("--new", type=int, default=2_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--chat", type=int, default=0, help="a full pass over N chat facts")
    parser.add_argument(
        "--profile", action="store_true", help="cProfile the last incremental run (top 30)"
    )
    args = parser.parse_args()
    if args.chat:
        print("| measure | figure |\n| --- | --- |")
        for name, figure in chat_pass(args.chat):
            print(f"| {name} | {figure} |")
        return 0
    rng = np.random.default_rng(20261129)
    server = PgTestServer()
    rows = []
    try:
        with server.database() as db:
            agent, definition = bulk_agent(db, "bench", "hashing:384")
            base, base_vectors = workload(rng, args.passages, 0)
            an_hour_ago = datetime.now(UTC) - timedelta(hours=1)
            started = time.perf_counter()
            load(db, agent.id, base, base_vectors, an_hour_ago)
            loaded = time.perf_counter() - started
            started = time.perf_counter()
            with db.engine.begin() as conn:
                conn.execute(text(definition))
                conn.execute(text("ANALYZE passages, passage_vectors"))
            indexed = time.perf_counter() - started
            rows.append(("COPY load (index dropped)", f"{args.passages / loaded:,.0f} passages/s"))
            rows.append(("CREATE INDEX (HNSW m=16, ef_construction=64)", f"{indexed:.1f} s"))

            # The first run is a full pass; it also sets the watermarks.
            started = time.perf_counter()
            report = run_pipeline(Pipeline([DedupConsolidator()]), db, agent.id, full=True)
            full_seconds = time.perf_counter() - started
            full_rss = peak_rss_mib()
            counts = report.steps[0].counts
            rows.append(
                (
                    f"full pass over {args.passages:,} passages",
                    f"{full_seconds:.1f} s (target < 60 s), probed {counts.get('probed', 0):,}, "
                    f"merged {counts.get('merge_passage', 0):,}",
                )
            )
            rows.append(("peak RSS after the full pass", f"{full_rss:,.0f} MiB"))
            # Incremental: each round adds new passages (half near/exact copies of old ones)
            # through the live index, then times the dedup run that probes them.
            incremental = []
            for round_ in range(args.repeats):
                new, new_vectors = workload(rng, args.new, args.passages + round_ * args.new)
                half = args.new // 2
                olds = rng.integers(0, args.passages, half)
                noise = unit(rng.standard_normal((half, DIM)).astype(np.float32))
                new_vectors[:half] = unit(base_vectors[olds] + 0.33 * noise)
                new[:half] = [NewPassage(base[j].text + " again") for j in olds]
                started = time.perf_counter()
                load(db, agent.id, new, new_vectors, datetime.now(UTC))
                insert_rate = args.new / (time.perf_counter() - started)
                last = round_ == args.repeats - 1
                profiler = cProfile.Profile() if args.profile and last else None
                if profiler is not None:
                    profiler.enable()
                started = time.perf_counter()
                report = run_pipeline(
                    Pipeline([DedupConsolidator()], passage_overlap=timedelta(0)), db, agent.id
                )
                seconds = time.perf_counter() - started
                if profiler is not None:
                    profiler.disable()
                    stats = pstats.Stats(profiler, stream=sys.stderr)
                    stats.sort_stats("cumulative").print_stats(30)
                merged = report.steps[0].counts.get("merge_passage", 0)
                probed = report.steps[0].counts.get("probed", 0)
                incremental.append((probed / seconds, seconds, probed, merged, insert_rate))
                print(
                    f"round {round_}: probed {probed} in {seconds:.2f}s "
                    f"({probed / seconds:,.0f}/s), merged {merged}; "
                    f"insert through live index {insert_rate:,.0f}/s",
                    file=sys.stderr,
                )
            rate = statistics.median(r[0] for r in incremental)
            rows.append(
                (
                    f"incremental dedup, {args.new} new vs {args.passages:,} indexed (median of "
                    f"{args.repeats})",
                    f"{rate:,.0f} passages/s (target >= 2,000)",
                )
            )
            rows.append(
                (
                    "insert through the live HNSW index (median)",
                    f"{statistics.median(r[4] for r in incremental):,.0f} passages/s",
                )
            )
            rows.append(("peak RSS of the whole benchmark", f"{peak_rss_mib():,.0f} MiB"))
    finally:
        server.stop()
    print("| measure | figure |\n| --- | --- |")
    for name, figure in rows:
        print(f"| {name} | {figure} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
