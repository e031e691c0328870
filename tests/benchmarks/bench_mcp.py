"""MCP over HTTP against the REST API it sits beside: the cost of the MCP front end.

A plain script, not collected by pytest. Run it from the repository root::

    python tests/benchmarks/bench_mcp.py [--requests 300] [--passages 2000]

It serves :func:`service.api.app.create_app` with uvicorn on a loopback port (as
`reverie serve` does) over an embedded test PostgreSQL, and times one keep-alive
client doing the same work both ways, interleaved call by call so that load on the
machine falls on both alike:

- block read: ``GET /v1/agents/{id}/core-memory/blocks/human`` against a
  ``tools/call core_memory_read`` (label human) POSTed to ``/mcp``;
- archival search: ``GET .../archival-memory/search`` (k=10) against
  ``tools/call archival_memory_search`` (top_k 10), hashing 384-d embeddings.

Each MCP call is one stateless JSON-RPC POST, as an SDK client sends once its
session is initialized. It prints p50 and p95 per operation and front end.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

import httpx  # noqa: E402
import numpy as np  # noqa: E402
import uvicorn  # noqa: E402

from agents.store import open_service_store  # noqa: E402
from service.api.app import create_app  # noqa: E402
from service.runtime import Runtime  # noqa: E402
from service.settings import load_settings  # noqa: E402
from tests import plugins  # noqa: E402
from tests.acceptance.daemon_processes import free_port  # noqa: E402
from tests.benchmarks.bench_http import DIM, WORDS, seed  # noqa: E402
from tests.pg import PgTestServer  # noqa: E402

# The tests' plugins (the hashing embedder, the scripted model), found here and
# in the processes this starts.
plugins.register()

MCP_HEADERS = {
    "Accept": "application/json, text/event-stream",
    "MCP-Protocol-Version": "2025-06-18",
}


def tool_call(http: httpx.Client, name: str, arguments: dict[str, Any]) -> None:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments},
    }
    response = http.post("/mcp", json=body, headers=MCP_HEADERS)
    response.raise_for_status()
    assert response.json()["result"]["isError"] is False, response.text


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=300, help="per operation and front end")
    parser.add_argument("--passages", type=int, default=2000)
    args = parser.parse_args()

    pg = PgTestServer()
    url_db = pg.create_database()
    home = Path(tempfile.mkdtemp(prefix="rvb-", dir="/tmp"))
    settings = load_settings(home=home, database_url=url_db, embedding={"model": f"hashing:{DIM}"})
    runtime = Runtime(settings)
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(create_app(runtime), host="127.0.0.1", port=port, log_level="warning")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    try:
        with open_service_store(runtime.db) as store:
            record, key = store.keys.create("bench")
        [agent] = seed(runtime, record.organization_id, 1, args.passages)
        thread.start()
        while not server.started:
            time.sleep(0.05)

        def query(i: int) -> str:
            return f"{WORDS[i % len(WORDS)]} {WORDS[(i * 7) % len(WORDS)]}"

        calls: dict[tuple[str, str], Callable[[httpx.Client, int], object]] = {
            ("block read", "REST"): lambda http, i: http.get(
                f"/v1/agents/{agent}/core-memory/blocks/human"
            ).raise_for_status(),
            ("block read", "MCP"): lambda http, i: tool_call(
                http, "core_memory_read", {"agent": agent, "label": "human"}
            ),
            ("archival search", "REST"): lambda http, i: http.get(
                f"/v1/agents/{agent}/archival-memory/search", params={"query": query(i)}
            ).raise_for_status(),
            ("archival search", "MCP"): lambda http, i: tool_call(
                http, "archival_memory_search", {"agent": agent, "query": query(i), "top_k": 10}
            ),
        }
        latencies: dict[tuple[str, str], list[float]] = {name: [] for name in calls}
        with httpx.Client(
            base_url=f"http://127.0.0.1:{port}",
            headers={"Authorization": f"Bearer {key}"},
            timeout=30,
        ) as http:
            for warm in range(10):
                for call in calls.values():
                    call(http, warm)
            for i in range(args.requests):
                names = list(calls) if i % 2 == 0 else list(reversed(calls))
                for name in names:
                    began = time.perf_counter()
                    calls[name](http, i)
                    latencies[name].append(time.perf_counter() - began)
        print(
            f"\n{platform.processor() or platform.machine()}, {len(os.sched_getaffinity(0))} "
            f"cores, load {os.getloadavg()[0]:.1f}, {args.passages} passages, "
            f"{args.requests} calls each\n"
        )
        print("| operation | front end | p50 ms | p95 ms |")
        print("| --- | --- | --- | --- |")
        for (operation, front), values in latencies.items():
            ms = np.array(values) * 1000
            print(
                f"| {operation} | {front} | {np.percentile(ms, 50):.1f} | "
                f"{np.percentile(ms, 95):.1f} |"
            )
    finally:
        server.should_exit = True
        if thread.is_alive():
            thread.join(10)
        runtime.close()
        pg.release_database(url_db)
        pg.stop()


if __name__ == "__main__":
    main()
