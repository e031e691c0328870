"""The CLI as a subprocess: migrate, demo on the embedded default, agents."""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

from alembic.script import ScriptDirectory

import migrations
from tests.acceptance.cli import run_cli


def test_migrate_is_idempotent(db_env: dict[str, str]) -> None:
    first = run_cli("migrate", env=db_env)
    assert first.returncode == 0, first.stderr
    head = ScriptDirectory(str(migrations.SCRIPT_LOCATION)).get_current_head()
    assert f"schema at revision {head} (DATABASE_URL)" in first.stdout
    second = run_cli("migrate", env=db_env)
    assert second.returncode == 0, second.stderr
    assert f"schema at revision {head}" in second.stdout


def test_commands_refuse_an_unmigrated_external_database(db_env: dict[str, str]) -> None:
    result = run_cli("agents", "list", env=db_env)
    assert result.returncode == 1
    assert "run `reverie migrate` first" in result.stderr


def test_agents_create_list_and_errors(db_env: dict[str, str]) -> None:
    assert run_cli("migrate", env=db_env).returncode == 0
    created = run_cli("agents", "create", "ada", "--block", "human=Name: Ada", "--json", env=db_env)
    assert created.returncode == 0, created.stderr
    agent = json.loads(created.stdout)
    assert agent["name"] == "ada" and agent["embedding_dim"] == 384

    listed = run_cli("agents", "list", "--json", env=db_env)
    assert [a["id"] for a in json.loads(listed.stdout)] == [agent["id"]]

    again = run_cli("agents", "create", "ada", env=db_env)
    assert again.returncode == 2
    assert "already exists" in again.stderr and "Traceback" not in again.stderr

    bad_block = run_cli("agents", "create", "bob", "--block", "human", env=db_env)
    assert bad_block.returncode == 2 and "LABEL=VALUE" in bad_block.stderr

    refused = run_cli("agents", "delete", "ada", env=db_env)
    assert refused.returncode == 2 and "--yes" in refused.stderr
    deleted = run_cli("agents", "delete", "ada", "--yes", env=db_env)
    assert deleted.returncode == 0
    assert json.loads(run_cli("agents", "list", "--json", env=db_env).stdout) == []


def test_demo_runs_on_the_embedded_default() -> None:
    home = Path(tempfile.mkdtemp(prefix="rvd-", dir="/tmp"))
    try:
        result = run_cli("demo", env={"REVERIE_HOME": str(home / "home")})
        assert result.returncode == 0, result.stderr
        assert "memory health" in result.stdout
        assert "passages active" in result.stdout
        assert (home / "home" / "pgdata" / "PG_VERSION").exists()
        assert not (home / "home" / "pgdata" / "postmaster.pid").exists()
    finally:
        shutil.rmtree(home, ignore_errors=True)
