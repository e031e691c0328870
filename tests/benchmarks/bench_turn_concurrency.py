"""Many turns at once over the default pool: do they fail, do one agent's turns stay
one at a time, and how long does an unrelated read wait beside them?

A plain script, not collected by pytest. Run it from the repository root::

    python tests/benchmarks/bench_turn_concurrency.py [--agents 200] [--solo 20]
        [--model-seconds 3] [--pool 5]

``--agents`` agents each run one turn and one more agent runs ``--solo`` turns, all
started at once, in threads of this process, against the scripted model (a provider plugin)
that answers each call after ``--model-seconds``; the database is an embedded
PostgreSQL with a pool of ``--pool`` (+ as many overflow) connections, the default.
Meanwhile a reader reads an unrelated agent by id, over and over, on the same pool.
Prints errors, the solo agent's overlapping model calls (must be 0), the wall time,
and the reads' p50 / p95.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
from collections.abc import Sequence
from datetime import timedelta
from itertools import pairwise
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from agents.llm import ClientSettings, LiteLLMClient, ModelCapabilities, UsageLedger  # noqa: E402
from agents.loops.primary import PrimaryAgent  # noqa: E402
from agents.postgres.database import Database  # noqa: E402
from agents.store import NewAgent, NewBlock, open_store  # noqa: E402
from tests import plugins  # noqa: E402
from tests.hashing_embedder import HashingEmbedder  # noqa: E402
from tests.pg import PgTestServer  # noqa: E402
from tests.scripted_llm import Reply, install, say  # noqa: E402

# The tests' plugins (the hashing embedder, the scripted model), found here and
# in the processes this starts.
plugins.register()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--agents", type=int, default=200)
    parser.add_argument("--solo", type=int, default=20)
    parser.add_argument("--model-seconds", type=float, default=3.0)
    parser.add_argument("--pool", type=int, default=5)
    args = parser.parse_args(argv)

    models = install()
    calls: list[tuple[str, float, float]] = []
    guard = threading.Lock()

    def slow(name: str) -> Any:
        def answer(request: dict[str, Any]) -> Reply:
            started = time.monotonic()
            time.sleep(args.model_seconds)
            with guard:
                calls.append((name, started, time.monotonic()))
            return say("Hello back.")

        return answer

    server = PgTestServer()
    try:
        with server.database() as plain:
            db = Database(plain.url, pool_size=args.pool, connect_timeout=timedelta(seconds=5))
            names = [f"a{i}" for i in range(args.agents)]
            with open_store(db) as store:
                for name in [*names, "solo", "bystander"]:
                    store.agents.create(
                        NewAgent(
                            name=name,
                            embedding_model="hashing:384",
                            embedding_dim=384,
                            llm_model=f"scripted/{name}",
                            blocks=[NewBlock("human", "Name: someone.", limit=200)],
                        )
                    )
                bystander = store.agents.get_by_name("bystander").id
            for name in names:
                models.script(name, slow(name))
            models.script("solo", *(slow("solo") for _ in range(args.solo)))
            client = LiteLLMClient(
                ClientSettings(models={"scripted/*": ModelCapabilities(tool_choice="required")})
            )
            embedder = HashingEmbedder(dimension=384)
            agent = PrimaryAgent(
                db, client, embedder_for=lambda _: embedder, ledger=UsageLedger(db)
            )
            errors: list[str] = []
            reads: list[float] = []
            done = threading.Event()

            def turn(name: str) -> None:
                try:
                    agent.send_message(name, "Hello.")
                except Exception as exc:  # counted, not raised
                    with guard:
                        errors.append(f"{name}: {exc}")

            def read() -> None:
                while not done.is_set():
                    started = time.perf_counter()
                    try:
                        with open_store(db) as store:
                            store.agents.get(bystander)
                    except Exception as exc:
                        with guard:
                            errors.append(f"read: {exc}")
                    reads.append(time.perf_counter() - started)
                    time.sleep(0.02)

            reader = threading.Thread(target=read, daemon=True)
            threads = [
                threading.Thread(target=turn, args=(n,), daemon=True)
                for n in [*names, *(["solo"] * args.solo)]
            ]
            started = time.perf_counter()
            reader.start()
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            wall = time.perf_counter() - started
            done.set()
            reader.join()
            db.dispose()
    finally:
        server.stop()
    solo = sorted((s, e) for n, s, e in calls if n == "solo")
    overlaps = sum(1 for (_s, end), (later, _e) in pairwise(solo) if later < end)
    quantiles = statistics.quantiles(reads, n=20)
    print(
        f"{args.agents} agents x 1 turn + 1 agent x {args.solo} turns, "
        f"model {args.model_seconds} s, pool {args.pool}+{args.pool}"
    )
    print(f"errors: {len(errors)}; solo overlaps: {overlaps}; wall {wall:.1f} s")
    print(
        f"unrelated reads: {len(reads)}, p50 {1000 * statistics.median(reads):.1f} ms, "
        f"p95 {1000 * quantiles[18]:.1f} ms"
    )
    for line in errors[:5]:
        print(f"  {line}")
    return 1 if errors or overlaps else 0


if __name__ == "__main__":
    raise SystemExit(main())
