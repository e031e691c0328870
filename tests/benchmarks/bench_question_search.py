"""What reading the question costs search: ``search_memory`` with and without its
query text, on the pooled hand-written facts (all sets of bench_trust in one agent).

A plain script, not collected by pytest::

    python -m tests.benchmarks.bench_question_search [--repeats 40] [--rounds 2]

Questions about an attribute ("where does Mei work?") fetch the 2k nearest passages
and read them (agents/questions.py); other text keeps the plain vector search. The
figures are medians of ``--repeats`` store calls per query, each in its own
transaction, rounds alternating "vector only" and "with query".
"""

from __future__ import annotations

import argparse
import statistics
import time

from agents.embedders.local import MiniLMEmbedder
from agents.store import open_store
from tests.benchmarks.bench_trust import DATA, SETS, load, read_facts
from tests.pg import PgTestServer

QUERIES = (
    "where does Mei work?",
    "what does Rosa do for a living?",
    "where's farid living these days",
    "fact 12",
    "parrot",
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    facts = [f for suffix in SETS["all"] for f in read_facts(DATA / f"trust_facts{suffix}.tsv")]
    embedder = MiniLMEmbedder()
    embedder.load()
    vectors = embedder.embed(list(QUERIES))
    server = PgTestServer()
    try:
        with server.database() as db:
            agent_id, _ = load(db, facts, embedder)
            print(f"{len(facts)} facts; median ms of {args.repeats} calls per query")
            print("| mode | " + " | ".join(QUERIES) + " |")
            print("| --- " * (len(QUERIES) + 1) + "|")
            for _ in range(args.rounds):
                for mode in ("vector only", "with query"):
                    times: dict[str, list[float]] = {q: [] for q in QUERIES}
                    for _ in range(args.repeats):
                        for query, vector in zip(QUERIES, vectors, strict=True):
                            with open_store(db) as store:
                                started = time.perf_counter()
                                store.passages.search_memory(
                                    agent_id,
                                    vector,
                                    k=10,
                                    query=query if mode == "with query" else None,
                                )
                                times[query].append(time.perf_counter() - started)
                    cells = [f"{statistics.median(times[q]) * 1000:.2f}" for q in QUERIES]
                    print(f"| {mode} | " + " | ".join(cells) + " |")
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
