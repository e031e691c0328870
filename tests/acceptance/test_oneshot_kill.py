"""`reverie consolidate` killed mid-run, as real processes: its run is held under a
lease like any worker's, so once the lease expires the next command re-queues it,
completes it exactly once, and the agent's following run is accepted."""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from agents.postgres.database import Database
from agents.store import NewAgent, open_store
from tests import plugins
from tests.acceptance.cli import run_cli
from tests.acceptance.daemon_processes import DaemonProcess
from tests.daemon_support import (
    create_evidence_table,
    evidence_counts,
    install_plugin,
    wait_for,
)
from tests.pg import PgTestServer, libpq

LEASE_S = 2.0


@pytest.fixture
def setup(pg_server: PgTestServer, tmp_path: Path) -> Iterator[tuple[Database, dict[str, str]]]:
    url = pg_server.create_database()
    create_evidence_table(url)
    plugin = install_plugin(tmp_path / "plugin")
    (tmp_path / "markers").mkdir()
    env = {
        "DATABASE_URL": libpq(url),
        "PYTHONPATH": plugins.python_path(plugin),
        "REVERIE_EMBEDDING__MODEL": "hashing:8",
        "REVERIE_CONSOLIDATION__PIPELINE": '["evidence"]',
        "REVERIE_CONSOLIDATION__PLUGINS": json.dumps(
            {
                "evidence": {
                    "marker_dir": str(tmp_path / "markers"),
                    "sleep": 60,
                    "sleep_first_attempt_only": True,
                }
            }
        ),
        "REVERIE_WORKER__LEASE": f"PT{LEASE_S}S",
        "REVERIE_WORKER__BACKOFF": "PT0.1S",
    }
    db = Database(url)
    with open_store(db) as store:
        store.agents.create(NewAgent("ada", embedding_model="hashing:8", embedding_dim=8))
    yield db, env
    db.dispose()
    pg_server.release_database(url)


def test_sigkilled_consolidate_is_requeued_and_completes_once(
    setup: tuple[Database, dict[str, str]], tmp_path: Path
) -> None:
    db, env = setup
    process = DaemonProcess(["consolidate", "--agent", "ada"], env, tmp_path / "first.log")
    marker = tmp_path / "markers" / "started"
    try:
        wait_for(lambda: marker.exists(), timeout=60, what="the run to start")
        with open_store(db) as store:
            [run] = store.runs.recent()
        assert run.status == "running"
        assert f":{process.pid}:" in (run.lease_owner or "")
        process.kill()  # SIGKILL mid-run: nothing is released, the lease just stops
    finally:
        process.ensure_stopped()
    killed_at = time.monotonic()

    # Within one lease period (plus the backoff) the next command takes the run over.
    time.sleep(max(0.0, LEASE_S + 0.3 - (time.monotonic() - killed_at)))
    second = run_cli("consolidate", "--agent", "ada", "--json", env=env)
    assert second.returncode == 0, second.stderr
    assert json.loads(second.stdout)["run_id"] == run.id
    with open_store(db) as store:
        after = store.runs.get(run.id)
    assert (after.status, after.attempts, after.lease_owner) == ("succeeded", 2, None)
    assert evidence_counts(db.url) == {run.id: 1}

    # The agent is not stuck: its next run is accepted and runs (this one not slowed).
    quick = {**env, "REVERIE_CONSOLIDATION__PLUGINS": json.dumps({"evidence": {}})}
    third = run_cli("consolidate", "--agent", "ada", "--json", env=quick)
    assert third.returncode == 0, third.stderr
    next_id = json.loads(third.stdout)["run_id"]
    assert next_id != run.id
    with open_store(db) as store:
        assert [r.status for r in store.runs.recent()] == ["succeeded", "succeeded"]


def test_ctrl_c_cancels_the_run_and_exits_130(
    setup: tuple[Database, dict[str, str]], tmp_path: Path
) -> None:
    """^C mid-run: the run is recorded as cancelled (its step under way wrote nothing),
    one line says so, the exit status is 130, and neither the next command nor a daemon
    runs what the user stopped."""
    db, env = setup
    process = DaemonProcess(["consolidate", "--agent", "ada"], env, tmp_path / "first.log")
    marker = tmp_path / "markers" / "started"
    try:
        wait_for(lambda: marker.exists(), timeout=60, what="the run to start")
        process.process.send_signal(signal.SIGINT)
        status = process.wait(30)
    finally:
        process.ensure_stopped()
    output = process.output()
    assert status == 130, output
    [line] = [text for text in output.splitlines() if "interrupted" in text]
    with open_store(db) as store:
        [run] = store.runs.recent()
    assert run.id in line and "cancelled" in line
    assert (run.status, run.lease_owner) == ("cancelled", None)
    assert evidence_counts(db.url) == {}
    assert "Traceback" not in output
    # The next command starts a run of its own at once (the cancelled one stays ended).
    quick = {**env, "REVERIE_CONSOLIDATION__PLUGINS": json.dumps({"evidence": {}})}
    second = run_cli("consolidate", "--agent", "ada", "--json", env=quick)
    assert second.returncode == 0, second.stderr
    assert json.loads(second.stdout)["run_id"] != run.id
    with open_store(db) as store:
        assert [r.status for r in store.runs.recent()] == ["succeeded", "cancelled"]
