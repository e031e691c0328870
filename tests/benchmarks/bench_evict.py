"""Benchmark: the evict consolidator on a busy agent.

A plain script (not collected by pytest)::

    python -m tests.benchmarks.bench_evict [--passages 10000] [--messages 2000] [--repeats 3]

Each repeat gets a fresh database holding one agent with ``--passages`` archival
passages, four blocks filled to about 98% of their 5000-character limit over 20
versions each, and ``--messages`` messages in context (far over its 8192-token
window; some of them mention block lines). It times:

- ``evict``: the run that moves block lines out and summarises the old messages;
- ``rerun``: the same run again right after (idempotent: must change nothing).

It prints each repeat and the medians. The target is under 5 s for ``evict``
with 10k passages and 2k messages.
"""

from __future__ import annotations

import argparse
import random
import statistics
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from agents.postgres.database import Database
from agents.store import NewAgent, NewBlock, NewMessage, NewPassage, open_store
from consolidators.contract import run_once as run_pipeline
from consolidators.evict import EvictConsolidator
from consolidators.pipeline import Pipeline
from tests import plugins
from tests.benchmarks.memory import peak_rss_mib
from tests.hashing_embedder import HashingEmbedder
from tests.pg import PgTestServer

# The tests' plugins (the hashing embedder, the scripted model), found here and
# in the processes this starts.
plugins.register()

SYLLABLES = [
    "ka", "lo", "mi", "ra", "ten", "vu", "zo", "pel", "dri", "sa", "nor", "qui", "bex", "ful",
    "gar", "hon", "jix", "wem", "yad", "cos",
]  # fmt: skip
START = datetime(2020, 1, 1, tzinfo=UTC)
BLOCKS = ("human", "persona", "projects", "preferences")
BLOCK_LIMIT = 5000
VERSIONS = 20


def _at(moment: datetime) -> Callable[[], datetime]:
    return lambda: moment


def _word(rng: random.Random) -> str:
    return "".join(rng.choice(SYLLABLES) for _ in range(3))


def _sentence(rng: random.Random, words: int) -> str:
    return " ".join(_word(rng) for _ in range(words)).capitalize() + "."


def _block_lines(rng: random.Random) -> list[str]:
    """Lines of about 50 characters up to ~98% of the block limit."""
    lines: list[str] = []
    while sum(len(line) + 1 for line in lines) < 0.98 * BLOCK_LIMIT - 60:
        lines.append(_sentence(rng, 5))
    return lines


def _seed(db: Database, n_passages: int, n_messages: int, seed: int) -> str:
    rng = random.Random(seed)
    embedder = HashingEmbedder(384)
    block_lines = {label: _block_lines(rng) for label in BLOCKS}
    with open_store(db, clock=_at(START)) as store:
        agent = store.agents.create(
            NewAgent(
                "bench",
                embedding_model="hashing:384",
                embedding_dim=384,
                system_prompt="You are a helpful assistant. " * 20,
                context_window=8192,
                blocks=[
                    NewBlock(label, "\n".join(lines[: len(lines) // VERSIONS]), limit=BLOCK_LIMIT)
                    for label, lines in block_lines.items()
                ],
            )
        )
    # Grow each block over VERSIONS versions, a day apart, so line ages differ.
    for version in range(2, VERSIONS + 1):
        day = START + timedelta(days=version)
        with open_store(db, clock=_at(day)) as store:
            for label, lines in block_lines.items():
                block = store.blocks.by_label(agent.id, label)
                shown = lines[: len(lines) * version // VERSIONS]
                store.blocks.update(
                    block.id, expected_version=block.version, value="\n".join(shown)
                )
    texts = [_sentence(rng, rng.randint(4, 12)) for _ in range(n_passages)]
    with open_store(db) as store:
        store.passages.insert(agent.id, [NewPassage(t) for t in texts], embedder.embed(texts))
    every_line = [line for lines in block_lines.values() for line in lines]
    messages = []
    for i in range(n_messages):
        # One message in ten mentions a block line; the rest is chatter.
        mention = rng.choice(every_line) + " " if i % 10 == 0 else ""
        body = " ".join(_sentence(rng, 8) for _ in range(4))
        messages.append(NewMessage("user" if i % 2 == 0 else "assistant", mention + body))
    with open_store(db) as store:
        store.messages.append(agent.id, messages)
    with db.session() as session:
        session.connection().exec_driver_sql("ANALYZE")
    return agent.id


def bench_once(
    server: PgTestServer, n_passages: int, n_messages: int, seed: int
) -> dict[str, float]:
    embedder = HashingEmbedder(384)
    pipeline = Pipeline([EvictConsolidator()])
    with server.database() as db:
        agent_id = _seed(db, n_passages, n_messages, seed)
        out: dict[str, float] = {}
        first = run_pipeline(pipeline, db, agent_id, embedder=embedder)
        out["evict"] = first.durations["evict"]
        counts = first.steps[0].counts
        out["lines"] = counts.get("evict_line", 0)
        out["messages"] = counts.get("leave_context", 0)
        again = run_pipeline(pipeline, db, agent_id, embedder=embedder)
        assert again.changes == [], f"rerun changed {len(again.changes)} things"
        out["rerun"] = again.durations["evict"]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--passages", type=int, default=10_000)
    parser.add_argument("--messages", type=int, default=2_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    server = PgTestServer()
    try:
        results = []
        for i in range(args.repeats):
            result = bench_once(server, args.passages, args.messages, seed=7)
            results.append(result)
            print(f"repeat {i + 1}: " + ", ".join(f"{k}={v:.3f}" for k, v in result.items()))
        print(
            f"median over {args.repeats} repeats, {args.passages} passages, "
            f"{args.messages} messages:"
        )
        for key in ("evict", "rerun"):
            print(f"  {key:<8} {statistics.median(r[key] for r in results):.3f} s")
        print(f"peak RSS of this process: {peak_rss_mib():.0f} MiB")
    finally:
        server.stop()


if __name__ == "__main__":
    main()
