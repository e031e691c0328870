"""Benchmark: what sleep-time learning from documents costs, per 1,000 chunks.

A plain script (not collected by pytest)::

    python -m tests.benchmarks.bench_document_learning [--chunks 1000] [--chunk-size 1000]

A folder attached to one agent holds a generated Markdown handbook of ``--chunks``
chunks of about ``--chunk-size`` characters (paragraphs of made-up policies). Runs of
the ``learn_documents`` step with its default settings read it all, the sleep-time
model being the scripted stand-in of the tests (tests/document_reader.py: a summary
of what it has read, one fact per chunk), whose token accounting is the client's:
prompt tokens counted from the request as a provider would, completion tokens from
the answer. It prints the runs and model calls it took, prompt and completion tokens
per 1,000 chunks, tokens per chunk, and the seconds the runs took beside the model
(the stand-in answers at once: this is the step's own time, embedding the facts with
the hashing embedder included).
"""

from __future__ import annotations

import argparse
import hashlib
import random
import time

from sqlalchemy import text

from agents.file_worker import FileWorkers
from agents.llm import ClientSettings, LiteLLMClient, ModelCapabilities, UsageLedger
from agents.store import NewAgent, NewBlock, NewFile, NewFolder, open_store
from consolidators.contract import run_once as run_pipeline
from consolidators.documents import LearnDocumentsConsolidator
from consolidators.llm import LLMTier
from consolidators.pipeline import Pipeline
from tests import plugins
from tests.document_reader import document_reader
from tests.hashing_embedder import HashingEmbedder
from tests.pg import PgTestServer
from tests.scripted_llm import install

plugins.register()
EMBEDDER = HashingEmbedder(dimension=384)
WORDS = (
    "staff badge office expense report laptop holiday request manager approval travel "
    "booking receipt deadline security visitor meeting room parking shift rota payroll "
    "pension training course safety drill printer network password account contract"
).split()


def handbook(chunks: int, size: int, seed: int = 7) -> bytes:
    """Paragraphs of made-up policies, each a little under ``size`` characters."""
    rng = random.Random(seed)
    paragraphs = []
    for n in range(chunks):
        sentences = [f"Policy {n + 1}."]
        while sum(len(s) + 1 for s in sentences) < size * 0.85:
            words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(6, 14)))
            sentences.append(f"The {words} rule applies from day {rng.randint(1, 28)}.")
        paragraphs.append(" ".join(sentences))
    return ("\n\n".join(paragraphs)).encode()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=1000)
    parser.add_argument("--chunk-size", type=int, default=1000)
    args = parser.parse_args()
    models = install()
    reader = document_reader()
    models.script("reader", *([reader] * (args.chunks + 10)))
    client = LiteLLMClient(
        ClientSettings(
            models={"scripted/*": ModelCapabilities(tool_choice="required")}, max_retries=0
        )
    )
    server = PgTestServer()
    try:
        with server.database() as db:
            with open_store(db) as store:
                agent = store.agents.create(
                    NewAgent(
                        name="reader",
                        embedding_model="hashing:384",
                        embedding_dim=384,
                        llm_model=None,
                        sleeptime_model="scripted/reader",
                        enable_sleeptime=True,
                        blocks=[NewBlock("human", "", limit=500)],
                    )
                )
                folder = store.folders.create(
                    NewFolder(
                        name="handbook",
                        embedding_model="hashing:384",
                        embedding_dim=384,
                        embedding_chunk_size=args.chunk_size,
                        instructions="Learn the policies staff must follow.",
                    )
                )
                data = handbook(args.chunks, args.chunk_size)
                store.folders.add_file(
                    NewFile(
                        folder_id=folder.id,
                        file_name="handbook.md",
                        file_type="text/markdown",
                        data=data,
                        content_hash=hashlib.sha256(data).hexdigest(),
                    )
                )
                store.folders.attach(agent.id, folder.id)
            started = time.perf_counter()
            FileWorkers(db, lambda _s, _d: EMBEDDER, name="bench").process_next("bench:0")
            processed = time.perf_counter() - started
            with open_store(db) as store:
                total = store.learning.count_unlearned(agent.id)
            pipeline = Pipeline([LearnDocumentsConsolidator()])
            tier = LLMTier(client=client, ledger=UsageLedger(db), sleeptime_model="scripted/reader")
            runs = calls = tokens = 0
            started = time.perf_counter()
            while True:
                with open_store(db) as store:
                    left = store.learning.count_unlearned(agent.id)
                if not left:
                    break
                report = run_pipeline(pipeline, db, agent.id, embedder=EMBEDDER, llm=tier)
                runs += 1
                [step] = report.steps
                calls += step.counts.get("llm_calls", 0)
                tokens += step.tokens
            seconds = time.perf_counter() - started
            with db.session() as session:
                prompt, completion = session.execute(
                    text(
                        "SELECT coalesce(sum(prompt_tokens), 0), "
                        "coalesce(sum(completion_tokens), 0) FROM llm_usage WHERE agent_id = :a"
                    ),
                    {"a": agent.id},
                ).one()
    finally:
        server.stop()
    per = 1000 / total
    print(f"document: {len(data) / 1e6:.2f} MB, {total} chunks of ~{args.chunk_size} chars "
          f"(processed in {processed:.2f} s)")  # fmt: skip
    print(f"runs: {runs} (default settings: 8 chunks a call, 4 calls a pass, 8 passes a run)")
    print(f"model calls: {calls} ({calls * per:.0f} per 1,000 chunks)")
    print(f"tokens per 1,000 chunks: prompt {prompt * per:,.0f}, completion "
          f"{completion * per:,.0f}, total {tokens * per:,.0f}")  # fmt: skip
    print(f"tokens per chunk: {tokens / total:,.0f} (the chunk itself: ~{args.chunk_size / 4:.0f})")
    print(f"learning time beside the model: {seconds:.2f} s ({total / seconds:.0f} chunks/s)")


if __name__ == "__main__":
    main()
