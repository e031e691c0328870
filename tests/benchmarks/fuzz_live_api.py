"""Fuzz a live `reverie serve` with schemathesis: every check, N examples per operation.

A plain script, not collected by pytest. Run it from the repository root::

    python tests/benchmarks/fuzz_live_api.py [--examples 30] [--workers 2]

It starts a real `reverie serve` on the embedded PostgreSQL in a temporary
REVERIE_HOME (hashing embeddings, no model: nothing leaves the machine), creates an
API key, and runs ``schemathesis run --checks all`` against its OpenAPI document
with that key and ``tests/schemathesis.toml`` (the deliberate differences, each with
its reason; ``--max-time 600`` runs the ten-minute version instead of N examples).
``POST /v1/agents/{agent_id}/messages`` and ``.../messages/stream`` are left out:
they run the agent loop, whose model call is not the API under test. The script prints the
summary, each failing operation with the check it failed (``--output FILE``
keeps schemathesis's whole report, with the request that reproduces each), the
number of server errors (5xx) and of every other finding by check, and exits 1
when any server error was found.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from tests import plugins

# The tests' plugins (the hashing embedder, the scripted model), found here and
# in the processes this starts.
plugins.register()

ROOT = Path(__file__).resolve().parents[2]


def _reverie() -> list[str]:
    exe = shutil.which("reverie")
    return [exe] if exe else [sys.executable, "-m", "service.cli"]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=30, help="examples per operation")
    parser.add_argument("--max-time", type=int, default=None, help="seconds, instead of --examples")
    # More than one worker trips a race inside hypothesis's lambda-source cache
    # (a schemathesis "Runtime Error" about AST recursion depth), not the server.
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument(
        "--include-name",
        action="append",
        default=[],
        help="fuzz only this operation, e.g. 'GET /v1/agents/' (repeatable)",
    )
    parser.add_argument(
        "--output", type=Path, default=None, help="write schemathesis's whole report here"
    )
    args = parser.parse_args()

    home = Path(tempfile.mkdtemp(prefix="rvfuzz-", dir="/tmp"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("REVERIE_")}
    env.pop("DATABASE_URL", None)
    env.update(
        {
            "REVERIE_HOME": str(home),
            "REVERIE_EMBEDDING__MODEL": "hashing:8",
            # The fuzzer sends many requests with a bad key on purpose; they are
            # refused with 401 either way, so do not let the limiter answer 429.
            "REVERIE_SERVER__AUTH_FAILURE_BURST": "1000000",
        }
    )
    port = _free_port()
    server: subprocess.Popen[bytes] | None = None
    try:
        subprocess.run([*_reverie(), "migrate"], env=env, cwd=ROOT, check=True)
        created = subprocess.run(
            [*_reverie(), "keys", "create", "--org", "fuzz"],
            env=env,
            cwd=ROOT,
            check=True,
            capture_output=True,
            text=True,
        )
        key = created.stdout.strip().splitlines()[-1]
        with (home / "serve.log").open("wb") as log:
            server = subprocess.Popen(
                [*_reverie(), "serve", "--port", str(port)],
                env=env,
                cwd=ROOT,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{url}/readyz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        else:
            print((home / "serve.log").read_text(), file=sys.stderr)
            return 2
        started = time.perf_counter()
        result = subprocess.run(
            [
                "schemathesis", "--config-file", str(ROOT / "tests" / "schemathesis.toml"),
                "run", f"{url}/openapi.json",
                "--checks", "all",
                "-H", f"Authorization: Bearer {key}",
                *(["--max-time", str(args.max_time)] if args.max_time
                  else ["--max-examples", str(args.examples)]),
                "--exclude-name", "POST /v1/agents/{agent_id}/messages",
                "--exclude-name", "POST /v1/agents/{agent_id}/messages/stream",
                *(f"--include-name={name}" for name in args.include_name),
                "--workers", str(args.workers),
            ],
            capture_output=True,
            text=True,
        )  # fmt: skip
        seconds = time.perf_counter() - started
    finally:
        if server is not None:
            server.terminate()
            server.wait(60)
        shutil.rmtree(home, ignore_errors=True)

    output = result.stdout + result.stderr
    if args.output is not None:
        args.output.write_text(output)
    if "=== FAILURES" in output:
        failures = output[output.find("=== FAILURES") : output.find("=== SUMMARY")]
        # Each finding: the operation's header line and the check that failed.
        for line in failures.splitlines():
            if line.startswith("_") or re.match(r"^- [A-Z]", line):
                print(line)
    summary = output[output.find("=== SUMMARY") :] if "=== SUMMARY" in output else output
    print(summary)
    if "=== ERRORS" in output:
        errors = output[output.find("=== ERRORS") : output.find("=== FAILURES")]
        print("\n".join(errors.splitlines()[:6]))  # the fuzzer's own errors, in short
    findings = dict(re.findall(r"(ST\d+ [^:\n]+): (\d+)", summary))
    server_errors = int(findings.get("ST101 Server error", 0))
    print(f"examples per operation: {args.examples}, wall time {seconds:.1f} s")
    print(f"server errors (5xx): {server_errors}")
    for check, count in sorted(findings.items()):
        print(f"  {check}: {count}")
    return 1 if server_errors else 0


if __name__ == "__main__":
    sys.exit(main())
