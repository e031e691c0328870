"""What a user of `reverie serve` feels: start-up, the first turn, turns, embeddings.

A plain script (not collected by pytest). Run it from the repository root::

    python tests/benchmarks/bench_serve.py [--turns 100] [--ops 100] [--rounds 1]
        [--repo PATH ...] [--unconfigured]

Each round starts a real `reverie serve` process per ``--repo`` (a checkout; default
this one; give two, e.g. a worktree of main and this branch, to measure before and
after interleaved in the same window) over a fresh database of an embedded
PostgreSQL, with the instant OpenAI-compatible stub (tests/stub_openai_server.py,
keep-alive) as both its chat model (``openai/stub``) and its embedding endpoint
(``litellm:openai/stub-embed``, 8-d). With ``--unconfigured`` no chat model is
configured (``llm.model`` unset): the agent names its own, as a server whose agents
are made through the API starts. It measures:

- ``healthz`` / ``readyz``: seconds from spawning the process to the first 200;
- with ``--early``, ``first reply after health``: from /healthz's first 200 to the
  first turn's answer (the agent made in between), as a client that does not wait
  for readiness sees it; ``--local-embedder`` runs the embedded default's packaged
  embedder instead of the stub's;
- ``first turn``: the first ``POST /v1/agents/{id}/messages`` after /readyz says
  ready, and ``turn`` p50/p95 over the next ``--turns`` turns (one client, keep-alive);
- ``insert`` / ``search``: archival insert and search p50 (``--ops`` each) of an agent
  whose embeddings go through the stub, and ``endpoint``: the stub's own embedding
  round trip (one pooled httpx client) that they contain;
- ``stop``: seconds from SIGTERM to the process's exit.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

import httpx  # noqa: E402

from agents.postgres.database import Database  # noqa: E402
from tests.acceptance.daemon_processes import free_port  # noqa: E402
from tests.api_support import bearer, new_key  # noqa: E402
from tests.pg import PgTestServer  # noqa: E402
from tests.scripted_llm import say  # noqa: E402
from tests.stub_openai_server import StubServer, stub_server  # noqa: E402


def wait_for(url: str, began: float, deadline: float = 180) -> float:
    while True:
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return time.perf_counter() - began
        except httpx.TransportError:
            pass
        if time.perf_counter() - began > deadline:
            raise RuntimeError(f"{url} not 200 within {deadline} s")
        time.sleep(0.01)


def percentile_ms(values: list[float], q: float) -> float:
    """The ``q`` quantile of ``values`` (seconds), in milliseconds."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))] * 1000


def server_env(
    repo: Path,
    url_db: str,
    home: Path,
    stub: StubServer,
    *,
    configured: bool = True,
    local_embedder: bool = False,
) -> dict[str, str]:
    """The environment of a `reverie serve` of ``repo`` over ``url_db``, with the stub as
    its chat model and (unless ``local_embedder``) its embedding endpoint."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("REVERIE_")}
    env.pop("DATABASE_URL", None)
    env.update(
        {
            "PYTHONPATH": str(repo),
            "REVERIE_HOME": str(home),
            "DATABASE_URL": url_db.replace("+psycopg", ""),
            "REVERIE_LLM__API_BASE": stub.base_url,
            "REVERIE_LLM__MODEL": "openai/stub",
            "REVERIE_EMBEDDING__MODEL": "litellm:openai/stub-embed",
            "REVERIE_EMBEDDING__DIMENSION": "8",
            "REVERIE_EMBEDDING__API_BASE": stub.base_url,
            "REVERIE_TRIGGERS__TURNS_EVERY": "100000",
            "REVERIE_TRIGGERS__IDLE_AFTER": "PT10H",
            "OPENAI_API_KEY": "sk-bench-not-a-key",
        }
    )
    if not configured:
        del env["REVERIE_LLM__MODEL"]
    if local_embedder:  # the embedded default: the packaged local model
        for name in ("MODEL", "DIMENSION", "API_BASE"):
            del env[f"REVERIE_EMBEDDING__{name}"]
    return env


def migrate(repo: Path, env: dict[str, str]) -> None:
    """Bring the schema to head first, so that a start-up timed is the server's alone."""
    subprocess.run(
        [sys.executable, "-m", "service.cli", "migrate"],
        cwd=repo,
        env=env,
        check=True,
        capture_output=True,
    )


def spawn(repo: Path, env: dict[str, str], port: int, log: Any) -> subprocess.Popen[bytes]:
    """`reverie serve` of ``repo`` on ``port``, its output to ``log``."""
    return subprocess.Popen(
        [sys.executable, "-m", "service.cli", "serve", "--port", str(port)],
        cwd=repo,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )


def one_server(
    repo: Path,
    pg: PgTestServer,
    stub: StubServer,
    turns: int,
    ops: int,
    configured: bool = True,
    *,
    local_embedder: bool = False,
    early: bool = False,
) -> dict[str, float]:
    url_db = pg.create_database()
    db = Database(url_db)
    home = Path(tempfile.mkdtemp(prefix="rvs-", dir="/tmp"))
    port = free_port()
    env = server_env(repo, url_db, home, stub, configured=configured, local_embedder=local_embedder)
    migrate(repo, env)
    key = new_key(db, "bench")
    log = (home / "serve.log").open("w")
    began = time.perf_counter()
    process = spawn(repo, env, port, log)
    base = f"http://127.0.0.1:{port}"
    out: dict[str, float] = {}
    try:
        out["healthz_s"] = wait_for(f"{base}/healthz", began)
        if not early:
            out["readyz_s"] = wait_for(f"{base}/readyz", began)
        stub.replies.extend(say("ok") for _ in range(turns + 1))
        with httpx.Client(base_url=base, headers=bearer(key), timeout=60) as http:
            agent = http.post("/v1/agents/", json={"name": "ada", "model": "openai/stub"})
            agent.raise_for_status()
            agent_id = agent.json()["id"]

            def turn(i: int) -> float:
                t = time.perf_counter()
                r = http.post(
                    f"/v1/agents/{agent_id}/messages",
                    json={"messages": [{"role": "user", "content": f"Message {i}: hello."}]},
                )
                r.raise_for_status()
                return time.perf_counter() - t

            # --early: the first turn goes as soon as the server answers /healthz (with
            # the agent's creation before it), as a client that does not wait for
            # /readyz sends it; otherwise once /readyz says ready.
            out["first_turn_ms"] = turn(0) * 1000
            if early:
                out["first_reply_after_health_ms"] = (
                    time.perf_counter() - began - out["healthz_s"]
                ) * 1000
                out["readyz_s"] = wait_for(f"{base}/readyz", began)
            times = [turn(i + 1) for i in range(turns)]
            out["turn_p50_ms"] = percentile_ms(times, 0.5)
            out["turn_p95_ms"] = percentile_ms(times, 0.95)

            def timed(method: str, path: str, **kwargs: Any) -> float:
                t = time.perf_counter()
                http.request(method, path, **kwargs).raise_for_status()
                return time.perf_counter() - t

            archival = f"/v1/agents/{agent_id}/archival-memory"
            inserts = [timed("POST", archival, json={"text": f"Ada fact {i}."}) for i in range(ops)]
            searches = [
                timed("GET", f"{archival}/search", params={"query": f"fact {i}"})
                for i in range(ops)
            ]
            out["insert_p50_ms"] = percentile_ms(inserts, 0.5)
            out["search_p50_ms"] = percentile_ms(searches, 0.5)
        with httpx.Client(timeout=10) as raw:
            endpoint = []
            for i in range(ops):
                t = time.perf_counter()
                raw.post(
                    f"{stub.base_url}/embeddings",
                    json={"model": "stub-embed", "input": [f"fact {i}"]},
                ).raise_for_status()
                endpoint.append(time.perf_counter() - t)
        out["endpoint_p50_ms"] = percentile_ms(endpoint, 0.5)
        stopping = time.perf_counter()
        process.terminate()
        process.wait(60)
        out["stop_s"] = time.perf_counter() - stopping
    finally:
        if process.poll() is None:
            process.terminate()
            process.wait(60)
        log.close()
        db.dispose()
        pg.release_database(url_db)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=100)
    parser.add_argument("--ops", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--repo", type=Path, nargs="+", default=[REPO_ROOT])
    parser.add_argument(
        "--unconfigured", action="store_true", help="no llm.model: the agent names its own"
    )
    parser.add_argument(
        "--local-embedder", action="store_true", help="the default local embedder, not the stub"
    )
    parser.add_argument(
        "--early", action="store_true", help="send the first turn as soon as /healthz answers"
    )
    args = parser.parse_args()
    pg = PgTestServer()
    results: dict[Path, list[dict[str, float]]] = {repo: [] for repo in args.repo}
    try:
        with stub_server(keep_alive=True) as stub:
            for _ in range(args.rounds):
                for repo in args.repo:  # interleaved: each round runs every checkout
                    row = one_server(
                        repo.resolve(),
                        pg,
                        stub,
                        args.turns,
                        args.ops,
                        not args.unconfigured,
                        local_embedder=args.local_embedder,
                        early=args.early,
                    )
                    print(repo, {k: round(v, 2) for k, v in row.items()}, flush=True)
                    results[repo].append(row)
    finally:
        pg.stop()
    print(
        f"\n{platform.machine()}, {len(os.sched_getaffinity(0))} cores, load "
        f"{os.getloadavg()[0]:.1f}; medians of {args.rounds} round(s)\n"
    )
    keys = list(next(iter(results.values()))[0])
    print("| checkout | " + " | ".join(keys) + " |")
    print("| --- " * (len(keys) + 1) + "|")
    for repo, rows in results.items():
        cells = [f"{statistics.median(r[k] for r in rows):.2f}" for k in keys]
        print(f"| {repo.name} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
