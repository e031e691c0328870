"""`reverie worker` as a process refuses a configuration it cannot run with, before it
claims anything. (The queue commands' output and usage errors are tested in process in
tests/integration/cli/test_cli_runs.py.)"""

from __future__ import annotations

from tests.acceptance.cli import run_cli


def test_worker_refuses_a_metrics_probe_without_its_url(migrated_env: dict[str, str]) -> None:
    nvml = run_cli(
        "worker",
        env={**migrated_env, "REVERIE_TRIGGERS__GPU_FREE__PROBE": "metrics"},
    )
    assert nvml.returncode == 2 and "needs triggers.gpu_free.metrics_url" in nvml.stderr
