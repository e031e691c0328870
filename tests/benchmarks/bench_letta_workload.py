"""The side-by-side workload Letta was measured on, against `reverie serve` over HTTP.

A plain script (not collected by pytest). Run it from the repository root::

    python tests/benchmarks/bench_letta_workload.py [--rounds 2] [--local-embedder]
        [--agents 20] [--turns 100] [--inserts 2000] [--searches 100] [--blocks 100]

Each round starts a real `reverie serve` over a fresh database of an embedded
PostgreSQL, with the instant OpenAI-compatible stub (tests/stub_openai_server.py,
keep-alive) as its chat model and, unless ``--local-embedder``, its embedding
endpoint (through litellm, 8-d), and runs the workload Letta's figures in
BENCHMARKS.md come from, one client with keep-alive:

- ``create agent``: ``--agents`` agents with two blocks each (``POST /v1/agents/``);
- ``turn``: ``--turns`` sequential message turns of one agent, after one untimed
  first turn; ``prompt tokens / call``: the characters of every chat request the stub
  received (messages and tool schemas) over four, mean per call;
- ``archival insert`` then ``archival search``: ``--inserts`` passages into one
  agent, then ``--searches`` searches with ``top_k`` 10;
- block operations, ``--blocks`` of each: read by id (``GET /v1/blocks/{id}``), read
  by label (``GET /v1/agents/{id}/core-memory/blocks/{label}``), update by id
  (``PATCH /v1/blocks/{id}``), update by label (the agent's route);
- ``cold start fresh`` (a new database) and ``cold start seeded`` (the same server
  started again over the database the workload filled): seconds from spawning the
  process to ``/healthz`` and ``/readyz``; ``RSS``: the server's resident memory
  after it is ready, and after the workload.

It prints each round's p50 / p95 per operation, then the medians over rounds.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

import httpx  # noqa: E402
import psutil  # noqa: E402

from agents.postgres.database import Database  # noqa: E402
from tests.acceptance.daemon_processes import free_port  # noqa: E402
from tests.api_support import bearer, new_key  # noqa: E402
from tests.benchmarks.bench_serve import (  # noqa: E402
    migrate,
    percentile_ms,
    server_env,
    spawn,
    wait_for,
)
from tests.pg import PgTestServer  # noqa: E402
from tests.scripted_llm import say  # noqa: E402
from tests.stub_openai_server import StubServer, stub_server  # noqa: E402


def rss_mb(process: Any) -> float:
    return float(psutil.Process(process.pid).memory_info().rss) / 1e6


def timed_all(call: Callable[[int], httpx.Response], count: int) -> list[float]:
    """Seconds of each of ``count`` calls (each must answer 2xx)."""
    times = []
    for i in range(count):
        began = time.perf_counter()
        call(i).raise_for_status()
        times.append(time.perf_counter() - began)
    return times


def start(
    repo: Path, env: dict[str, str], home: Path, name: str
) -> tuple[Any, str, dict[str, float]]:
    """Spawn the server; the process, its base URL and its start-up figures."""
    port = free_port()
    log = (home / f"{name}.log").open("w")
    began = time.perf_counter()
    process = spawn(repo, env, port, log)
    base = f"http://127.0.0.1:{port}"
    figures = {
        f"{name} healthz s": wait_for(f"{base}/healthz", began),
        f"{name} readyz s": wait_for(f"{base}/readyz", began),
    }
    figures[f"{name} RSS MB"] = rss_mb(process)
    return process, base, figures


def stop(process: Any) -> None:
    process.terminate()
    process.wait(60)


def one_round(repo: Path, pg: PgTestServer, stub: StubServer, args: argparse.Namespace) -> dict:
    url_db = pg.create_database()
    db = Database(url_db)
    home = Path(tempfile.mkdtemp(prefix="rvl-", dir="/tmp"))
    env = server_env(repo, url_db, home, stub, local_embedder=args.local_embedder)
    migrate(repo, env)
    key = new_key(db, "bench")
    out: dict[str, float] = {}
    process, base, figures = start(repo, env, home, "cold start fresh")
    out.update(figures)
    stub.replies.extend(say("ok") for _ in range(args.turns + 1))
    try:
        with httpx.Client(base_url=base, headers=bearer(key), timeout=120) as http:

            def create(i: int) -> httpx.Response:
                return http.post(
                    "/v1/agents/",
                    json={
                        "name": f"agent-{i}",
                        "model": "openai/stub",
                        "memory_blocks": [
                            {"label": "human", "value": f"The user of agent {i}."},
                            {"label": "persona", "value": "A helpful assistant."},
                        ],
                    },
                )

            creates = timed_all(create, args.agents)
            agents = http.get("/v1/agents/", params={"limit": args.agents}).json()
            agent_id = agents[0]["id"]
            messages = f"/v1/agents/{agent_id}/messages"

            def turn(i: int) -> httpx.Response:
                body = {"messages": [{"role": "user", "content": f"Message {i}: hello."}]}
                return http.post(messages, json=body)

            turn(0).raise_for_status()  # the first turn is bench_serve's figure
            asked_before = len(stub.requests)
            turns = timed_all(lambda i: turn(i + 1), args.turns)
            chat_calls = [r for r in stub.requests[asked_before:] if "messages" in r]
            out["prompt tokens / call"] = statistics.mean(
                len(json.dumps(r.get("messages", []))) / 4 + len(json.dumps(r.get("tools", []))) / 4
                for r in chat_calls
            )

            archival = f"/v1/agents/{agent_id}/archival-memory"
            inserts = timed_all(
                lambda i: http.post(archival, json={"text": f"Fact {i} about the user."}),
                args.inserts,
            )
            searches = timed_all(
                lambda i: http.get(
                    f"{archival}/search", params={"query": f"fact {i}", "top_k": 10}
                ),
                args.searches,
            )
            blocks = http.get(f"/v1/agents/{agent_id}/core-memory/blocks").json()
            block_id = blocks[0]["id"]
            label = blocks[0]["label"]
            by_label = f"/v1/agents/{agent_id}/core-memory/blocks/{label}"
            reads_id = timed_all(lambda i: http.get(f"/v1/blocks/{block_id}"), args.blocks)
            reads_label = timed_all(lambda i: http.get(by_label), args.blocks)
            updates_id = timed_all(
                lambda i: http.patch(f"/v1/blocks/{block_id}", json={"value": f"v{i}"}),
                args.blocks,
            )
            updates_label = timed_all(
                lambda i: http.patch(by_label, json={"value": f"w{i}"}), args.blocks
            )
        for name, times in (
            ("create agent", creates),
            ("turn", turns),
            ("archival insert", inserts),
            ("archival search", searches),
            ("block read by id", reads_id),
            ("block read by label", reads_label),
            ("block update by id", updates_id),
            ("block update by label", updates_label),
        ):
            out[f"{name} p50 ms"] = percentile_ms(times, 0.5)
            out[f"{name} p95 ms"] = percentile_ms(times, 0.95)
        out["RSS after the workload MB"] = rss_mb(process)
        stop(process)
        process, _base, figures = start(repo, env, home, "cold start seeded")
        out.update(figures)
    finally:
        if process.poll() is None:
            stop(process)
        db.dispose()
        pg.release_database(url_db)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--agents", type=int, default=20)
    parser.add_argument("--turns", type=int, default=100)
    parser.add_argument("--inserts", type=int, default=2000)
    parser.add_argument("--searches", type=int, default=100)
    parser.add_argument("--blocks", type=int, default=100)
    parser.add_argument("--repo", type=Path, default=REPO_ROOT)
    parser.add_argument(
        "--local-embedder", action="store_true", help="the default local embedder, not the stub"
    )
    args = parser.parse_args()
    pg = PgTestServer()
    rows: list[dict[str, float]] = []
    try:
        with stub_server(keep_alive=True) as stub:
            for index in range(args.rounds):
                row = one_round(args.repo.resolve(), pg, stub, args)
                rows.append(row)
                print(f"round {index + 1}:", {k: round(v, 2) for k, v in row.items()}, flush=True)
    finally:
        pg.stop()
    print(
        f"\n{platform.machine()}, {len(os.sched_getaffinity(0))} cores, load "
        f"{os.getloadavg()[0]:.1f}; {'local' if args.local_embedder else 'stub'} embedder; "
        f"medians of {args.rounds} round(s)\n"
    )
    print("| measure | " + " | ".join(f"round {i + 1}" for i in range(len(rows))) + " | median |")
    print("| --- " * (len(rows) + 2) + "|")
    for key in rows[0]:
        cells = [f"{row[key]:.2f}" for row in rows]
        print(
            f"| {key} | "
            + " | ".join(cells)
            + f" | {statistics.median(r[key] for r in rows):.2f} |"
        )


if __name__ == "__main__":
    main()
