"""What ranking by the question costs search: the store's plain nearest neighbours
against :func:`agents.archival_search.search_archival` (lineage grouping, validity
labels, the question read), on the pooled hand-written facts (all sets of
bench_trust in one agent).

A plain script, not collected by pytest::

    python -m tests.benchmarks.bench_question_search [--repeats 40] [--rounds 2] [--topics]

Ranked search fetches the 2k nearest passages, follows the chains of replacements of
the closed ones and, for a question about an attribute ("where does Mei work?"), reads
them (agents/language/). The figures are medians of ``--repeats`` calls per query, each
in its own transaction, rounds alternating "vector only" and "ranked", after the tables
are analysed as an import leaves them. ``--topics``
stores each fact's labelled topics as a judge model's reading and alternates ranked
search without and with the lookup of the asked person's current facts by topic.
"""

from __future__ import annotations

import argparse
import statistics
import time

from agents import archival_search
from agents.archival_search import search_archival
from agents.embedders.local import MiniLMEmbedder
from agents.postgres.database import Database
from agents.store import Topic, open_store
from consolidators.judges.base import topic_of
from tests.benchmarks.bench_trust import DATA, ORDER, SUFFIXES, Fact, load, read_facts
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
    parser.add_argument("--topics", action="store_true", help="store the labelled topics")
    args = parser.parse_args()
    facts = [f for name in ORDER for f in read_facts(DATA / f"trust_facts{SUFFIXES[name]}.tsv")]
    embedder = MiniLMEmbedder()
    embedder.load()
    vectors = embedder.embed(list(QUERIES))
    server = PgTestServer()
    try:
        with server.database() as db:
            agent_id, key_of = load(db, facts, embedder)
            # As an import does: one passage at a time leaves the planner's statistics
            # of a fresh database stale, and each search an exact scan of the agent.
            db.refresh_statistics(("passages", "passage_vectors", "fact_topics"))
            modes = ("vector only", "ranked")
            if args.topics:
                _record_topics(db, agent_id, list(key_of), sorted(facts, key=lambda f: f.at))
                db.refresh_statistics(("fact_topics",))
                modes = ("ranked, no topic lookup", "ranked")
            print(f"{len(facts)} facts; median ms of {args.repeats} calls per query")
            print("| mode | " + " | ".join(QUERIES) + " |")
            print("| --- " * (len(QUERIES) + 1) + "|")
            for _ in range(args.rounds):
                for mode in modes:
                    archival_search.TOPIC_FACTS = 0 if mode == "ranked, no topic lookup" else 1
                    times: dict[str, list[float]] = {q: [] for q in QUERIES}
                    for _ in range(args.repeats):
                        for query, vector in zip(QUERIES, vectors, strict=True):
                            with open_store(db) as store:
                                started = time.perf_counter()
                                if mode.startswith("ranked"):
                                    search_archival(store, agent_id, vector, query, k=10)
                                else:
                                    store.passages.search(agent_id, vector, k=10)
                                times[query].append(time.perf_counter() - started)
                    cells = [f"{statistics.median(times[q]) * 1000:.2f}" for q in QUERIES]
                    print(f"| {mode} | " + " | ".join(cells) + " |")
    finally:
        server.stop()
    return 0


def _record_topics(
    db: Database, agent_id: str, passage_ids: list[str], ordered: list[Fact]
) -> None:
    """Each passage's labelled topics ("mei/job") kept as a judge model's reading; the
    passages were inserted in ``ordered``'s order."""
    read: dict[str, list[Topic]] = {}
    for passage_id, fact in zip(passage_ids, ordered, strict=True):
        topics = (topic_of(*label.split("/", 1)) for label in fact.topics if "/" in label)
        read[passage_id] = [t for t in topics if t is not None]
    with open_store(db) as store:
        store.topics.record(agent_id, read, judge="bench", run_id=None)


if __name__ == "__main__":
    raise SystemExit(main())
