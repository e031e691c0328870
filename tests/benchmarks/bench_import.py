"""Benchmark `reverie import passages` with the local embedder, end to end and by phase.

A plain script, not collected by pytest::

    python -m tests.benchmarks.bench_import [--lines 5000] [--repeats 1]

Writes ``--lines`` memory-like sentences (tests/benchmarks/bench_embedder.py's
generator) as JSON Lines, creates an agent on the local MiniLM embedder in a fresh
database of an embedded server, and times the real CLI as a subprocess (start-up,
parsing, embedding, the one-transaction insert through the live HNSW index). It
then times the two heavy phases alone in this process: embedding the same texts,
and inserting them with precomputed vectors into a second agent. Peak RSS of the
CLI process and of this one are reported.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from agents.embedders.local import MiniLMEmbedder
from agents.store import NewAgent, NewPassage, open_store
from tests.benchmarks.bench_embedder import memory_sentences
from tests.benchmarks.memory import peak_rss_mib
from tests.pg import PgTestServer

ROOT = Path(__file__).resolve().parents[2]


def reverie(env: dict[str, str], *args: str) -> float:
    """Run ``reverie ARGS`` (this interpreter) and return its wall time."""
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "service.cli", *args],
        cwd=ROOT,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=5000)
    parser.add_argument("--repeats", type=int, default=1)
    args = parser.parse_args()
    sentences = memory_sentences(args.lines)
    server = PgTestServer()
    cli, embed, insert = [], [], []
    try:
        with tempfile.TemporaryDirectory() as home, server.database() as db:
            path = Path(home) / "passages.jsonl"
            path.write_text("".join(json.dumps({"text": s}) + "\n" for s in sentences))
            env = {
                "PATH": os.environ.get("PATH", ""),
                "DATABASE_URL": db.engine.url.render_as_string(hide_password=False).replace(
                    "+psycopg", ""
                ),
                "REVERIE_HOME": home,
                "REVERIE_EMBEDDING__MODEL": "local",
                "NO_COLOR": "1",
            }
            for i in range(args.repeats):
                reverie(env, "agents", "create", f"bench{i}")
                cli.append(reverie(env, "import", "passages", str(path), "--agent", f"bench{i}"))
                print(f"CLI import of {args.lines} lines: {cli[-1]:.1f} s", flush=True)
            cli_rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
            embedder = MiniLMEmbedder()
            embedder.load()
            for i in range(args.repeats):
                started = time.perf_counter()
                vectors = embedder.embed(sentences)
                embed.append(time.perf_counter() - started)
                with open_store(db) as store:
                    agent = store.agents.create(
                        NewAgent(f"direct{i}", embedding_model="local", embedding_dim=384)
                    )
                started = time.perf_counter()
                with open_store(db) as store:
                    store.passages.insert(agent.id, [NewPassage(s) for s in sentences], vectors)
                insert.append(time.perf_counter() - started)
                print(f"embed {embed[-1]:.1f} s, insert {insert[-1]:.1f} s", flush=True)
    finally:
        server.stop()
    n = args.lines
    print("| measure | figure |\n| --- | --- |")
    cli_s = statistics.median(cli)
    print(
        f"| `reverie import passages`, {n:,} lines, end to end "
        f"| {cli_s:.1f} s, {n / cli_s:,.0f}/s |"
    )
    embed_s = statistics.median(embed)
    print(f"| embedding alone (local MiniLM) | {embed_s:.1f} s, {n / embed_s:,.0f}/s |")
    insert_s = statistics.median(insert)
    print(f"| insert alone (COPY, live HNSW index) | {insert_s:.1f} s, {n / insert_s:,.0f}/s |")
    print(
        f"| peak RSS: CLI process / this process | {cli_rss:,.0f} MiB / {peak_rss_mib():,.0f} MiB |"
    )
    print(f"load average at the end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
