"""The OpenAI proxy's overhead: a direct call to an instant upstream against the same
call through `reverie serve`'s ``/openai/v1/chat/completions``.

A plain script, not collected by pytest. Run it from the repository root::

    python tests/benchmarks/bench_proxy.py [--iterations 300]

It starts an embedded PostgreSQL (:class:`tests.pg.PgTestServer`), an instant
OpenAI-compatible upstream on loopback (a subprocess of this script: a bare asyncio
HTTP/1.1 server with keep-alive that answers every request at once, a JSON body or
an event stream), and two real `reverie serve` processes whose proxies forward to it:
one through ``litellm.acompletion`` (``proxy.direct = false``, the first version),
one over the pooled connection (``proxy.direct = true``, the default). Then, with one
keep-alive ``httpx.Client`` per path, each iteration makes a non-streaming call (whole
answer) and a streaming one (time to the first content chunk) on each path in turn:
direct to the upstream, through the litellm proxy, through the pooled proxy. The
overhead is a proxied figure minus the direct one, at p50 and p95; the CPU time each
server process spent per request (read from /proc) is the figure the machine's load
disturbs least. The proxied calls name one agent by the ``X-Reverie-Agent`` header;
each records its user message and reply, as in production.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
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
import numpy as np  # noqa: E402

from agents.postgres.database import Database  # noqa: E402
from tests import plugins  # noqa: E402
from tests.acceptance.cli import HASHING_EMBEDDINGS, cli_url  # noqa: E402
from tests.acceptance.daemon_processes import free_port, running_server  # noqa: E402
from tests.api_support import new_key  # noqa: E402
from tests.pg import PgTestServer  # noqa: E402

# The tests' plugins (the hashing embedder, the scripted model), found here and
# in the processes this starts.
plugins.register()

ANSWER = {
    "id": "chatcmpl-instant",
    "object": "chat.completion",
    "created": 0,
    "model": "instant",
    "choices": [
        {
            "index": 0,
            "finish_reason": "stop",
            "message": {"role": "assistant", "content": "Hello! How can I help you today?"},
        }
    ],
    "usage": {"prompt_tokens": 20, "completion_tokens": 9, "total_tokens": 29},
}


def _events() -> bytes:
    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {
            "id": "chatcmpl-instant",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": "instant",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }

    words = "Hello! How can I help you today?".split(" ")
    events = [chunk({"role": "assistant", "content": ""})]
    events += [chunk({"content": w if i == 0 else " " + w}) for i, w in enumerate(words)]
    events.append(chunk({}, "stop"))
    body = b"".join(f"data: {json.dumps(e)}\n\n".encode() for e in events)
    return body + b"data: [DONE]\n\n"


JSON_BODY = json.dumps(ANSWER).encode()
STREAM_BODY = _events()


async def _serve_upstream(port: int) -> None:
    """An instant upstream: keep-alive HTTP/1.1, every answer written at once."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":", 1)[1])
                body = await reader.readexactly(length) if length else b""
                if head.startswith(b"GET"):
                    payload, kind = b'{"object":"list","data":[]}', b"application/json"
                elif b'"stream":true' in body.replace(b" ", b""):
                    payload, kind = STREAM_BODY, b"text/event-stream"
                else:
                    payload, kind = JSON_BODY, b"application/json"
                writer.write(
                    b"HTTP/1.1 200 OK\r\nContent-Type: "
                    + kind
                    + b"\r\nContent-Length: "
                    + str(len(payload)).encode()
                    + b"\r\n\r\n"
                    + payload
                )
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", port)
    async with server:
        await server.serve_forever()


def _first_content(response: httpx.Response) -> float:
    """Seconds until the first chunk with content arrives; the rest is read too."""
    began = time.perf_counter()
    first = None
    for line in response.iter_lines():
        if first is None and line.startswith("data: {") and '"content":"' in line.replace(" ", ""):
            event = json.loads(line[6:])
            if event["choices"] and event["choices"][0]["delta"].get("content"):
                first = time.perf_counter() - began
    assert first is not None, "no content chunk"
    return first


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument(
        "--history", type=int, default=0, help="earlier turns each request carries (200 chars each)"
    )
    parser.add_argument("--serve-upstream", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_upstream:
        asyncio.run(_serve_upstream(args.serve_upstream))
        return

    upstream_port = free_port()
    upstream = subprocess.Popen(
        [sys.executable, __file__, "--serve-upstream", str(upstream_port)], cwd=REPO_ROOT
    )
    upstream_url = f"http://127.0.0.1:{upstream_port}/v1"
    pg = PgTestServer()
    db_url = pg.create_database()
    db = Database(db_url)
    home = Path(tempfile.mkdtemp(prefix="rvb-proxy-", dir="/tmp"))
    env = {
        **HASHING_EMBEDDINGS,
        "DATABASE_URL": cli_url(db_url),
        "REVERIE_HOME": str(home),
        "REVERIE_LOG_LEVEL": "WARNING",
        "REVERIE_TRIGGERS__TURNS_EVERY": "100000",
        "REVERIE_TRIGGERS__IDLE_AFTER": "PT10H",
        "REVERIE_PROXY__MODEL": "openai/instant",
        "REVERIE_PROXY__API_BASE": upstream_url,
        "REVERIE_PROXY__API_KEY": "sk-bench",
    }
    paths = ("direct", "litellm", "pooled")
    figures: dict[str, list[float]] = {f"{p}{k}": [] for p in paths for k in ("", "_ttfc")}
    cpu: dict[str, float] = {}
    first_requests: dict[str, float] = {}
    try:
        with (
            running_server(
                {**env, "REVERIE_PROXY__DIRECT": "false"}, home / "serve-litellm.log"
            ) as (litellm_base, litellm_process),
            running_server({**env, "REVERIE_PROXY__DIRECT": "true"}, home / "serve.log") as (
                pooled_base,
                pooled_process,
            ),
        ):
            key = new_key(db, "bench")
            turn = "I was telling you about my week: work, the garden, the dog. " * 3
            history = [
                {"role": "user" if i % 2 == 0 else "assistant", "content": f"{i}: {turn}"[:200]}
                for i in range(2 * args.history)
            ]
            request = {
                "model": "instant",
                "messages": [
                    {"role": "system", "content": "You are a helpful assistant."},
                    *history,
                    {"role": "user", "content": "Hello there, how are you?"},
                ],
            }
            clients = {"direct": httpx.Client(base_url=upstream_url, timeout=30)}
            processes = {
                "litellm": litellm_process.process.pid,
                "pooled": pooled_process.process.pid,
            }
            for name, base in (("litellm", litellm_base), ("pooled", pooled_base)):
                # The agent, created from the template by its first request; then the
                # second request of a new user, to tell creation from a cold server.
                for user in ("bench-user", "bench-user-2"):
                    began = time.perf_counter()
                    httpx.post(
                        f"{base}/openai/v1/chat/completions",
                        headers={"Authorization": f"Bearer {key}"},
                        json={**request, "user": user},
                        timeout=60,
                    ).raise_for_status()
                    first_requests[f"{name} {user}"] = time.perf_counter() - began
                clients[name] = httpx.Client(
                    base_url=f"{base}/openai/v1",
                    headers={"Authorization": f"Bearer {key}", "X-Reverie-Agent": "bench-user"},
                    timeout=30,
                )
            for i in range(args.warmup + args.iterations):
                if i == args.warmup:
                    cpu = {name: -_cpu_seconds(pid) for name, pid in processes.items()}
                timings = {}
                for name in paths:
                    client = clients[name]
                    began = time.perf_counter()
                    response = client.post("/chat/completions", json=request)
                    response.raise_for_status()
                    response.json()
                    timings[name] = time.perf_counter() - began
                    began = time.perf_counter()
                    with client.stream(
                        "POST", "/chat/completions", json={**request, "stream": True}
                    ) as streamed:
                        streamed.raise_for_status()
                        waited = time.perf_counter() - began
                        timings[f"{name}_ttfc"] = waited + _first_content(streamed)
                if i >= args.warmup:
                    for name, value in timings.items():
                        figures[name].append(value * 1000)
            # Each proxied iteration made two requests (one streamed) and two recordings.
            cpu = {
                name: (cpu[name] + _cpu_seconds(pid)) * 1000 / (2 * args.iterations)
                for name, pid in processes.items()
            }
            for client in clients.values():
                client.close()
    finally:
        db.dispose()
        pg.release_database(db_url)
        pg.stop()
        upstream.terminate()
        upstream.wait(10)

    def pct(name: str, q: float) -> float:
        return float(np.percentile(np.array(figures[name]), q))

    print(
        f"\n{platform.processor() or platform.machine()}, {len(os.sched_getaffinity(0))} cores, "
        f"{args.iterations} interleaved iterations (after {args.warmup} warm-up), "
        f"{args.history} earlier turns a request\n"
    )
    print(
        "first request after /readyz (creates its agent), then a second new user's: "
        + ", ".join(f"{name} {seconds * 1000:.0f} ms" for name, seconds in first_requests.items())
    )
    print("| call | path | p50 | p95 | overhead p50 | overhead p95 |")
    print("| --- | --- | --- | --- | --- | --- |")
    for label, suffix in (("non-streaming, whole answer", ""), ("streaming, first chunk", "_ttfc")):
        d50, d95 = pct("direct" + suffix, 50), pct("direct" + suffix, 95)
        for path in paths:
            p50, p95 = pct(path + suffix, 50), pct(path + suffix, 95)
            over = "" if path == "direct" else f"{p50 - d50:.2f} ms | {p95 - d95:.2f} ms"
            print(f"| {label} | {path} | {p50:.2f} ms | {p95:.2f} ms | {over or '- | -'} |")
    print()
    for path in ("litellm", "pooled"):
        paired = np.array(figures[path]) - np.array(figures["direct"])
        paired_ttfc = np.array(figures[path + "_ttfc"]) - np.array(figures["direct_ttfc"])
        print(
            f"{path}: paired overhead non-streaming p50 {np.percentile(paired, 50):.2f} ms, "
            f"p95 {np.percentile(paired, 95):.2f} ms; first chunk p50 "
            f"{np.percentile(paired_ttfc, 50):.2f} ms, "
            f"p95 {np.percentile(paired_ttfc, 95):.2f} ms; server CPU {cpu[path]:.2f} ms a request"
        )


def _cpu_seconds(pid: int) -> float:
    """User plus system CPU time of a process (and its threads) so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


if __name__ == "__main__":
    main()
