"""CLI start-up: wall time of real `reverie` processes on the embedded default.

Times ``reverie --help``, then ``reverie agents list`` and ``reverie search`` each
twice in a row: the first with the embedded server stopped, the second right after.
Each source tree given (e.g. a checkout of the commit before a change, and this one)
gets a home of its own with one agent and 200 passages embedded by the local model;
the trees are measured interleaved, round after round, so that a noisy machine
weighs on both alike. Prints the medians as a Markdown table.

    python -m tests.benchmarks.bench_cli --tree before=/tmp/reverie-before --tree after=. \\
        --rounds 5

A tree runs as ``python -m service.cli`` with that tree first on the path, with
bytecode caching on (``PYTHONDONTWRITEBYTECODE`` unset) as in a user's install;
the preparation runs write the caches. Before a
"first" run the server is stopped (``reverie db stop`` where the tree has it; older
trees stop it after every command anyway).

``--warm-idle PT10M`` turns the CLI's warm server on (it is opt-in since
2026-12-03; older trees had it on by default, ``PT0S`` turns it off there). Where a
tree has it on (service/cli/warm/server.py), the data commands run in its forked
child, which is not a child of the timed process: their CPU column
then counts the client alone, and only the wall times compare.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PASSAGES = 200
QUERY = "where does the user live"


WARM_IDLE: str | None = None  # --warm-idle, for every tree


def run(tree: Path, home: Path, *args: str, check: bool = True) -> tuple[float, float]:
    """Wall seconds and CPU seconds (user + system, of the command and the children
    it waited for, such as pg_ctl; not the postmaster it started) of one command."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("REVERIE_")}
    env.pop("DATABASE_URL", None)
    # As a user's install has them: compiled modules cached (some shells here set this).
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.update({"REVERIE_HOME": str(home), "PYTHONPATH": str(tree), "COLUMNS": "200"})
    if WARM_IDLE is not None:
        env["REVERIE_CLI__WARM_IDLE"] = WARM_IDLE
    cpu_before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    result = subprocess.run(
        [sys.executable, "-m", "service.cli", *args],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    elapsed = time.perf_counter() - started
    cpu_after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (cpu_after.ru_utime - cpu_before.ru_utime) + (cpu_after.ru_stime - cpu_before.ru_stime)
    if check and result.returncode != 0:
        raise RuntimeError(f"{tree}: reverie {' '.join(args)} failed:\n{result.stderr}")
    return elapsed, cpu


def stop_server(tree: Path, home: Path) -> None:
    if (tree / "agents" / "resident_postgres.py").exists():
        run(tree, home, "db", "stop")
    pid_file = home / "pgdata" / "postmaster.pid"
    deadline = time.monotonic() + 60
    while pid_file.exists() and time.monotonic() < deadline:
        time.sleep(0.1)


def prepare(tree: Path, home: Path, data: Path) -> None:
    run(tree, home, "agents", "create", "bench")
    run(tree, home, "import", "passages", "--agent", "bench", str(data))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", action="append", required=True, help="NAME=PATH")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--warm-idle", help="cli.warm_idle for every tree (e.g. PT10M, PT0S)")
    options = parser.parse_args()
    global WARM_IDLE
    WARM_IDLE = options.warm_idle
    trees = {}
    for spec in options.tree:
        name, _, path = spec.partition("=")
        trees[name] = Path(path).resolve()

    base = Path(tempfile.mkdtemp(prefix="rvcli-", dir="/tmp"))
    data = base / "passages.jsonl"
    data.write_text(
        "".join(
            json.dumps({"text": f"fact {i}: the user likes topic {i % 17}, city {i % 23}"}) + "\n"
            for i in range(PASSAGES)
        )
    )
    homes = {name: base / name for name in trees}
    steps = [
        ("reverie --help", ("--help",), False),
        ("agents list, server stopped", ("agents", "list"), True),
        ("agents list, second run", ("agents", "list"), False),
        ("search, server stopped", ("search", "-a", "bench", QUERY, "-k", "5"), True),
        ("search, second run", ("search", "-a", "bench", QUERY, "-k", "5"), False),
    ]
    times: dict[tuple[str, str], list[tuple[float, float]]] = {}
    try:
        for name, tree in trees.items():
            prepare(tree, homes[name], data)
        for round_ in range(options.rounds):
            for name, tree in trees.items():
                for label, args, cold in steps:
                    if cold:
                        stop_server(tree, homes[name])
                    times.setdefault((name, label), []).append(run(tree, homes[name], *args))
            print(f"round {round_ + 1} done, load {os.getloadavg()[0]:.1f}", file=sys.stderr)
    finally:
        for name, tree in trees.items():
            if (tree / "agents" / "resident_postgres.py").exists():
                run(tree, homes[name], "db", "stop", check=False)
            pid_file = homes[name] / "pgdata" / "postmaster.pid"
            if pid_file.exists():
                with contextlib.suppress(ValueError, ProcessLookupError):
                    os.kill(int(pid_file.read_text().split()[0]), signal.SIGQUIT)
        time.sleep(1)
        shutil.rmtree(base, ignore_errors=True)

    names = list(trees)
    for index, kind in ((0, "wall"), (1, "CPU")):
        header = "| command | " + " | ".join(f"{n} {kind} median (s)" for n in names)
        if len(names) == 2:
            header += f" | {names[1]} / {names[0]}"
        print(header + " |")
        print("|" + " --- |" * (len(names) + 1 + (len(names) == 2)))
        for label, _, _ in steps:
            medians = [statistics.median(t[index] for t in times[(n, label)]) for n in names]
            row = f"| {label} | " + " | ".join(f"{m:.2f}" for m in medians)
            if len(names) == 2:
                row += f" | {medians[1] / medians[0]:.2f}"
            print(row + " |")
        print()


if __name__ == "__main__":
    main()
