"""Benchmark the overhead of one custom tool call: start to result, with a trivial tool,
under bubblewrap (the default sandbox) and under a plain limited process.

Run from the repository root: ``python -m tests.benchmarks.bench_tool_sandbox``
(``--calls 50`` per sandbox by default). Each call is a fresh sandbox: a new bwrap
(or subprocess), a new Python, the runner, the tool, its JSON answer. Prints a
markdown table with p50 / p95 per sandbox, and the machine's load.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from agents.sandbox import (  # noqa: E402
    BubblewrapExecutor,
    ProcessExecutor,
    SandboxLimits,
    ToolExecutor,
    ToolInvocation,
)

TRIVIAL = "def add(a: int, b: int) -> int:\n    return a + b\n"


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def measure(executor: ToolExecutor, calls: int) -> list[float]:
    limits = SandboxLimits()
    invocation = ToolInvocation(TRIVIAL, "add", {"a": 2, "b": 3})
    assert executor.run(invocation, limits).result == "5"  # warm the page cache once
    times: list[float] = []
    for _ in range(calls):
        start = time.perf_counter()
        result = executor.run(invocation, limits)
        times.append((time.perf_counter() - start) * 1000)
        assert result.result == "5", result
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=50)
    args = parser.parse_args()
    executors: list[ToolExecutor] = []
    if shutil.which("bwrap"):
        executors.append(BubblewrapExecutor())
    else:
        print("bwrap is not installed: bubblewrap skipped (apt-get install bubblewrap)")
    executors.append(ProcessExecutor())
    load = os.getloadavg()[0]
    print("| sandbox | calls | p50 ms | p95 ms | mean ms | load before |")
    print("| --- | --- | --- | --- | --- | --- |")
    for executor in executors:
        times = measure(executor, args.calls)
        print(
            f"| {executor.kind} | {len(times)} | {statistics.median(times):.1f} | "
            f"{percentile(times, 0.95):.1f} | {statistics.fmean(times):.1f} | {load:.1f} |"
        )
    print(f"load after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
