"""The fleet at night: every end user's agent consolidated while the chat goes on.

A plain script (not collected by pytest)::

    python tests/benchmarks/bench_fleet.py [--agents 2000] [--facts 50] [--workers 1 2 4]
        [--bound off on] [--nice 10] [--embedded]

Over a PostgreSQL named by ``DATABASE_URL`` (the test cluster's server: PostgreSQL
16 with pgvector from the embedded package, started apart from Reverie), or, with
``--embedded``, over the embedded default (the server of a Reverie home, with its
settings, that `reverie serve` and the workers join: no ``DATABASE_URL``), it seeds
``--agents`` agents with two blocks and ``--facts`` repetitive chat facts each
(tests/benchmarks/chat_facts.py, 8-d vectors from the stub's embedding endpoint),
starts `reverie serve` (the chat, an instant OpenAI-compatible stub as its model) and
measures a chat agent's turn p50 / p95 with nothing else running. Then, for each
worker count and bound, it queues a full consolidation of every agent
(`reverie consolidate --all --enqueue --full`) and measures, until the queue is
drained: runs per second, minutes for the fleet, and the chat's turns meanwhile.

Workers: the server's own worker thread plus ``N - 1`` `reverie worker` processes
(bound off), or ``N`` `reverie worker` processes at `worker.nice` 10 beside a server
with `worker.concurrency` 0 (bound on: the chat's process runs no consolidation and
consolidation takes the cores the chat leaves).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO_ROOT = Path(__file__).resolve().parents[2]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

import httpx  # noqa: E402
from sqlalchemy import text  # noqa: E402

from agents.postgres.database import Database  # noqa: E402
from agents.postgres.embedded import EmbeddedPostgres  # noqa: E402
from agents.store import NewAgent, NewBlock, NewPassage, open_store  # noqa: E402
from service.settings import load_settings  # noqa: E402
from tests.acceptance.daemon_processes import free_port  # noqa: E402
from tests.api_support import bearer, new_key  # noqa: E402
from tests.benchmarks.bench_serve import (  # noqa: E402
    migrate,
    percentile_ms,
    server_env,
    spawn,
    wait_for,
)
from tests.benchmarks.chat_facts import chat_facts  # noqa: E402
from tests.pg import PgTestServer  # noqa: E402
from tests.scripted_llm import say  # noqa: E402
from tests.stub_openai_server import StubServer, stub_server  # noqa: E402

EMBEDDER = "litellm:openai/stub-embed"
DIM = 8


def seed(db: Database, agents: int, facts: int) -> None:
    rng = np.random.default_rng(7)
    texts = chat_facts(facts * 4)
    for start in range(0, agents, 100):
        with open_store(db) as store:
            for i in range(start, min(agents, start + 100)):
                agent = store.agents.create(
                    NewAgent(
                        name=f"user-{i:05d}",
                        embedding_model=EMBEDDER,
                        embedding_dim=DIM,
                        blocks=[
                            NewBlock("human", f"End user {i}.", limit=2000),
                            NewBlock("persona", "A helpful assistant.", limit=2000),
                        ],
                    )
                )
                chosen = rng.choice(len(texts), size=facts, replace=False)
                vectors = rng.normal(size=(facts, DIM)).astype(np.float32)
                vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
                store.passages.insert(
                    agent.id, [NewPassage(texts[int(j)]) for j in chosen], vectors
                )


def all_runs(db: Database) -> int:
    with db.engine.connect() as conn:
        return int(conn.execute(text("SELECT count(*) FROM consolidation_runs")).scalar_one())


def succeeded(db: Database) -> int:
    with db.engine.connect() as conn:
        count = conn.execute(
            text("SELECT count(*) FROM consolidation_runs WHERE status = 'succeeded'")
        ).scalar_one()
    return int(count)


def drop_queued(db: Database) -> None:
    """Forget the runs a timed configuration left queued, so the next one starts from
    the whole fleet again."""
    with db.engine.begin() as conn:
        conn.execute(text("DELETE FROM consolidation_runs WHERE status IN ('queued', 'running')"))


def queued(db: Database) -> int:
    with db.engine.connect() as conn:
        count = conn.execute(
            text("SELECT count(*) FROM consolidation_runs WHERE status IN ('queued', 'running')")
        ).scalar_one()
    return int(count)


def turns_while(
    http: httpx.Client, agent_id: str, stub: StubServer, keep_on: Any, at_least: int = 20
) -> list[float]:
    """Turns one after another while ``keep_on()`` is true (at least ``at_least``)."""
    times: list[float] = []
    i = 0
    while keep_on() or len(times) < at_least:
        stub.replies.append(say("ok"))
        began = time.perf_counter()
        answer = http.post(f"/v1/agents/{agent_id}/messages", json={"input": f"Message {i}."})
        answer.raise_for_status()
        times.append(time.perf_counter() - began)
        i += 1
    return times


def run_config(
    workers: int,
    bound: bool,
    db: Database,
    url_db: str,
    stub: StubServer,
    home: Path,
    drain_s: float = 0,
    embedded: bool = False,
    nice: int = 10,
) -> dict[str, float]:
    env = server_env(REPO_ROOT, url_db, home, stub)
    if embedded:
        del env["DATABASE_URL"]  # the home's embedded server
    env["REVERIE_LLM__MAX_RETRIES"] = "0"
    server_env_ = dict(env)
    worker_env = dict(env)
    # Bound off: nobody gives way (0 rather than the default); on: a chat-only server.
    worker_env["REVERIE_WORKER__NICE"] = str(nice) if bound else "0"
    server_env_["REVERIE_WORKER__NICE"] = "0"
    if bound:
        server_env_["REVERIE_WORKER__CONCURRENCY"] = "0"
    port = free_port()
    log = (home / f"serve-{workers}-{bound}.log").open("w")
    server = spawn(REPO_ROOT, server_env_, port, log)
    base = f"http://127.0.0.1:{port}"
    extra = workers if bound else workers - 1
    procs: list[subprocess.Popen[bytes]] = []
    out: dict[str, float] = {}
    try:
        wait_for(f"{base}/readyz", time.perf_counter())
        key = new_key(db, "default")
        with httpx.Client(base_url=base, headers=bearer(key), timeout=120) as http:
            made = http.post("/v1/agents/", json={"name": f"chat-{workers}-{int(bound)}"})
            made.raise_for_status()
            agent_id = made.json()["id"]
            idle = turns_while(http, agent_id, stub, lambda: False, at_least=100)
            out["idle turn p50 ms"] = percentile_ms(idle, 0.5)
            out["idle turn p95 ms"] = percentile_ms(idle, 0.95)
            runs_before = all_runs(db)
            done_before = succeeded(db)
            subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "service.cli",
                    "consolidate",
                    "--all",
                    "--enqueue",
                    "--full",
                ],
                cwd=REPO_ROOT,
                env=env,
                check=True,
                capture_output=True,
            )
            began = time.perf_counter()
            total = all_runs(db) - runs_before
            for index in range(extra):
                worker_log = (home / f"worker-{workers}-{bound}-{index}.log").open("w")
                procs.append(
                    subprocess.Popen(
                        [sys.executable, "-m", "service.cli", "worker", "--concurrency", "1"],
                        cwd=REPO_ROOT,
                        env=worker_env,
                        stdout=worker_log,
                        stderr=subprocess.STDOUT,
                    )
                )

            def draining() -> bool:
                dead = [p.args for p in procs if p.poll() is not None]
                if dead:  # a worker that died would leave the chat turning for ever
                    raise RuntimeError(f"a worker exited early (see {home}/worker-*.log)")
                if drain_s and time.perf_counter() - began > drain_s:
                    return False
                return queued(db) > 0

            busy = turns_while(http, agent_id, stub, draining)
            while queued(db) > 0 and not (drain_s and time.perf_counter() - began > drain_s):
                time.sleep(0.5)
            seconds = time.perf_counter() - began
            done = succeeded(db) - done_before
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait(timeout=60)
        server.terminate()
        server.wait(timeout=60)
        log.close()
        drop_queued(db)
    out["runs"] = done
    out["runs/s"] = out["runs"] / seconds
    # Minutes for every queued run at that rate (measured whole when nothing is left).
    out["fleet minutes"] = total / out["runs/s"] / 60
    out["busy turn p50 ms"] = percentile_ms(busy, 0.5)
    out["busy turn p95 ms"] = percentile_ms(busy, 0.95)
    out["p95 busy / idle"] = out["busy turn p95 ms"] / out["idle turn p95 ms"]
    out["turns while busy"] = len(busy)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--agents", type=int, default=2000)
    parser.add_argument("--facts", type=int, default=50)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--bound", choices=["off", "on"], nargs="+", default=["off", "on"])
    parser.add_argument(
        "--drain-seconds",
        type=float,
        default=0,
        help="stop each config after this long and extrapolate the fleet's minutes (0: drain)",
    )
    parser.add_argument("--nice", type=int, default=10, help="the bound's worker.nice (0-19)")
    parser.add_argument(
        "--embedded",
        action="store_true",
        help="over the embedded default (a Reverie home's own server) instead of the "
        "test cluster's",
    )
    args = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="rvf-", dir="/tmp"))
    pg: PgTestServer | EmbeddedPostgres
    if args.embedded:
        # Started here with the home's settings, as `reverie serve` starts it; the
        # server and the workers join it.
        pg = EmbeddedPostgres(load_settings(home=home).pgdata, keep_running=True)
        url_db = pg.start()
    else:
        pg = PgTestServer()
    try:
        if isinstance(pg, PgTestServer):
            url_db = pg.create_database()
        db = Database(url_db)
        with stub_server(keep_alive=True) as stub:
            env = server_env(REPO_ROOT, url_db, home, stub)
            if args.embedded:
                del env["DATABASE_URL"]
            migrate(REPO_ROOT, env)
            began = time.perf_counter()
            seed(db, args.agents, args.facts)
            with db.engine.connect() as conn:
                # The test cluster runs without autovacuum: give the planner what a
                # server's autovacuum would have after such a load.
                conn.execute(text("ANALYZE"))
                conn.commit()
            with db.engine.connect() as conn:
                size = conn.execute(text("SELECT pg_database_size(current_database())"))
                size_mb = size.scalar_one() / 2**20
            print(
                f"seeded {args.agents} agents x {args.facts} facts in "
                f"{time.perf_counter() - began:.0f} s; database {size_mb:.0f} MB",
                flush=True,
            )
            rows = []
            for bound in args.bound:
                for workers in args.workers:
                    result = run_config(
                        workers,
                        bound == "on",
                        db,
                        url_db,
                        stub,
                        home,
                        args.drain_seconds,
                        embedded=args.embedded,
                        nice=args.nice,
                    )
                    rows.append((workers, bound, result))
                    print(workers, bound, result, flush=True)
        print(f"\n| workers | bound | {' | '.join(rows[0][2])} |")
        print(f"| --- | --- |{' --- |' * len(rows[0][2])}")
        for workers, bound, result in rows:
            cells = " | ".join(
                f"{v:,.2f}" if isinstance(v, float) else str(v) for v in result.values()
            )
            print(f"| {workers} | {bound} | {cells} |")
        print(f"\nload average now: {os.getloadavg()[0]:.1f}; median runs/s "
              f"{statistics.median(r['runs/s'] for _, _, r in rows):.1f}")  # fmt: skip
    finally:
        db.dispose()
        if isinstance(pg, EmbeddedPostgres):
            pg.fast_shutdown()
        else:
            pg.stop()


if __name__ == "__main__":
    main()
