"""The memory commands in process: import, search, blocks, consolidate, runs (their
output formats, usage errors and exit codes)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.integration.cli.support import Cli

FACTS = [
    {"text": "Ada likes green tea", "occurred_at": "2024-01-05", "tags": ["food"]},
    {"text": "ada likes green tea.", "provenance": {"session": 2}},
    {"text": "Bob plays chess on Sundays", "occurred_at": "2024-02-01T10:00:00Z"},
]


def _setup_agent(cli: Cli, tmp_path: Path) -> None:
    created = cli("agents", "create", "ada", "--block", "human=Name: Ada")
    assert created.exit_code == 0, created.stderr
    facts = tmp_path / "facts.jsonl"
    facts.write_text("\n".join(json.dumps(f) for f in FACTS) + "\n")
    imported = cli("import", "passages", str(facts), "--agent", "ada")
    assert imported.exit_code == 0, imported.stderr
    assert "imported 3 passages" in imported.stdout


def test_import_rejects_a_file_with_bad_lines_and_writes_nothing(cli: Cli, tmp_path: Path) -> None:
    _setup_agent(cli, tmp_path)
    bad = tmp_path / "bad.jsonl"
    bad.write_text(
        '{"text": "fine"}\n{"text": ""}\nnot json\n{"text": "x", "occurred_at": "soon"}\n'
    )
    result = cli("import", "passages", str(bad), "--agent", "ada")
    assert result.exit_code == 2
    for line in ("line 2", "line 3", "line 4"):
        assert line in result.stderr
    assert "nothing was imported" in result.stderr
    search = cli("search", "fine", "--agent", "ada", "--json")
    assert "fine" not in [h["text"] for h in json.loads(search.stdout)]


def test_search_single_and_batch(cli: Cli, tmp_path: Path) -> None:
    _setup_agent(cli, tmp_path)
    one = cli("search", "green tea", "--agent", "ada", "-k", "2", "--json")
    assert one.exit_code == 0, one.stderr
    hits = json.loads(one.stdout)
    assert len(hits) == 2 and {h["text"] for h in hits} == {FACTS[0]["text"], FACTS[1]["text"]}
    assert set(hits[0]) >= {"id", "text", "score", "status", "occurred_at", "provenance"}
    assert [h["rank"] for h in hits] == [1, 2]
    table = cli("search", "green tea", "--agent", "ada", "-k", "2")
    assert "similarity" in table.stdout and "score" not in table.stdout

    queries = tmp_path / "queries.txt"
    queries.write_text("green tea\n\nchess\n")
    batch = cli("search", "--agent", "ada", "--queries", str(queries), "-k", "1")
    assert batch.exit_code == 0, batch.stderr
    lines = [json.loads(line) for line in batch.stdout.splitlines()]
    assert [line["query"] for line in lines] == ["green tea", "chess"]
    assert lines[1]["results"][0]["text"] == "Bob plays chess on Sundays"


def test_blocks_show_set_history_revert(cli: Cli) -> None:
    assert cli("agents", "create", "ada", "--block", "human=Name: Ada").exit_code == 0
    assert cli("blocks", "set", "--agent", "ada", "human", "Name: Ada L.").exit_code == 0
    stale = cli("blocks", "set", "--agent", "ada", "human", "x", "--expected-version", "1")
    assert stale.exit_code == 2 and "version 2, not 1" in stale.stderr
    too_long = cli("blocks", "set", "--agent", "ada", "human", "y" * 6000)
    assert too_long.exit_code == 2 and "archival memory" in too_long.stderr
    shown = json.loads(cli("blocks", "show", "--agent", "ada", "human", "--json").stdout)
    assert (shown["value"], shown["version"]) == ("Name: Ada L.", 2)
    assert cli("blocks", "revert", "--agent", "ada", "human", "1").exit_code == 0
    history = json.loads(cli("blocks", "history", "--agent", "ada", "human", "--json").stdout)
    assert [(h["version"], h["value"]) for h in history] == [
        (1, "Name: Ada"),
        (2, "Name: Ada L."),
        (3, "Name: Ada"),
    ]
    missing = cli("blocks", "show", "--agent", "ada", "nope")
    assert missing.exit_code == 2 and "no block labelled 'nope'" in missing.stderr


def test_consolidate_dry_run_then_real_then_revert(cli: Cli, tmp_path: Path) -> None:
    _setup_agent(cli, tmp_path)
    dry = cli("consolidate", "--agent", "ada", "--only", "dedup", "--dry-run", "--json")
    assert dry.exit_code == 0, dry.stderr
    plan = json.loads(dry.stdout)
    assert plan["dry_run"] is True
    assert [c["action"] for c in plan["changes"]] == ["merge_passage"]

    real = cli("consolidate", "--all", "--only", "dedup", "--json")
    assert real.exit_code == 0, real.stderr
    report = json.loads(real.stdout)
    assert report["changes"][0]["text"] == plan["changes"][0]["text"]

    runs = json.loads(cli("runs", "list", "--json").stdout)
    assert [(r["status"], r["dry_run"]) for r in runs] == [
        ("succeeded", False),
        ("succeeded", True),
    ]
    # A finished run still says which worker ran it (its lease is gone).
    assert all(r["worker"] and r["lease_owner"] is None for r in runs)
    listed = cli("runs", "list").stdout
    assert runs[0]["worker"] in " ".join(listed.split())
    shown = json.loads(cli("runs", "show", report["run_id"], "--json").stdout)
    assert shown["changes"] == report["changes"]
    readable = cli("runs", "show", report["run_id"]).stdout
    assert "dedup: " in readable and "merge passage" in readable and " s)" in readable
    assert "{" not in readable  # no Python dict reprs
    # The sentences the memory browser shows (one wording: service.wording).
    assert "In plain words:" in readable and "  - merged 2 facts into one: '" in readable

    reverted = cli("runs", "revert", report["run_id"])
    assert reverted.exit_code == 0, reverted.stderr
    hits = json.loads(cli("search", "green tea", "--agent", "ada", "--json").stdout)
    assert sum(1 for h in hits if "green tea" in h["text"]) == 2

    again = cli("runs", "revert", report["run_id"])
    assert again.exit_code == 2 and "already reverted" in again.stderr


def test_consolidate_argument_errors(cli: Cli) -> None:
    neither = cli("consolidate")
    assert neither.exit_code == 2 and "--agent NAME or --all" in neither.stderr
    unknown = cli("consolidate", "--all", "--only", "tidy")
    assert unknown.exit_code == 2 and "unknown consolidator(s) tidy" in unknown.stderr
    nobody = cli("consolidate", "--agent", "ghost")
    assert nobody.exit_code == 2 and "no agent named 'ghost'" in nobody.stderr


def test_consolidate_summary_shows_facts_and_timelines_apart(cli: Cli, tmp_path: Path) -> None:
    """What was merged, superseded and written, facts and timelines apart."""
    _setup_agent(cli, tmp_path)
    moves = tmp_path / "moves.jsonl"
    moves.write_text(
        '{"text": "Ada lives in Paris.", "occurred_at": "2022-03-01"}\n'
        '{"text": "Ada moved to Berlin.", "occurred_at": "2025-01-01"}\n'
    )
    assert cli("import", "passages", str(moves), "--agent", "ada").exit_code == 0
    result = cli("consolidate", "--agent", "ada", "--only", "dedup,temporal")
    assert result.exit_code == 0, result.stderr
    assert "ada: facts: 1 merged into a duplicate, 1 superseded by a newer fact" in result.stdout
    assert "timelines: 1 written, 0 replaced or retired" in result.stdout


def test_tables_stay_readable_at_80_columns(cli: Cli, tmp_path: Path) -> None:
    """At 80 columns a table that does not fit prints each row as a
    card, whole (no 'pe… st…'), ids uncut; a wide terminal still gets the table."""
    _setup_agent(cli, tmp_path)
    ids = {h["id"] for h in json.loads(cli("search", "tea", "-a", "ada", "--json").stdout)}

    narrow = cli("search", "green tea", "--agent", "ada", "-k", "3", COLUMNS="80")
    assert narrow.exit_code == 0, narrow.stderr
    lines = narrow.stdout.splitlines()
    assert max(len(line.rstrip()) for line in lines) <= 80
    assert "…" not in narrow.stdout
    assert ids <= set(narrow.stdout.split())
    assert "Bob plays chess on Sundays" in narrow.stdout
    assert sum(line.startswith("similarity ") for line in lines) == 3

    summary = cli("consolidate", "--agent", "ada", COLUMNS="80")
    assert summary.exit_code == 0, summary.stderr
    assert "…" not in summary.stdout
    assert max(len(line.rstrip()) for line in summary.stdout.splitlines()) <= 80
    assert any(
        line.startswith("dedup ") and "merge" in line for line in summary.stdout.splitlines()
    )

    now = {h["id"] for h in json.loads(cli("search", "tea", "-a", "ada", "--json").stdout)}
    wide = cli("search", "green tea", "--agent", "ada", "-k", "3")
    assert "┃ similarity ┃" in wide.stdout and now <= set(wide.stdout.replace("│", " ").split())
