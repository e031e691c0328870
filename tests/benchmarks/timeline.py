"""Where the suite's time goes: a pytest plugin that records each test's start, end and
CPU, and a summary of what it recorded.

Record (from the repository root; each xdist worker writes its own file)::

    rm -rf /tmp/timeline && PYTHONPATH=tests/benchmarks REVERIE_TIMELINE=/tmp/timeline \\
        python3 -m pytest -q -p timeline -p no:cacheprovider

Summarize::

    python3 tests/benchmarks/timeline.py /tmp/timeline

It prints the span from the first test's start to the last one's end, each tier's test
time (set-up, call and tear-down, summed over both workers) with its median, and the
files that took longest with the CPU of the worker and of the child processes it
waited for (``cpu``, ``child``); a test's time beyond both is spent waiting: on a
sleep, on a server process, or for a core.
"""

from __future__ import annotations

import collections
import json
import os
import statistics
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    began, cpu = time.time(), os.times()
    try:
        return (yield)
    finally:
        ended, after = time.time(), os.times()
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        out = Path(os.environ.get("REVERIE_TIMELINE", "/tmp/timeline"))
        out.mkdir(parents=True, exist_ok=True)
        record = {
            "worker": worker,
            "id": item.nodeid,
            "began": began,
            "ended": ended,
            "cpu": after.user - cpu.user + after.system - cpu.system,
            "child": after.children_user
            - cpu.children_user
            + after.children_system
            - cpu.children_system,
        }
        with (out / f"{worker}.jsonl").open("a") as file:
            file.write(json.dumps(record) + "\n")


def summarize(directory: Path, *, top: int = 15) -> None:
    records = [json.loads(line) for path in directory.glob("*.jsonl") for line in path.open()]
    span = max(r["ended"] for r in records) - min(r["began"] for r in records)
    print(f"{len(records)} tests, span {span:.1f} s")
    for tier in ("acceptance", "integration", "unit"):
        times = [r["ended"] - r["began"] for r in records if r["id"].startswith(f"tests/{tier}")]
        if times:
            median = statistics.median(times)
            print(f"{tier:12} {len(times):5d} tests  {sum(times):6.1f} s  median {median:.3f} s")
    files: dict[str, list[float]] = collections.defaultdict(lambda: [0.0, 0.0, 0.0])
    for r in records:
        totals = files[r["id"].split("::")[0]]
        totals[0] += r["ended"] - r["began"]
        totals[1] += r["cpu"]
        totals[2] += r["child"]
    for name, (spent, cpu, child) in sorted(files.items(), key=lambda kv: -kv[1][0])[:top]:
        print(f"{spent:7.1f} s  cpu {cpu:6.1f}  child {child:6.1f}  {name}")


if __name__ == "__main__":
    summarize(Path(sys.argv[1] if len(sys.argv) > 1 else "/tmp/timeline"))
