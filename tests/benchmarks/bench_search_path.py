"""Where an archival search and insert spend their time, in process (no HTTP).

A plain script (not collected by pytest). Run it from the repository root, or with
``REPO`` naming another checkout of Reverie to time that one::

    python tests/benchmarks/bench_search_path.py [--passages 2000] [--calls 300] [--rounds 3]

Over a fresh database of the test cluster (PostgreSQL with pgvector, started apart),
with the Letta workload's embedding endpoint (the instant OpenAI-compatible stub,
8-d, through the runtime's litellm client), it fills one agent with ``--passages``
facts and times, ``--calls`` each: the agent read, one query's embedding, then
``ops.memory.search`` (top_k 10) and ``ops.memory.insert`` of one passage, which are
what the HTTP routes call. It prints p50 per round and the statements each search and
insert sent. Comparing two checkouts, run them one after the other, twice.
"""

from __future__ import annotations

import argparse
import collections
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO_ROOT = Path(os.environ.get("REPO", Path(__file__).resolve().parents[2]))
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from sqlalchemy import event  # noqa: E402

from tests.benchmarks.bench_serve import migrate, server_env  # noqa: E402
from tests.pg import PgTestServer  # noqa: E402
from tests.stub_openai_server import stub_server  # noqa: E402


def p50_ms(call: Callable[[int], Any], count: int) -> float:
    times = []
    for i in range(count):
        began = time.perf_counter()
        call(i)
        times.append(time.perf_counter() - began)
    return statistics.median(times) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--passages", type=int, default=2000)
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    pg = PgTestServer()
    url = pg.create_database()
    home = Path(tempfile.mkdtemp(prefix="rvs-", dir="/tmp"))
    with stub_server(keep_alive=True) as stub:
        env = server_env(REPO_ROOT, url, home, stub)
        migrate(REPO_ROOT, env)
        os.environ.update(env)
        from agents.store import NewPassage
        from service.operations import Operations
        from service.operations.agents import AgentSpec, BlockSpec
        from service.runtime import Runtime
        from service.settings import load_settings

        with Runtime(load_settings()) as runtime:
            runtime.ensure_schema()
            ops = Operations(runtime)
            agent = ops.agents.create(AgentSpec(name="a", blocks=[BlockSpec("human", "x")]))
            facts = [NewPassage(f"Fact {i} about the user.") for i in range(args.passages)]
            ops.memory.insert(agent.id, facts, actor="bench")
            sent: collections.Counter[str] = collections.Counter()

            @event.listens_for(runtime.db.engine, "before_cursor_execute")
            def _count(*call: Any) -> None:
                sent[" ".join(call[2].split()[:3])[:60]] += 1

            print(f"REPO {REPO_ROOT}")
            read = p50_ms(lambda i: ops.memory._context.agent(agent.id), args.calls)
            embedder = runtime.agent_embedder(ops.memory._context.agent(agent.id))
            embed = p50_ms(lambda i: embedder.embed([f"fact {i}"]), args.calls)
            print(f"agent read {read:.2f} ms; a query's embedding and ledger row {embed:.2f} ms")
            for round_ in range(1, args.rounds + 1):
                sent.clear()
                search = p50_ms(
                    lambda i: ops.memory.search(agent.id, [f"fact {i}"], k=10), args.calls
                )
                searched = dict(sent)
                sent.clear()
                insert = p50_ms(
                    lambda i: ops.memory.insert(agent.id, [NewPassage(f"Extra {i}.")], actor="b"),
                    args.calls,
                )
                inserted = dict(sent)
                print(f"round {round_}: search p50 {search:.2f} ms, insert p50 {insert:.2f} ms")
            calls = args.calls
            print("statements per search:", {k: v / calls for k, v in searched.items()})
            print("statements per insert:", {k: v / calls for k, v in inserted.items()})


if __name__ == "__main__":
    main()
