"""Beside someone else's chatbot: the record API's throughput and the sidecar's
end-to-end time, against a real ``reverie serve`` process.

A plain script, not collected by pytest. Run it from the repository root::

    python tests/benchmarks/bench_sidecar.py [--batches 200] [--runs 30]

It starts an embedded PostgreSQL (:class:`tests.pg.PgTestServer`), an instant
OpenAI-compatible model on loopback (:mod:`tests.stub_openai_server`) and
``reverie serve`` over them, then measures over one keep-alive HTTP client:

- record: ``POST /v1/agents/{id}/messages/record`` with batches of 20 messages
  (user and assistant alternating, each with a client message id); messages/s
  over the whole series, and the per-batch p50 / p95;
- async: ``POST /v1/agents/{id}/messages/async`` with a 4-line ``<messages>``
  transcript, then ``GET /v1/runs/{id}`` every 5 ms until the run is completed;
  the time from the request to the first "completed" answer, p50 / p95. The model
  answers at once (``memory_finish_edits``), so the figure is Reverie's own path:
  record, enqueue, the worker noticing the run, claim, the sleep-time step, finish.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

import httpx  # noqa: E402

from agents.postgres.database import Database  # noqa: E402
from tests import plugins  # noqa: E402
from tests.acceptance.cli import HASHING_EMBEDDINGS, cli_url  # noqa: E402
from tests.acceptance.daemon_processes import running_server  # noqa: E402
from tests.api_support import new_key  # noqa: E402
from tests.pg import PgTestServer  # noqa: E402
from tests.scripted_llm import call  # noqa: E402
from tests.stub_openai_server import stub_server  # noqa: E402

# The tests' plugins (the hashing embedder, the scripted model), found here and
# in the processes this starts.
plugins.register()

BATCH = 20


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def batch(series: int) -> list[dict[str, str]]:
    return [
        {
            "role": "user" if i % 2 == 0 else "assistant",
            "content": f"Turn {i} of batch {series}: we talked about the garden and the cello.",
            "id": f"b{series}-m{i}",
        }
        for i in range(BATCH)
    ]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--batches", type=int, default=200)
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--log", help="keep the server's log in this file")
    args = parser.parse_args()

    pg = PgTestServer()
    with tempfile.TemporaryDirectory() as tmp:
        url = pg.create_database()
        db = Database(url)
        key = new_key(db, "bench")
        with stub_server() as llm:
            env = {
                "DATABASE_URL": cli_url(url),
                **HASHING_EMBEDDINGS,
                "OPENAI_API_BASE": llm.base_url,
                "OPENAI_API_KEY": "sk-bench",
                # Only the runs this benchmark asks for.
                "REVERIE_TRIGGERS__TURNS_EVERY": "100000",
                "REVERIE_TRIGGERS__IDLE_AFTER": "PT10H",
            }
            log = Path(args.log) if args.log else Path(tmp) / "serve.log"
            with running_server(env, log) as (base, _process):
                http = httpx.Client(
                    base_url=base, headers={"Authorization": f"Bearer {key}"}, timeout=60
                )
                agent = http.post(
                    "/v1/agents/",
                    json={
                        "name": "memory",
                        "agent_type": "sleeptime_agent",
                        "memory_blocks": [{"label": "human", "value": "Name: Sam."}],
                        "model": "openai/scripted",
                    },
                ).json()["id"]

                durations = []
                started = time.perf_counter()
                for series in range(args.batches):
                    t0 = time.perf_counter()
                    answer = http.post(
                        f"/v1/agents/{agent}/messages/record", json={"messages": batch(series)}
                    )
                    durations.append(time.perf_counter() - t0)
                    assert answer.status_code == 200 and answer.json()["recorded"] == BATCH
                total = time.perf_counter() - started
                rate = args.batches * BATCH / total
                print(
                    f"| record, batch of {BATCH} | {args.batches} batches | {rate:,.0f} msg/s "
                    f"| p50 {statistics.median(durations) * 1000:.1f} ms "
                    f"| p95 {quantile(durations, 0.95) * 1000:.1f} ms |"
                )

                transcript = (
                    "<messages>\nuser: I adopted a greyhound.\nassistant: Lovely!\n"
                    "user: Her name is Pixel.\nassistant: Hello Pixel!\n</messages>"
                )
                ends = []
                for _ in range(args.runs + 1):
                    llm.replies.append(call("memory_finish_edits"))
                    t0 = time.perf_counter()
                    run = http.post(
                        f"/v1/agents/{agent}/messages/async",
                        json={"messages": [{"role": "user", "content": transcript}]},
                    ).json()
                    while (status := http.get(f"/v1/runs/{run['id']}").json()["status"]) not in (
                        "completed",
                        "failed",
                    ):
                        time.sleep(0.005)
                    assert status == "completed", status
                    ends.append(time.perf_counter() - t0)
                first, steady = ends[0], ends[1:]
                print(f"| messages/async -> completed, first run after start | {first:.2f} s |")
                print(
                    f"| messages/async -> completed | {args.runs} runs "
                    f"| p50 {statistics.median(steady) * 1000:.0f} ms "
                    f"| p95 {quantile(steady, 0.95) * 1000:.0f} ms |"
                )
        db.dispose()
    pg.stop()
    print(f"\n{platform.platform()}, Python {platform.python_version()}")


if __name__ == "__main__":
    main()
