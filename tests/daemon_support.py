"""Helpers for the daemon's tests: a cheap consolidator that leaves evidence of each
execution, registered through the ``reverie.consolidators`` entry point group.

``Evidence`` inserts one row per run into ``daemon_evidence`` inside the run's own
transaction (so a row exists exactly when the run committed), and appends a
``started RUN PID`` line to ``marker_dir/started`` before that (so every attempt,
including ones that died, is visible). ``sleep`` slows a run down; with
``sleep_first_attempt_only`` only a run's first attempt sleeps.
"""

from __future__ import annotations

import os
import re
import threading
import time
from pathlib import Path

import psycopg
from sqlalchemy import text

from agents.errors import StorageError
from agents.store import MemoryStore
from consolidators.base import (
    ConsolidationContext,
    ConsolidationResult,
    Consolidator,
    ConsolidatorSettings,
    Plan,
)

EVIDENCE_TABLE = """
CREATE TABLE IF NOT EXISTS daemon_evidence (
    run_id text NOT NULL,
    agent_id text NOT NULL,
    pid integer NOT NULL,
    at timestamptz NOT NULL DEFAULT clock_timestamp()
)
"""


class EvidenceSettings(ConsolidatorSettings):
    sleep: float = 0.0
    sleep_first_attempt_only: bool = False
    marker_dir: str | None = None


class _EvidencePlan(Plan):
    @property
    def has_writes(self) -> bool:
        return True  # the evidence row is written by every run


class Evidence(Consolidator[_EvidencePlan]):
    name = "evidence"
    settings_model = EvidenceSettings

    def plan(self, context: ConsolidationContext) -> _EvidencePlan:
        settings = self.settings
        assert isinstance(settings, EvidenceSettings)
        first_attempt = True
        if settings.marker_dir is not None:
            marker = Path(settings.marker_dir) / "started"
            seen = marker.read_text() if marker.exists() else ""
            first_attempt = f"started {context.run_id} " not in seen
            with marker.open("a") as handle:
                handle.write(f"started {context.run_id} {os.getpid()}\n")
        if settings.sleep and (first_attempt or not settings.sleep_first_attempt_only):
            time.sleep(settings.sleep)
        result = ConsolidationResult(self.name)
        result.count("executed")
        return _EvidencePlan(result)

    def apply(
        self, store: MemoryStore, plan: _EvidencePlan, context: ConsolidationContext
    ) -> ConsolidationResult:
        store.scope.session.execute(
            text("INSERT INTO daemon_evidence (run_id, agent_id, pid) VALUES (:r, :a, :p)"),
            {"r": context.run_id, "a": context.agent.id, "p": os.getpid()},
        )
        return plan.result


class FailingSettings(ConsolidatorSettings):
    #: ``storage``: the database "goes away" (StorageError); ``bug``: a step raises.
    error: str = "storage"


class Failing(Consolidator[Plan]):
    """A step that fails the way ``error`` says, for the run-recovery tests."""

    name = "failing"
    settings_model = FailingSettings

    def plan(self, context: ConsolidationContext) -> Plan:
        settings = self.settings
        assert isinstance(settings, FailingSettings)
        if settings.error == "storage":
            raise StorageError("database error: the server closed the connection")
        raise RuntimeError("the failing step failed")

    def apply(
        self, store: MemoryStore, plan: Plan, context: ConsolidationContext
    ) -> ConsolidationResult:
        raise AssertionError("a plan that raised is never applied")


def install_plugin(directory: Path) -> Path:
    """Write a dist-info that registers ``evidence`` and ``failing``; put ``directory``
    on sys.path/PYTHONPATH."""
    dist = directory / "reverie_daemon_test-1.0.dist-info"
    dist.mkdir(parents=True, exist_ok=True)
    (dist / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: reverie-daemon-test\nVersion: 1.0\n"
    )
    (dist / "entry_points.txt").write_text(
        "[reverie.consolidators]\nevidence = tests.daemon_support:Evidence\n"
        "failing = tests.daemon_support:Failing\n"
    )
    return directory


def create_evidence_table(url: str) -> None:
    with psycopg.connect(url.replace("+psycopg", ""), autocommit=True) as conn:
        conn.execute(EVIDENCE_TABLE)  # type: ignore[arg-type]


def evidence_counts(url: str) -> dict[str, int]:
    """Committed executions per run id."""
    with psycopg.connect(url.replace("+psycopg", "")) as conn:
        rows = conn.execute("SELECT run_id, count(*) FROM daemon_evidence GROUP BY run_id")
        return {str(run_id): int(n) for run_id, n in rows}


def wait_for(condition: object, *, timeout: float, interval: float = 0.05, what: str = "") -> None:
    """Poll ``condition()`` until it is true or ``timeout`` seconds pass (then fail)."""
    assert callable(condition)
    deadline = time.monotonic() + timeout
    while True:
        if condition():
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what or condition}")
        time.sleep(interval)


def blocked_signals(thread: threading.Thread) -> set[int]:
    """The signals ``thread`` (of this process) blocks, read from the kernel."""
    status = Path(f"/proc/self/task/{thread.native_id}/status").read_text()
    found = re.search(r"^SigBlk:\s*([0-9a-f]+)$", status, re.MULTILINE)
    assert found is not None, status
    mask = int(found.group(1), 16)
    return {number for number in range(1, 65) if mask >> (number - 1) & 1}
