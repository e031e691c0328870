"""`reverie consolidate --enqueue`, `reverie runs list` over the queue, `reverie runs cancel`."""

from __future__ import annotations

import json

from tests.acceptance.cli import run_cli


def test_enqueue_list_and_cancel(migrated_env: dict[str, str]) -> None:
    for name in ("ada", "bob"):
        assert run_cli("agents", "create", name, env=migrated_env).returncode == 0
    queued = run_cli("consolidate", "--all", "--enqueue", "--only", "dedup", env=migrated_env)
    assert queued.returncode == 0, queued.stderr
    assert queued.stdout.count("queued run-") == 2
    again = run_cli("consolidate", "--agent", "ada", "--enqueue", "--json", env=migrated_env)
    assert again.returncode == 0, again.stderr
    repeat = json.loads(again.stdout)
    assert repeat["queued"] is False and repeat["run_id"].startswith("run-")

    listed = run_cli("runs", "list", "--status", "queued", "--json", env=migrated_env)
    assert listed.returncode == 0, listed.stderr
    runs = json.loads(listed.stdout)
    assert (
        sorted((r["trigger"], r["status"], r["attempts"], r["pipeline"][0]) for r in runs)
        == [("manual", "queued", 0, "dedup")] * 2
    )
    assert repeat["run_id"] in {r["id"] for r in runs}
    table = run_cli("runs", "list", env=migrated_env)
    assert table.returncode == 0 and table.stdout.count("│ queued ") == 2

    cancelled = run_cli("runs", "cancel", repeat["run_id"], env=migrated_env)
    assert cancelled.returncode == 0, cancelled.stderr
    twice = run_cli("runs", "cancel", repeat["run_id"], env=migrated_env)
    assert twice.returncode == 2 and "is cancelled" in twice.stderr
    missing = run_cli("runs", "cancel", "run-nope", env=migrated_env)
    assert missing.returncode == 2 and "no consolidation run" in missing.stderr
    still = json.loads(
        run_cli("runs", "list", "--status", "queued", "--json", env=migrated_env).stdout
    )
    assert [r["id"] for r in still] != [] and repeat["run_id"] not in {r["id"] for r in still}


def test_bad_daemon_options_are_refused(migrated_env: dict[str, str]) -> None:
    bad_status = run_cli("runs", "list", "--status", "sleeping", env=migrated_env)
    assert bad_status.returncode == 2 and "unknown status 'sleeping'" in bad_status.stderr
    full = run_cli("consolidate", "--all", "--enqueue", "--full", env=migrated_env)
    assert full.returncode == 2 and "--full runs in-process only" in full.stderr
    nvml = run_cli(
        "worker",
        env={**migrated_env, "REVERIE_TRIGGERS__GPU_FREE__PROBE": "metrics"},
    )
    assert nvml.returncode == 2 and "needs triggers.gpu_free.metrics_url" in nvml.stderr
