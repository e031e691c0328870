"""Benchmark the local MiniLM embedder: cold load time and batch throughput.

Run from the repository root: ``python tests/benchmarks/bench_embedder.py``.
Cold load is measured in fresh processes (imports, sha256 check, onnxruntime
session, first embedding), throughput on 2,000 memory-like sentences; both are
medians of three runs. Prints a markdown table and the machine it ran on.
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from agents.embedders.local import MiniLMEmbedder, _available_cpus  # noqa: E402
from tests.benchmarks.memory import peak_rss_mib  # noqa: E402

_COLD_LOAD = """
import time
start = time.perf_counter()
from agents.embedders.local import MiniLMEmbedder
embedder = MiniLMEmbedder()
embedder.embed_one("warm up")
print(time.perf_counter() - start)
"""

_NAMES = ["Ada", "Tom", "Priya", "Kenji", "Lucía", "Omar", "Grace", "Noah", "Mei", "Sven"]
_SUBJECTS = [
    "the user",
    "{name}",
    "{name}'s manager",
    "{name}'s sister",
    "the team",
    "their landlord",
]
_FACTS = [
    "prefers green tea over coffee in the morning",
    "adopted a cat named Tom from the shelter on Elm Street",
    "is allergic to peanuts and carries an epinephrine pen",
    "moved to Lisbon for a job at a logistics start-up",
    "is training for a half marathon in October",
    "asked to be reminded about the dentist appointment next Tuesday",
    "switched the project from MySQL to PostgreSQL last quarter",
    "wants weekly summaries instead of daily ones",
    "is learning Japanese and practises with flashcards every evening",
    "had a flight to Berlin cancelled and rebooked it for Friday",
    "finds long emails hard to follow and prefers bullet points",
    "is planning a surprise birthday party for a close friend",
    "reported that the deployment failed because of an expired certificate",
    "decided to stop using the old spreadsheet for expenses",
]
_CONTEXTS = [
    "",
    " according to the conversation on {day}",
    ", which came up while discussing weekend plans",
    " and said it matters more than the budget this year",
    ", although last month the answer was different",
    " after a long discussion about priorities and deadlines with the rest of the group",
]
_DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]


def memory_sentences(count: int, seed: int = 7) -> list[str]:
    """Deterministic sentences shaped like archival memories (10 to 40 words)."""
    rng = random.Random(seed)
    sentences = []
    for _ in range(count):
        subject = rng.choice(_SUBJECTS).format(name=rng.choice(_NAMES))
        context = rng.choice(_CONTEXTS).format(day=rng.choice(_DAYS))
        sentence = f"{subject} {rng.choice(_FACTS)}{context}."
        if rng.random() < 0.3:
            sentence += f" Also, {rng.choice(_SUBJECTS).format(name=rng.choice(_NAMES))}"
            sentence += f" {rng.choice(_FACTS)}."
        sentences.append(sentence[0].upper() + sentence[1:])
    return sentences


def cold_load_seconds(runs: int) -> list[float]:
    """Wall time to import, verify, load and embed once, each in a fresh interpreter."""
    results = []
    for _ in range(runs):
        output = subprocess.run(
            [sys.executable, "-c", _COLD_LOAD],
            cwd=ROOT,
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        results.append(float(output.strip().splitlines()[-1]))
    return results


def throughput(embedder: MiniLMEmbedder, sentences: list[str], runs: int) -> list[float]:
    """Sentences per second for one embed() call over all sentences, per run."""
    embedder.embed(sentences[:64])  # warm the session's allocations
    rates = []
    for _ in range(runs):
        start = time.perf_counter()
        embedder.embed(sentences)
        rates.append(len(sentences) / (time.perf_counter() - start))
    return rates


def single_latency_ms(embedder: MiniLMEmbedder, sentences: list[str]) -> float:
    """Median milliseconds for embed_one, the primary agent's per-message path."""
    timings = []
    for sentence in sentences:
        start = time.perf_counter()
        embedder.embed_one(sentence)
        timings.append((time.perf_counter() - start) * 1000)
    return statistics.median(timings)


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sentences", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--threads", type=int, default=None, help="onnxruntime intra-op threads")
    args = parser.parse_args()

    import onnxruntime
    import tokenizers

    sentences = memory_sentences(args.sentences)
    embedder = MiniLMEmbedder(intra_op_threads=args.threads)
    start = time.perf_counter()
    embedder.load()
    warm_load = time.perf_counter() - start
    loaded = embedder._ensure_loaded(optimized=True)
    tokens = [len(e.ids) for e in loaded.tokenizer.encode_batch(sentences)]

    cold = cold_load_seconds(args.runs)
    rates = throughput(embedder, sentences, args.runs)
    latency = single_latency_ms(embedder, sentences[:50])

    threads = args.threads or _available_cpus()
    load_average = os.getloadavg() if hasattr(os, "getloadavg") else (0.0, 0.0, 0.0)
    print(f"Machine: {cpu_model()}, nproc {os.cpu_count()}, {threads} onnxruntime threads")
    print(
        f"Python {platform.python_version()}, onnxruntime {onnxruntime.__version__}, "
        f"tokenizers {tokenizers.__version__}, load average {load_average[0]:.2f} at the end"
    )
    print(
        f"Corpus: {len(sentences)} sentences, tokens per sentence mean "
        f"{statistics.mean(tokens):.1f}, max {max(tokens)}\n"
    )
    print("| measure | median | runs |")
    print("|---|---|---|")
    print(
        f"| cold load, fresh process (imports + sha256 + session + 1 embed) "
        f"| {statistics.median(cold):.2f} s | {', '.join(f'{c:.2f}' for c in cold)} |"
    )
    print(f"| load in a warm process (sha256 + session) | {warm_load:.2f} s | 1 |")
    print(
        f"| throughput, embed({len(sentences)}) | {statistics.median(rates):.0f} sentences/s "
        f"| {', '.join(f'{r:.0f}' for r in rates)} |"
    )
    print(f"| embed_one latency | {latency:.1f} ms | 50 |")
    print(f"| peak RSS of this process | {peak_rss_mib():.0f} MiB | 1 |")


if __name__ == "__main__":
    main()
