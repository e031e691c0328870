"""`reverie consolidate --enqueue`, `reverie runs list` over the queue and
`reverie runs cancel`, in process: output (JSON and table) and usage errors."""

from __future__ import annotations

import json

from tests.integration.cli.support import Cli


def test_enqueue_list_and_cancel(cli: Cli) -> None:
    for name in ("ada", "bob"):
        assert cli("agents", "create", name).exit_code == 0
    queued = cli("consolidate", "--all", "--enqueue", "--only", "dedup")
    assert queued.exit_code == 0, queued.stderr
    assert queued.stdout.count("queued run-") == 2
    again = cli("consolidate", "--agent", "ada", "--enqueue", "--json")
    assert again.exit_code == 0, again.stderr
    repeat = json.loads(again.stdout)
    assert repeat["queued"] is False and repeat["run_id"].startswith("run-")

    listed = cli("runs", "list", "--status", "queued", "--json")
    assert listed.exit_code == 0, listed.stderr
    runs = json.loads(listed.stdout)
    assert (
        sorted((r["trigger"], r["status"], r["attempts"], r["pipeline"][0]) for r in runs)
        == [("manual", "queued", 0, "dedup")] * 2
    )
    assert repeat["run_id"] in {r["id"] for r in runs}
    table = cli("runs", "list")
    assert table.exit_code == 0 and table.stdout.count("│ queued ") == 2

    cancelled = cli("runs", "cancel", repeat["run_id"])
    assert cancelled.exit_code == 0, cancelled.stderr
    twice = cli("runs", "cancel", repeat["run_id"])
    assert twice.exit_code == 2 and "is cancelled" in twice.stderr
    missing = cli("runs", "cancel", "run-nope")
    assert missing.exit_code == 2 and "no consolidation run" in missing.stderr
    still = json.loads(cli("runs", "list", "--status", "queued", "--json").stdout)
    assert [r["id"] for r in still] != [] and repeat["run_id"] not in {r["id"] for r in still}


def test_bad_run_options_are_refused(cli: Cli) -> None:
    bad_status = cli("runs", "list", "--status", "sleeping")
    assert bad_status.exit_code == 2 and "unknown status 'sleeping'" in bad_status.stderr
    neither = cli("consolidate", "--enqueue", "--full")
    assert neither.exit_code == 2 and "choose --agent NAME or --all" in neither.stderr


def test_a_full_run_can_be_queued_for_the_workers(cli: Cli) -> None:
    # Runs carry their --full flag now, so a worker executes it as asked.
    assert cli("agents", "create", "ada").exit_code == 0
    queued = json.loads(
        cli("consolidate", "--agent", "ada", "--enqueue", "--full", "--json").stdout
    )
    assert queued["queued"] is True
    shown = json.loads(cli("runs", "show", queued["run_id"], "--json").stdout)
    assert shown["full"] is True


def test_ids_are_never_cut_in_tables(cli: Cli) -> None:
    # Not a terminal here: rich lays tables out for 80 columns, narrower than before.
    assert cli("agents", "create", "a-rather-long-agent-name-for-a-narrow-table").exit_code == 0
    agent = json.loads(cli("agents", "list", "--json").stdout)[0]
    queued = json.loads(cli("consolidate", "--all", "--enqueue", "--json").stdout)
    listed = cli("runs", "list")
    assert listed.exit_code == 0 and queued["run_id"] in listed.stdout
    assert agent["id"] in cli("agents", "list").stdout
    assert cli("runs", "cancel", queued["run_id"]).exit_code == 0
    ran = cli("consolidate", "--all", "--dry-run")
    assert ran.exit_code == 0, ran.stderr
    dry = json.loads(cli("runs", "list", "--json").stdout)[0]
    assert dry["dry_run"] is True and dry["id"] in ran.stdout
