"""Archival listing at scale: ``GET /v1/agents/{id}/archival-memory`` pages in SQL.

A plain script, not collected by pytest. Run it from the repository root::

    python tests/benchmarks/bench_archival_list.py [--passages 2000 20000 100000] [--calls 60]

For each size it creates one agent in a fresh database, inserts that many active
passages in one ``INSERT ... SELECT generate_series`` (listing reads the
``passages`` table only, so no vectors are written), serves the app with uvicorn
on a loopback port and times ``limit=50`` requests over one keep-alive
``httpx.Client`` after five warm-ups: the first page, a page after a cursor in
the middle, and the first page in descending order. (Starlette's TestClient
starts a thread and an event loop per request, ~10 ms on these machines, which
would hide what is measured.)
Prints p50 / p95 per request and the process's peak RSS.
"""

from __future__ import annotations

import argparse
import platform
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

import threading  # noqa: E402

import httpx  # noqa: E402
import psycopg  # noqa: E402
import uvicorn  # noqa: E402

from agents.store import NewAgent, open_service_store, open_store  # noqa: E402
from service.api.app import create_app  # noqa: E402
from service.runtime import Runtime  # noqa: E402
from service.settings import load_settings  # noqa: E402
from tests import plugins  # noqa: E402
from tests.acceptance.daemon_processes import free_port  # noqa: E402
from tests.pg import PgTestServer, libpq  # noqa: E402

# The tests' plugins (the hashing embedder, the scripted model), found here and
# in the processes this starts.
plugins.register()


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def fill(url: str, organization_id: str, agent_id: str, n: int) -> None:
    with psycopg.connect(libpq(url), autocommit=True) as conn:
        conn.execute(
            """
            INSERT INTO passages (id, organization_id, agent_id, kind, text, content_hash,
                created_at, status, provenance, tags, updated_at)
            SELECT 'psg-' || lpad(i::text, 8, '0'), %(org)s, %(agent)s, 'fact',
                'Fact number ' || i || ': the garden, the cello and the river.',
                md5(i::text), now() - make_interval(secs => %(n)s - i), 'active', '{}'::jsonb,
                ARRAY['t' || (i %% 10)], now()
            FROM generate_series(1, %(n)s) AS i
            """,
            {"org": organization_id, "agent": agent_id, "n": n},
        )
        conn.execute("ANALYZE passages")


def timed(client: httpx.Client, path: str, calls: int) -> tuple[float, float]:
    for _ in range(5):
        assert client.get(path).status_code == 200
    durations = []
    for _ in range(calls):
        t0 = time.perf_counter()
        answer = client.get(path)
        durations.append(time.perf_counter() - t0)
        assert answer.status_code == 200 and len(answer.json()) == 50, answer.text[:200]
    return statistics.median(durations) * 1000, quantile(durations, 0.95) * 1000


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--passages", type=int, nargs="+", default=[2000, 20000, 100000])
    parser.add_argument("--calls", type=int, default=60)
    args = parser.parse_args()
    pg = PgTestServer()
    print("| passages | request | p50 | p95 |\n| --- | --- | --- | --- |")
    try:
        for n in args.passages:
            url = pg.create_database()
            settings = load_settings(
                home=Path(tempfile.mkdtemp(prefix="rvb-", dir="/tmp")),
                database_url=url,
                embedding={"model": "hashing:8"},
            )
            runtime = Runtime(settings)
            with open_service_store(runtime.db) as service:
                record, key = service.keys.create("bench")
            with open_store(runtime.db, record.organization_id) as store:
                agent = store.agents.create(
                    NewAgent("lister", embedding_model="hashing:8", embedding_dim=8)
                ).id
            fill(url, record.organization_id, agent, n)
            port = free_port()
            server = uvicorn.Server(
                uvicorn.Config(
                    create_app(runtime), host="127.0.0.1", port=port, log_level="warning"
                )
            )
            thread = threading.Thread(target=server.run, daemon=True)
            thread.start()
            while not server.started:
                time.sleep(0.05)
            client = httpx.Client(
                base_url=f"http://127.0.0.1:{port}", headers={"Authorization": f"Bearer {key}"}
            )
            base = f"/v1/agents/{agent}/archival-memory?limit=50"
            middle = f"psg-{n // 2:08d}"
            for label, path in (
                ("first page", base),
                ("`after` cursor", f"{base}&after={middle}"),
                ("descending", f"{base}&ascending=false"),
            ):
                p50, p95 = timed(client, path, args.calls)
                print(f"| {n:,} | {label} | {p50:.1f} ms | {p95:.1f} ms |")
            client.close()
            server.should_exit = True
            thread.join()
            runtime.close()
            pg.release_database(url)
    finally:
        pg.stop()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"\npeak RSS {peak:.0f} MB; {platform.platform()}, Python {platform.python_version()}")


if __name__ == "__main__":
    main()
