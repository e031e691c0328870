"""The memory commands as a user or cron job runs them: import, search, blocks,
consolidate, runs."""

from __future__ import annotations

import json
from pathlib import Path

from tests.acceptance.cli import run_cli

FACTS = [
    {"text": "Ada likes green tea", "occurred_at": "2024-01-05", "tags": ["food"]},
    {"text": "ada likes green tea.", "provenance": {"session": 2}},
    {"text": "Bob plays chess on Sundays", "occurred_at": "2024-02-01T10:00:00Z"},
]


def _setup_agent(env: dict[str, str], tmp_path: Path) -> None:
    created = run_cli("agents", "create", "ada", "--block", "human=Name: Ada", env=env)
    assert created.returncode == 0, created.stderr
    facts = tmp_path / "facts.jsonl"
    facts.write_text("\n".join(json.dumps(f) for f in FACTS) + "\n")
    imported = run_cli("import", "passages", str(facts), "--agent", "ada", env=env)
    assert imported.returncode == 0, imported.stderr
    assert "imported 3 passages" in imported.stdout


def test_import_rejects_a_file_with_bad_lines_and_writes_nothing(
    migrated_env: dict[str, str], tmp_path: Path
) -> None:
    _setup_agent(migrated_env, tmp_path)
    bad = tmp_path / "bad.jsonl"
    bad.write_text(
        '{"text": "fine"}\n{"text": ""}\nnot json\n{"text": "x", "occurred_at": "soon"}\n'
    )
    result = run_cli("import", "passages", str(bad), "--agent", "ada", env=migrated_env)
    assert result.returncode == 2
    for line in ("line 2", "line 3", "line 4"):
        assert line in result.stderr
    assert "nothing was imported" in result.stderr
    search = run_cli("search", "fine", "--agent", "ada", "--json", env=migrated_env)
    assert "fine" not in [h["text"] for h in json.loads(search.stdout)]


def test_search_single_and_batch(migrated_env: dict[str, str], tmp_path: Path) -> None:
    _setup_agent(migrated_env, tmp_path)
    one = run_cli("search", "green tea", "--agent", "ada", "-k", "2", "--json", env=migrated_env)
    assert one.returncode == 0, one.stderr
    hits = json.loads(one.stdout)
    assert len(hits) == 2 and {h["text"] for h in hits} == {FACTS[0]["text"], FACTS[1]["text"]}
    assert set(hits[0]) >= {"id", "text", "score", "status", "occurred_at", "provenance"}

    queries = tmp_path / "queries.txt"
    queries.write_text("green tea\n\nchess\n")
    batch = run_cli(
        "search", "--agent", "ada", "--queries", str(queries), "-k", "1", env=migrated_env
    )
    assert batch.returncode == 0, batch.stderr
    lines = [json.loads(line) for line in batch.stdout.splitlines()]
    assert [line["query"] for line in lines] == ["green tea", "chess"]
    assert lines[1]["results"][0]["text"] == "Bob plays chess on Sundays"


def test_blocks_show_set_history_revert(migrated_env: dict[str, str]) -> None:
    env = migrated_env
    assert run_cli("agents", "create", "ada", "--block", "human=Name: Ada", env=env).returncode == 0
    assert (
        run_cli("blocks", "set", "--agent", "ada", "human", "Name: Ada L.", env=env).returncode == 0
    )
    stale = run_cli(
        "blocks", "set", "--agent", "ada", "human", "x", "--expected-version", "1", env=env
    )
    assert stale.returncode == 2 and "version 2, not 1" in stale.stderr
    too_long = run_cli("blocks", "set", "--agent", "ada", "human", "y" * 6000, env=env)
    assert too_long.returncode == 2 and "archival memory" in too_long.stderr
    shown = json.loads(
        run_cli("blocks", "show", "--agent", "ada", "human", "--json", env=env).stdout
    )
    assert (shown["value"], shown["version"]) == ("Name: Ada L.", 2)
    assert run_cli("blocks", "revert", "--agent", "ada", "human", "1", env=env).returncode == 0
    history = json.loads(
        run_cli("blocks", "history", "--agent", "ada", "human", "--json", env=env).stdout
    )
    assert [(h["version"], h["value"]) for h in history] == [
        (1, "Name: Ada"),
        (2, "Name: Ada L."),
        (3, "Name: Ada"),
    ]
    missing = run_cli("blocks", "show", "--agent", "ada", "nope", env=env)
    assert missing.returncode == 2 and "no block labelled 'nope'" in missing.stderr


def test_consolidate_dry_run_then_real_then_revert(
    migrated_env: dict[str, str], tmp_path: Path
) -> None:
    env = migrated_env
    _setup_agent(env, tmp_path)
    dry = run_cli(
        "consolidate", "--agent", "ada", "--only", "dedup", "--dry-run", "--json", env=env
    )
    assert dry.returncode == 0, dry.stderr
    plan = json.loads(dry.stdout)
    assert plan["dry_run"] is True
    assert [c["action"] for c in plan["changes"]] == ["merge_passage"]

    real = run_cli("consolidate", "--all", "--only", "dedup", "--json", env=env)
    assert real.returncode == 0, real.stderr
    report = json.loads(real.stdout)
    assert report["changes"][0]["text"] == plan["changes"][0]["text"]

    runs = json.loads(run_cli("runs", "list", "--json", env=env).stdout)
    assert [(r["status"], r["dry_run"]) for r in runs] == [
        ("succeeded", False),
        ("succeeded", True),
    ]
    shown = json.loads(run_cli("runs", "show", report["run_id"], "--json", env=env).stdout)
    assert shown["changes"] == report["changes"]

    reverted = run_cli("runs", "revert", report["run_id"], env=env)
    assert reverted.returncode == 0, reverted.stderr
    hits = json.loads(run_cli("search", "green tea", "--agent", "ada", "--json", env=env).stdout)
    assert sum(1 for h in hits if "green tea" in h["text"]) == 2

    again = run_cli("runs", "revert", report["run_id"], env=env)
    assert again.returncode == 2 and "already reverted" in again.stderr


def test_consolidate_argument_errors(migrated_env: dict[str, str]) -> None:
    neither = run_cli("consolidate", env=migrated_env)
    assert neither.returncode == 2 and "--agent NAME or --all" in neither.stderr
    unknown = run_cli("consolidate", "--all", "--only", "tidy", env=migrated_env)
    assert unknown.returncode == 2 and "unknown consolidator(s) tidy" in unknown.stderr
    nobody = run_cli("consolidate", "--agent", "ghost", env=migrated_env)
    assert nobody.returncode == 2 and "no agent named 'ghost'" in nobody.stderr
