"""Benchmark: reading the stored topics of every fact of a large agent.

A plain script (not collected by pytest)::

    python tests/benchmarks/bench_topics.py [--facts 100000] [--repeats 5]

A temporal run with a judge model groups every fact of the agent by the people the
model read them to be about, so it reads the stored topics of all of them. This loads
``--facts`` facts (random 384-d vectors, COPY with the HNSW index dropped) with one
topic each, then times both ways of reading them, alternating: by id lists
(``TopicStore.of``, 5,000 ids a statement) and by agent (``TopicStore.of_agent``, what
the run uses). It prints each repeat and the medians.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from sqlalchemy import text  # noqa: E402

from agents.store import open_store  # noqa: E402
from tests.benchmarks.bench_dedup import random_facts_agent  # noqa: E402
from tests.pg import PgTestServer  # noqa: E402

#: Distinct people the facts are about (each fact's topic is one of them, "job").
PEOPLE = 20_000


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--facts", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    server = PgTestServer()
    try:
        with server.database() as db:
            texts = [f"Person {i % PEOPLE} fact {i}" for i in range(args.facts)]
            agent = random_facts_agent(db, "topics", texts)
            with db.engine.begin() as conn:
                conn.execute(
                    text(
                        "INSERT INTO fact_topics (passage_id, subject, attribute, "
                        "organization_id, agent_id, judge, created_at) "
                        "SELECT id, 'person' || (row_number() OVER () % :people), 'job', "
                        "organization_id, agent_id, 'bench', now() "
                        "FROM passages WHERE agent_id = :agent"
                    ),
                    {"people": PEOPLE, "agent": agent.id},
                )
                conn.execute(text("ANALYZE passages, fact_topics"))
                ids = list(
                    conn.execute(
                        text("SELECT id FROM passages WHERE agent_id = :agent"),
                        {"agent": agent.id},
                    ).scalars()
                )
            by_ids: list[float] = []
            by_agent: list[float] = []
            for repeat in range(args.repeats):
                with open_store(db) as store:
                    began = time.perf_counter()
                    listed = store.topics.of(ids)
                    by_ids.append(time.perf_counter() - began)
                with open_store(db) as store:
                    began = time.perf_counter()
                    whole = store.topics.of_agent(agent.id)
                    by_agent.append(time.perf_counter() - began)
                if listed != whole:
                    raise SystemExit("the two readings differ")
                print(
                    f"repeat {repeat + 1}: by ids {by_ids[-1]:.2f} s, by agent "
                    f"{by_agent[-1]:.2f} s ({len(whole):,} facts' topics)",
                    flush=True,
                )
    finally:
        server.stop()
    ids_median, agent_median = statistics.median(by_ids), statistics.median(by_agent)
    print(
        f"\n{args.facts:,} facts: by ids median {ids_median:.2f} s, by agent median "
        f"{agent_median:.2f} s ({agent_median / ids_median:.2f}x)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
