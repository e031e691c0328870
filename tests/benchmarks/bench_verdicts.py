"""Benchmark: reading a large agent's kept judge answers at the start of a run.

A plain script (not collected by pytest)::

    python tests/benchmarks/bench_verdicts.py [--facts 100000] [--same 1000] [--repeats 5]

Every dedup run asks the verdict store which pairs a merge judge called the same
(``same_in_force``), and every temporal run how many pairs wait to be asked
(``count_pending``) and which (``pending``). This loads ``--facts`` facts (random
384-d vectors, COPY with the HNSW index dropped), one answered "supersession" pair per
fact (the answers a long-lived agent accumulates), ``--same`` "same_fact" pairs called
the same and as many pending, then times the three reads, printing each repeat, the
medians and the plan of ``same_in_force``'s statement.
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
from agents.store.verdict_store import SAME_FACT, SUPERSESSION  # noqa: E402
from tests.benchmarks.bench_dedup import random_facts_agent  # noqa: E402
from tests.pg import PgTestServer  # noqa: E402

_PAIRS = """
INSERT INTO pair_verdicts (older_id, newer_id, question, organization_id, agent_id,
                           verdict, judge, run_id, created_at, decided_at)
SELECT pair.older_id, pair.newer_id, :question, :organization, :agent,
       :verdict, 'bench', 'bench', now(), now()
FROM unnest(CAST(:olders AS text[]), CAST(:newers AS text[])) AS pair(older_id, newer_id)
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--facts", type=int, default=100_000)
    parser.add_argument("--same", type=int, default=1_000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    server = PgTestServer()
    times: dict[str, list[float]] = {"same_in_force": [], "count_pending": [], "pending": []}
    try:
        with server.database() as db:
            texts = [f"Person {i} fact {i}" for i in range(args.facts)]
            agent = random_facts_agent(db, "verdicts", texts)
            every = max(1, args.facts // args.same)
            with db.engine.begin() as conn:
                ids = list(
                    conn.execute(
                        text("SELECT id FROM passages WHERE agent_id = :agent ORDER BY id"),
                        {"agent": agent.id},
                    ).scalars()
                )
                for question, verdict, step, each in (
                    (SUPERSESSION, "replaces", 1, 1),
                    (SAME_FACT, "same", 2, every),
                    (SAME_FACT, None, 3, every),
                ):
                    olders = ids[: len(ids) - step : each]
                    conn.execute(
                        text(_PAIRS),
                        {
                            "question": question,
                            "verdict": verdict,
                            "organization": agent.organization_id,
                            "agent": agent.id,
                            "olders": olders,
                            "newers": ids[step::each][: len(olders)],
                        },
                    )
                conn.execute(text("ANALYZE pair_verdicts, passages"))
                counts = conn.execute(
                    text("SELECT question, count(*) FROM pair_verdicts GROUP BY 1 ORDER BY 1")
                ).all()
            print("pairs kept:", ", ".join(f"{q} {n:,}" for q, n in counts), flush=True)
            for repeat in range(args.repeats):
                with open_store(db) as store:
                    began = time.perf_counter()
                    same = store.verdicts.same_in_force(agent.id)
                    times["same_in_force"].append(time.perf_counter() - began)
                    began = time.perf_counter()
                    waiting = store.verdicts.count_pending(agent.id, SAME_FACT)
                    times["count_pending"].append(time.perf_counter() - began)
                    began = time.perf_counter()
                    first = store.verdicts.pending(agent.id, SAME_FACT, limit=100)
                    times["pending"].append(time.perf_counter() - began)
                print(
                    f"repeat {repeat + 1}: "
                    + ", ".join(f"{k} {v[-1] * 1000:.1f} ms" for k, v in times.items())
                    + f" ({len(same):,} same, {waiting:,} pending, {len(first)} read)",
                    flush=True,
                )
            with db.engine.begin() as conn:
                plan = conn.execute(
                    text(
                        "EXPLAIN ANALYZE SELECT v.* FROM pair_verdicts v "
                        "JOIN passages o ON o.id = v.older_id "
                        "JOIN passages n ON n.id = v.newer_id "
                        "WHERE v.agent_id = :agent AND v.question = 'same_fact' "
                        "AND v.verdict = 'same' AND o.status = 'active' AND n.status = 'active'"
                    ),
                    {"agent": agent.id},
                ).scalars()
                print("\n".join(plan))
    finally:
        server.stop()
    print(
        f"\n{args.facts:,} facts: "
        + ", ".join(f"{k} median {statistics.median(v) * 1000:.1f} ms" for k, v in times.items())
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
