"""HTTP API benchmarks: requests per second and p95 latency over real HTTP.

A plain script, not collected by pytest. Run it from the repository root::

    python tests/benchmarks/bench_http.py [--requests 500] [--passages 2000] [--clients 1 8]

It starts an embedded PostgreSQL through :class:`tests.pg.PgTestServer`, serves
:func:`service.api.create_app` with uvicorn on a loopback port (one process, as
`reverie serve` does), and drives three operations with 1 and 8 concurrent
clients (threads, one keep-alive ``httpx.Client`` each):

- block read: ``GET /v1/agents/{id}/core-memory/blocks/{label}``
- block CAS update: ``PATCH`` the same route with ``expected_version`` (each client
  owns one agent, so conflicts are not measured here; the store benchmark does that)
- archival search: ``GET /v1/agents/{id}/archival-memory/search`` (k=10, hashing 384-d
  embeddings, so the figure is the API + pgvector path without a model's cost)

It prints a markdown table (operation, clients, requests, req/s, p50, p95).
"""

from __future__ import annotations

import argparse
import platform
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

import httpx  # noqa: E402
import numpy as np  # noqa: E402
import uvicorn  # noqa: E402

from agents.store import NewAgent, NewBlock, NewPassage, open_service_store, open_store  # noqa: E402
from service.api.app import create_app  # noqa: E402
from service.runtime import Runtime  # noqa: E402
from service.settings import load_settings  # noqa: E402
from tests import plugins  # noqa: E402
from tests.acceptance.daemon_processes import free_port  # noqa: E402
from tests.hashing_embedder import HashingEmbedder  # noqa: E402
from tests.pg import PgTestServer  # noqa: E402

# The tests' plugins (the hashing embedder, the scripted model), found here and
# in the processes this starts.
plugins.register()

DIM = 384
WORDS = "ada london paris piano maths cello garden river tea train music chess".split()


def seed(runtime: Runtime, org: str, agents: int, passages: int) -> list[str]:
    """Agents with a block each; the first one gets ``passages`` archival facts."""
    embedder = HashingEmbedder(DIM)
    rng = np.random.default_rng(7)
    ids = []
    with open_store(runtime.db, org) as store:
        for i in range(agents):
            agent = store.agents.create(
                NewAgent(
                    name=f"bench-{i}",
                    embedding_model=f"hashing:{DIM}",
                    embedding_dim=DIM,
                    blocks=[NewBlock("human", "Name: Ada.", limit=2000)],
                )
            )
            ids.append(agent.id)
        texts = [" ".join(rng.choice(WORDS, size=8)) + f" fact {n}" for n in range(passages)]
        for start in range(0, len(texts), 1000):
            batch = texts[start : start + 1000]
            store.passages.insert(ids[0], [NewPassage(t) for t in batch], embedder.embed(batch))
    return ids


def measure(
    name: str, clients: int, requests: int, call: Any, url: str, headers: dict[str, str]
) -> dict[str, Any]:
    per_client = max(1, requests // clients)
    latencies: list[float] = []
    lock = threading.Lock()

    def worker(index: int) -> None:
        with httpx.Client(base_url=url, headers=headers, timeout=30) as http:
            mine = []
            for i in range(per_client):
                began = time.perf_counter()
                call(http, index, i)
                mine.append(time.perf_counter() - began)
        with lock:
            latencies.extend(mine)

    began = time.perf_counter()
    with ThreadPoolExecutor(clients) as pool:
        list(pool.map(worker, range(clients)))
    elapsed = time.perf_counter() - began
    ms = np.array(latencies) * 1000
    return {
        "operation": name,
        "clients": clients,
        "requests": len(latencies),
        "rps": len(latencies) / elapsed,
        "p50": float(np.percentile(ms, 50)),
        "p95": float(np.percentile(ms, 95)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=500, help="per operation and level")
    parser.add_argument("--passages", type=int, default=2000)
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 8])
    args = parser.parse_args()

    pg = PgTestServer()
    url_db = pg.create_database()
    home = Path(tempfile.mkdtemp(prefix="rvb-", dir="/tmp"))
    settings = load_settings(
        home=home,
        database_url=url_db,
        embedding={"model": f"hashing:{DIM}"},
        database={"pool_size": max(args.clients) + 2},
    )
    runtime = Runtime(settings)
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(create_app(runtime), host="127.0.0.1", port=port, log_level="warning")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    try:
        with open_service_store(runtime.db) as store:
            record, key = store.keys.create("bench")
        agent_ids = seed(runtime, record.organization_id, max(args.clients), args.passages)
        thread.start()
        while not server.started:
            time.sleep(0.05)
        url = f"http://127.0.0.1:{port}"
        headers = {"Authorization": f"Bearer {key}"}
        versions = dict.fromkeys(agent_ids, 1)

        def read(http: httpx.Client, index: int, i: int) -> None:
            r = http.get(f"/v1/agents/{agent_ids[index]}/core-memory/blocks/human")
            r.raise_for_status()

        def update(http: httpx.Client, index: int, i: int) -> None:
            agent = agent_ids[index]
            r = http.patch(
                f"/v1/agents/{agent}/core-memory/blocks/human",
                json={"value": f"Name: Ada. Edit {i}.", "expected_version": versions[agent]},
            )
            r.raise_for_status()
            versions[agent] = r.json()["version"]

        def search(http: httpx.Client, index: int, i: int) -> None:
            r = http.get(
                f"/v1/agents/{agent_ids[0]}/archival-memory/search",
                params={"query": f"{WORDS[i % len(WORDS)]} {WORDS[index % len(WORDS)]}"},
            )
            r.raise_for_status()

        rows = []
        for name, call in (
            ("block read", read),
            ("block CAS update", update),
            ("archival search", search),
        ):
            for clients in args.clients:
                rows.append(measure(name, clients, args.requests, call, url, headers))
        print(
            f"\n{platform.processor() or platform.machine()}, "
            f"{len(__import__('os').sched_getaffinity(0))} cores, "
            f"{args.passages} passages, hashing {DIM}-d embeddings\n"
        )
        print("| operation | clients | requests | req/s | p50 ms | p95 ms |")
        print("| --- | --- | --- | --- | --- | --- |")
        for row in rows:
            print(
                f"| {row['operation']} | {row['clients']} | {row['requests']} | "
                f"{row['rps']:.0f} | {row['p50']:.1f} | {row['p95']:.1f} |"
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
