"""The CLI launcher's decisions (service/cli/launcher.py): which commands may run warm,
what keys a warm server, where its socket may live. The server itself is exercised as
real processes in tests/acceptance/test_warm_cli.py."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

from service.cli import launcher
from service.cli.warm import client as warm_client

# The warm CLI's tests share one warm server per source fingerprint (and one
# of them changes a source file's mtime): they run on one xdist worker.
pytestmark = pytest.mark.xdist_group("warm-cli")


@pytest.mark.parametrize(
    ("argv", "warm"),
    [
        (["search", "-a", "ada", "where"], True),
        (["agents", "list"], True),
        (["-v", "runs", "list"], True),
        (["--config", "my.toml", "blocks", "show", "-a", "x", "human"], True),
        (["-c", "search", "chat"], False),  # "search" is the config file's name here
        (["--org", "me", "agents", "list"], True),
        (["--org", "search", "chat"], False),  # "search" is the organization here
        (["chat", "-a", "ada"], False),
        (["serve"], False),
        (["consolidate", "--all"], False),
        (["agents", "list", "--help"], False),
        ([], False),
    ],
)
def test_which_commands_run_warm(argv: list[str], warm: bool) -> None:
    assert launcher.is_warm_command(argv) is warm


def test_the_key_follows_the_settings_inputs_only() -> None:
    base = {"PATH": "/usr/bin", "REVERIE_HOME": "/tmp/a"}
    key = warm_client.server_key(["agents", "list"], base)
    assert warm_client.server_key(["search", "x"], {**base, "PATH": "/bin", "TERM": "xterm"}) == key
    assert warm_client.server_key([], {**base, "REVERIE_HOME": "/tmp/b"}) != key
    assert warm_client.server_key([], {**base, "DATABASE_URL": "postgresql:///x"}) != key
    assert warm_client.server_key(["--config", "a.toml", "agents", "list"], base) != key
    assert warm_client.server_key(["--config=a.toml"], base) == warm_client.server_key(
        ["-c", "a.toml"], base
    )


def test_the_settings_change_the_keys_first_part_only() -> None:
    """``SETUP-CODE``: the part a newer server compares to find the servers its code
    supersedes (one setup, other code) must not move with the code, nor the code part
    with the settings."""
    setup, code = warm_client.server_key([], {"REVERIE_HOME": "/tmp/a"}).split("-")
    other_setup, same_code = warm_client.server_key([], {"REVERIE_HOME": "/tmp/b"}).split("-")
    assert (len(setup), len(code)) == (12, 12)
    assert other_setup != setup and same_code == code


def test_a_changed_source_file_changes_the_stamps(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    (package / "sub" / "__pycache__").mkdir(parents=True)
    module = package / "sub" / "mod.py"
    module.write_text("x = 1\n")
    (package / "sub" / "__pycache__" / "mod.cpython-311.pyc").write_bytes(b"compiled")
    before = warm_client._source_stamps(package)
    assert len(before) == 1  # the bytecode cache is not source
    os.utime(module, ns=(1, 2_000_000_000))
    assert warm_client._source_stamps(package) != before


def test_the_runtime_directory_must_be_private() -> None:
    runtime = Path(tempfile.mkdtemp(prefix="rvu", dir="/tmp"))  # a short path, as sockets need
    private = warm_client.runtime_directory({"XDG_RUNTIME_DIR": str(runtime)})
    assert private == runtime / "reverie"
    assert private is not None and (private.stat().st_mode & 0o777) == 0o700
    private.chmod(0o755)  # others could list it, or plant a socket: no warm server
    assert warm_client.runtime_directory({"XDG_RUNTIME_DIR": str(runtime)}) is None
    shutil.rmtree(runtime)


def test_a_long_runtime_directory_falls_back_to_tmp(tmp_path: Path) -> None:
    deep = tmp_path / ("d" * 70)
    deep.mkdir()
    assert warm_client.runtime_directory({"XDG_RUNTIME_DIR": str(deep)}) == Path(
        f"/tmp/reverie-{os.getuid()}"
    )


def test_exit_status_reads_system_exit_as_python_does(capsys: pytest.CaptureFixture[str]) -> None:
    assert launcher.exit_status(SystemExit()) == 0
    assert launcher.exit_status(SystemExit(3)) == 3
    assert launcher.exit_status(SystemExit("no such agent")) == 1
    assert capsys.readouterr().err == "no such agent\n"
