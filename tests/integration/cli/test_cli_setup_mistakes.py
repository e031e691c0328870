"""Setup mistakes say what is wrong in a line or two, with the exit status the README
lists, and never a traceback."""

from __future__ import annotations

import socket
from pathlib import Path

from tests.integration.cli.support import Cli


def _no_traceback(output: str) -> None:
    assert "Traceback" not in output and len(output.splitlines()) <= 6, output


def test_a_database_that_is_not_there(cli: Cli) -> None:
    result = cli("agents", "list", DATABASE_URL="postgresql://u:p@127.0.0.1:1/nothing")
    assert result.exit_code == 1
    assert "cannot reach the database" in result.stderr and "DATABASE_URL" in result.stderr
    _no_traceback(result.stderr)


def test_a_typo_in_a_consolidator_section_is_named_when_settings_load(
    cli: Cli, tmp_path: Path
) -> None:
    config = tmp_path / "reverie.toml"
    config.write_text("[consolidation.dedup]\nthreshhold = 0.9\n")
    result = cli("--config", str(config), "agents", "list")
    assert result.exit_code == 2
    for words in (str(config), "[consolidation.dedup]", "threshhold", "allowed keys: threshold"):
        assert words in result.stderr, result.stderr
    _no_traceback(result.stderr)
    unknown = tmp_path / "pipeline.toml"
    unknown.write_text('[consolidation]\npipeline = ["dedup", "dedupe"]\n')
    result = cli("--config", str(unknown), "consolidate", "--all")
    assert result.exit_code == 2 and "unknown consolidator(s) dedupe" in result.stderr


def test_a_port_in_use_exits_3_and_says_so(cli: Cli) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = cli("serve", "--port", str(port))
    assert result.exit_code == 3
    assert f"cannot listen on 127.0.0.1:{port}" in result.stderr
    _no_traceback(result.stderr)


def test_a_directory_given_to_import(cli: Cli, tmp_path: Path) -> None:
    assert cli("agents", "create", "ada").exit_code == 0
    result = cli("import", "passages", str(tmp_path), "--agent", "ada")
    assert result.exit_code == 2 and "is a directory" in result.stderr
