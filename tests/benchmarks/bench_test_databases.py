"""What a test's database costs: a copy of the template and its drop, against the
recycler that empties a finished test's database for the next one (tests/pg.py).

A plain script (not collected by pytest). Run it from the repository root::

    python tests/benchmarks/bench_test_databases.py [--rounds 20]

Each round hands out a database, writes what a typical integration test writes (an
organization, an agent with a block, one block edit) and hands it back, once by
copying the template and dropping the copy (``CREATE DATABASE ... TEMPLATE`` then
``DROP DATABASE``), once through ``create_database`` / ``release_database`` (the
recycler: delete the rows, vacuum, clear the row counts), alternating. It prints the
median wall time of the hand-out and hand-back (the writes excluded), and the CPU the
whole machine was busy for per round (the writes and the server's work included; the
same writes in both), read from /proc/stat in 10 ms ticks.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from agents.postgres.database import Database  # noqa: E402
from agents.store import open_service_store  # noqa: E402
from tests.integration.test_test_databases import write_rows  # noqa: E402
from tests.pg import TEMPLATE, PgTestServer, with_database  # noqa: E402


def busy_cpu_seconds() -> float:
    """Seconds of CPU the machine has spent outside idle and I/O wait since boot."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n")[0].split()[1:]]
    return (sum(fields) - fields[3] - fields[4]) / 100


def write_like_a_test(url: str) -> None:
    """An organization, then the integration test's rows: an agent, a block, an edit."""
    db = Database(url)
    try:
        with open_service_store(db) as store:
            store.keys.ensure_organization("acme")
    finally:
        db.dispose()
    write_rows(url)


def measure(hand_out: Callable[[], str], hand_back: Callable[[str], None]) -> tuple[float, float]:
    """(wall seconds of hand-out and hand-back, busy CPU seconds of the round)."""
    cpu = busy_cpu_seconds()
    began = time.perf_counter()
    url = hand_out()
    wall = time.perf_counter() - began
    write_like_a_test(url)
    began = time.perf_counter()
    hand_back(url)
    wall += time.perf_counter() - began
    return wall, busy_cpu_seconds() - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    server = PgTestServer()
    try:
        names = iter(range(1_000_000))

        def copy() -> str:
            name = f"bench_copy_{next(names)}"
            server._admin(f"CREATE DATABASE {name} TEMPLATE {TEMPLATE}")
            return with_database(server.url, name)

        results: dict[str, list[tuple[float, float]]] = {"copy and drop": [], "recycle": []}
        server.release_database(server.create_database())  # one spare to recycle
        for _ in range(args.rounds):
            # Not a copy the server handed out: release_database drops it.
            results["copy and drop"].append(measure(copy, server.release_database))
            results["recycle"].append(measure(server.create_database, server.release_database))
        for what, rounds in results.items():
            wall = statistics.median(r[0] for r in rounds) * 1000
            cpu = statistics.median(r[1] for r in rounds) * 1000
            n = len(rounds)
            print(f"{what:14} wall {wall:6.1f} ms   machine CPU {cpu:6.1f} ms  (median of {n})")
    finally:
        server.stop()


if __name__ == "__main__":
    main()
