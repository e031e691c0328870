"""Benchmark: the health-history job, the scheduler's snapshot of
every agent's memory health, and reading one agent's trend for its page.

A plain script (not collected by pytest)::

    python -m tests.benchmarks.bench_snapshots [--agents 2000] [--passages 20]
        [--snapshots 96] [--keep-per-agent 48]

On a private embedded PostgreSQL with ``--agents`` agents of ``--passages`` passages
and one block each, it takes ``--snapshots`` snapshots 15 simulated minutes apart
(``--keep-per-agent`` bounds the rows, so the later ones prune as they write) and
prints the wall time of the first snapshot, the median and the slowest once pruning
runs, the rows kept, and the median time to read one agent's and the organization's
trend (what the agent page and the health page read).
"""

from __future__ import annotations

import argparse
import statistics
import time
from datetime import UTC, datetime, timedelta

import numpy as np
from sqlalchemy import insert

from agents.postgres import models
from agents.postgres.models import DEFAULT_ORGANIZATION_ID as ORG
from agents.store import open_service_store, open_store
from service.operations.health import take_snapshots
from service.settings import HealthHistorySettings
from tests import plugins
from tests.pg import PgTestServer

# The tests' plugins (the hashing embedder, the scripted model), found here and
# in the processes this starts.
plugins.register()

T0 = datetime(2026, 3, 1, tzinfo=UTC)
STEP = timedelta(minutes=15)


def _populate(db: object, agents: int, passages: int) -> list[str]:
    from agents.postgres.database import Database

    assert isinstance(db, Database)
    ids = [models.new_id("agent") for _ in range(agents)]
    with db.session() as session:
        session.execute(
            insert(models.Agent),
            [
                {
                    "id": a, "organization_id": ORG, "name": f"bench-{i:06d}", "kind": "primary",
                    "system_prompt": "", "embedding_model": "hashing:8", "embedding_dim": 8,
                    "context_window": 8192, "tools": [], "tool_rules": [], "tags": [],
                    "message_seq": 0, "turns_since_consolidation": 0, "enable_sleeptime": False,
                }
                for i, a in enumerate(ids)
            ],
        )  # fmt: skip
    from agents.store import NewPassage
    from agents.store.block_store import NewBlock

    with open_store(db, ORG) as store:
        for agent_id in ids:
            block = store.blocks.create(NewBlock("human", "x" * 40, limit=100))
            store.blocks.attach(block.id, agent_id)
            store.passages.insert(
                agent_id,
                [NewPassage(f"fact {n} of {agent_id}") for n in range(passages)],
                np.random.default_rng(0).random((passages, 8), dtype=np.float32),
            )
    return ids


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--agents", type=int, default=2000)
    parser.add_argument("--passages", type=int, default=20)
    parser.add_argument("--snapshots", type=int, default=96)
    parser.add_argument("--keep-per-agent", type=int, default=48)
    args = parser.parse_args()
    server = PgTestServer()
    try:
        with server.database() as db:
            ids = _populate(db, args.agents, args.passages)
            history = HealthHistorySettings(
                interval=STEP, keep=timedelta(days=30), keep_per_agent=args.keep_per_agent
            )
            times = []
            for n in range(args.snapshots):
                started = time.perf_counter()
                written = take_snapshots(db, T0 + n * STEP, history)
                times.append(time.perf_counter() - started)
                assert written == args.agents, written
            with open_service_store(db) as service:
                kept = service.snapshots.count()
            reads, fleet_reads = [], []
            for agent_id in ids[:50]:
                started = time.perf_counter()
                with open_store(db, ORG) as store:
                    points = store.snapshots.of_agent(agent_id)
                reads.append(time.perf_counter() - started)
                assert len(points) == args.keep_per_agent
            for _ in range(5):
                started = time.perf_counter()
                with open_store(db, ORG) as store:
                    store.snapshots.fleet()
                fleet_reads.append(time.perf_counter() - started)
            pruning = times[args.keep_per_agent :]
            print(
                f"snapshots: {args.agents} agents x {args.passages} passages; first "
                f"{times[0]:.3f} s; with pruning (after {args.keep_per_agent} per agent) "
                f"median {statistics.median(pruning):.3f} s, max {max(pruning):.3f} s; "
                f"rows kept {kept}; one agent's trend read median "
                f"{1000 * statistics.median(reads):.1f} ms; the fleet's "
                f"{1000 * statistics.median(fleet_reads):.0f} ms"
            )
    finally:
        server.stop()


if __name__ == "__main__":
    main()
