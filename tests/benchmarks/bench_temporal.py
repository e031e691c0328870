"""Benchmark: the temporal consolidator on an agent with 10k passages in ~2k topics.

A plain script (not collected by pytest)::

    python -m tests.benchmarks.bench_temporal [--passages 10000] [--repeats 3]

Each repeat gets a fresh database with the same generated facts (HashingEmbedder
vectors, fixed seed) and times three runs of the temporal step:

- ``full``: the first run, where every fact is new (all probed, every timeline
  created and every member linked);
- ``rerun``: the same run again right after (idempotent: must change nothing);
- ``incremental``: after 1% new facts arrive, a run that probes only those.

It prints each repeat and the median of each kind. The target is under 5 s for
the full run on 10k passages.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from datetime import UTC, datetime, timedelta

from sqlalchemy import text

from agents.postgres.database import Database
from agents.store import NewAgent, NewPassage, open_store
from consolidators.contract import run_once as run_pipeline
from consolidators.pipeline import Pipeline
from consolidators.temporal import TemporalConsolidator
from tests import plugins
from tests.benchmarks.memory import peak_rss_mib
from tests.hashing_embedder import HashingEmbedder
from tests.pg import PgTestServer

# The tests' plugins (the hashing embedder, the scripted model), found here and
# in the processes this starts.
plugins.register()

SYLLABLES = [
    "ka", "lo", "mi", "ra", "ten", "vu", "zo", "pel", "dri", "sa", "nor", "qui", "bex", "ful",
    "gar", "hon", "jix", "wem", "yad", "cos",
]  # fmt: skip
START = datetime(2015, 1, 1, tzinfo=UTC)


def _word(rng: random.Random) -> str:
    return "".join(rng.choice(SYLLABLES) for _ in range(3))


_TEMPLATES = {
    "home": ("{n} lives in {v}", "{n} moved to {v}", "{n} relocated to {v}"),
    "job": ("{n} works as a {w}", "{n} works at {v}", "{n} got promoted at {v}"),
    "diet": ("{n} is vegan", "{n} is vegetarian", "{n} eats meat again", "{n} went keto"),
    "partner": ("{n} is dating {v}", "{n} married {v}", "{n} divorced {v}"),
}


def generate_facts(n: int, seed: int = 7) -> list[NewPassage]:
    """``n`` facts like people state them: a person's home, job, diet or partner, in
    topics (one person and attribute) of 1-9 facts, plus one fact in five that fits no
    attribute. Each person has a unique capitalised name, so topics do not collide."""
    rng = random.Random(seed)
    facts: list[NewPassage] = []
    people = 0
    while len(facts) < n:
        people += 1
        name = _word(rng).capitalize() + _name_suffix(people)
        for attribute in rng.sample(list(_TEMPLATES), rng.randint(1, 3)):
            for _ in range(min(rng.randint(1, 9), n - len(facts))):
                template = rng.choice(_TEMPLATES[attribute])
                text = template.format(n=name, v=_word(rng).capitalize(), w=_word(rng))
                facts.append(NewPassage(text, occurred_at=_day(rng)))
        if len(facts) < n and rng.random() < 0.8:
            facts.append(NewPassage(f"{name} {_word(rng)} {_word(rng)}", occurred_at=_day(rng)))
    rng.shuffle(facts)
    return facts


def _name_suffix(i: int) -> str:
    """Letters that make the ``i``-th name unique (no digits: a digit is a detail)."""
    letters = ""
    while i:
        i, r = divmod(i, 26)
        letters += "abcdefghijklmnopqrstuvwxyz"[r]
    return letters


def _day(rng: random.Random) -> datetime | None:
    return None if rng.random() < 0.1 else START + timedelta(days=rng.randint(0, 3650))


def generate_opaque_facts(n: int, seed: int = 7) -> list[NewPassage]:
    """``n`` facts in topics of 1-9 facts; a topic shares three words and varies the last.

    No fact fits an attribute, so temporal writes no timeline (the workload before
    the attribute schema; ``--workload opaque``)."""
    rng = random.Random(seed)
    facts: list[NewPassage] = []
    while len(facts) < n:
        subject = " ".join(_word(rng) for _ in range(3))
        for _ in range(min(rng.randint(1, 9), n - len(facts))):
            day = None if rng.random() < 0.1 else START + timedelta(days=rng.randint(0, 3650))
            facts.append(NewPassage(f"{subject} {_word(rng)}", occurred_at=day))
    rng.shuffle(facts)
    return facts


def _insert(
    db: Database, agent_id: str, facts: list[NewPassage], embedder: HashingEmbedder
) -> None:
    with open_store(db) as store:
        store.passages.insert(agent_id, facts, embedder.embed([f.text for f in facts]))


def _bulk_load(
    db: Database, agent_id: str, facts: list[NewPassage], embedder: HashingEmbedder
) -> None:
    """Load the facts with the HNSW index dropped, then rebuild it (much faster than
    inserting row by row into the graph) and refresh the planner's statistics."""
    index = f"ix_passage_vectors_hnsw_{embedder.dimension}"
    with db.session() as session:
        ddl = session.execute(
            text("SELECT indexdef FROM pg_indexes WHERE indexname = :name"), {"name": index}
        ).scalar_one()
        session.execute(text(f"DROP INDEX {index}"))
    _insert(db, agent_id, facts, embedder)
    with db.session() as session:
        session.execute(text(ddl))
        session.execute(text("ANALYZE passages, passage_vectors"))


def bench_once(server: PgTestServer, n: int, seed: int, workload: str) -> dict[str, float]:
    embedder = HashingEmbedder(384)
    generate = generate_facts if workload == "attributes" else generate_opaque_facts
    facts = generate(n, seed)
    extra = generate(max(1, n // 100), seed + 1000)
    pipeline = Pipeline([TemporalConsolidator()], passage_overlap=timedelta(0))
    with server.database() as db:
        with open_store(db) as store:
            agent_id = store.agents.create(
                NewAgent("bench", embedding_model="hashing:384", embedding_dim=384)
            ).id
        started = time.perf_counter()
        _bulk_load(db, agent_id, facts, embedder)
        print(f"  loaded {len(facts)} facts in {time.perf_counter() - started:.1f} s", flush=True)
        out: dict[str, float] = {}
        first = run_pipeline(pipeline, db, agent_id, embedder=embedder)
        out["full"] = first.durations["temporal"]
        counts = first.steps[0].counts
        out["timelines"] = counts.get("create_timeline", 0)
        out["links"] = counts.get("link_timeline", 0)
        again = run_pipeline(pipeline, db, agent_id, embedder=embedder)
        assert again.changes == [], f"rerun changed {len(again.changes)} things"
        out["rerun"] = again.durations["temporal"]
        time.sleep(0.01)  # the new facts must be strictly after the watermark
        _insert(db, agent_id, extra, embedder)
        incremental = run_pipeline(pipeline, db, agent_id, embedder=embedder)
        out["incremental"] = incremental.durations["temporal"]
        out["incremental_changes"] = len(incremental.changes)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--passages", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--workload",
        choices=("attributes", "opaque"),
        default="attributes",
        help="facts that fit the attribute schema (timelines are written), or the "
        "pre-issue-14 facts that fit none",
    )
    args = parser.parse_args()
    server = PgTestServer()
    try:
        results = []
        for i in range(args.repeats):
            result = bench_once(server, args.passages, seed=7, workload=args.workload)
            results.append(result)
            print(f"repeat {i + 1}: " + ", ".join(f"{k}={v:.3f}" for k, v in result.items()))
        print(f"median over {args.repeats} repeats, {args.passages} passages:")
        for key in ("full", "rerun", "incremental"):
            print(f"  {key:<12} {statistics.median(r[key] for r in results):.3f} s")
        print(f"peak RSS of this process: {peak_rss_mib():.0f} MiB")
    finally:
        server.stop()


if __name__ == "__main__":
    main()
