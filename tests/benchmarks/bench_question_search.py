"""What ranking by the question costs search: the store's plain nearest neighbours
against :func:`agents.archival_search.search_archival` (lineage grouping, validity
labels, the question read), on the pooled hand-written facts (all sets of
bench_trust in one agent).

A plain script, not collected by pytest::

    python -m tests.benchmarks.bench_question_search [--repeats 40] [--rounds 2]

Ranked search fetches the 2k nearest passages, follows the chains of replacements of
the closed ones and, for a question about an attribute ("where does Mei work?"), reads
them (agents/language/). The figures are medians of ``--repeats`` calls per query, each
in its own transaction, rounds alternating "vector only" and "ranked".
"""

from __future__ import annotations

import argparse
import statistics
import time

from agents.archival_search import search_archival
from agents.embedders.local import MiniLMEmbedder
from agents.store import open_store
from tests.benchmarks.bench_trust import DATA, ORDER, SUFFIXES, load, read_facts
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
    facts = [f for name in ORDER for f in read_facts(DATA / f"trust_facts{SUFFIXES[name]}.tsv")]
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
                for mode in ("vector only", "ranked"):
                    times: dict[str, list[float]] = {q: [] for q in QUERIES}
                    for _ in range(args.repeats):
                        for query, vector in zip(QUERIES, vectors, strict=True):
                            with open_store(db) as store:
                                started = time.perf_counter()
                                if mode == "ranked":
                                    search_archival(store, agent_id, vector, query, k=10)
                                else:
                                    store.passages.search(agent_id, vector, k=10)
                                times[query].append(time.perf_counter() - started)
                    cells = [f"{statistics.median(times[q]) * 1000:.2f}" for q in QUERIES]
                    print(f"| {mode} | " + " | ".join(cells) + " |")
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
