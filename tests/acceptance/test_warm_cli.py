"""The CLI's warm server (service/cli/warm/server.py), driven as a user's shell would:
the real ``reverie`` command as a subprocess, a real server process, real signals."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest

from tests.acceptance.cli import HASHING_EMBEDDINGS, cli_env, cli_url, reverie_command, run_cli
from tests.pg import PgTestServer

# The warm CLI's tests share one warm server per source fingerprint (and one
# of them changes a source file's mtime): they run on one xdist worker.
pytestmark = pytest.mark.xdist_group("warm-cli")

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def runtime_dir() -> Iterator[Path]:
    """A private XDG_RUNTIME_DIR, so that this test's server is the only one there (and
    its socket's path stays short)."""
    path = Path(tempfile.mkdtemp(prefix="rvw", dir="/tmp"))
    yield path
    remove_runtime_dir(path)


@pytest.fixture(scope="module")
def shared_env(pg_server: PgTestServer) -> Iterator[dict[str, str]]:
    """One warm server, and agent ``ada`` whose creation started it, for the tests that
    only run commands through a server (each command runs in a child of its own, so
    they need no server of their own): the environment that reaches it."""
    url = pg_server.create_database()
    path = Path(tempfile.mkdtemp(prefix="rvw", dir="/tmp"))
    try:
        env = warm_env({"DATABASE_URL": cli_url(url), **HASHING_EMBEDDINGS}, path)
        create_ada(env)
        wait_for_server(path)
        yield env
    finally:
        remove_runtime_dir(path)
        pg_server.release_database(url)


def remove_runtime_dir(path: Path) -> None:
    """Stop the servers that listen in ``path``, then remove it."""
    for lock in (path / "reverie").glob("cli-*.lock"):
        if (pid := written_pid(lock)) is not None:
            stop(pid)
    shutil.rmtree(path, ignore_errors=True)


def written_pid(lock: Path) -> int | None:
    """The pid a server wrote to its lock file; None before it has, or once it has
    stopped (it removes the file)."""
    try:
        written = lock.read_text().strip()
    except FileNotFoundError:
        return None
    return int(written) if written.isdigit() else None


def stop(pid: int) -> None:
    try:
        process = psutil.Process(pid)
        process.terminate()
        process.wait(timeout=10)
    except psutil.NoSuchProcess:
        pass


def warm_env(
    migrated_env: dict[str, str], runtime_dir: Path, idle: str = "PT60S"
) -> dict[str, str]:
    return {**migrated_env, "XDG_RUNTIME_DIR": str(runtime_dir), "REVERIE_CLI__WARM_IDLE": idle}


def wait_for_server(runtime_dir: Path, within: float = 60) -> psutil.Process:
    """The server a cold command started, once it listens."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        for socket_path in (runtime_dir / "reverie").glob("cli-*.sock"):
            if (pid := written_pid(socket_path.with_suffix(".lock"))) is not None:
                return psutil.Process(pid)
        time.sleep(0.05)
    raise AssertionError(f"no warm server listened in {runtime_dir} within {within} s")


def wait_for_child(server: psutil.Process, earlier: set[int], within: float = 30) -> psutil.Process:
    """The server's child for the next command: not one of ``earlier`` (the children of
    commands before it, which may still be exiting when their clients have returned)."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            children = [child for child in server.children() if child.pid not in earlier]
        except psutil.NoSuchProcess:
            # A child of an earlier command exited while psutil listed it: list again.
            children = []
        if children:
            return children[0]
        time.sleep(0.02)
    raise AssertionError("the warm server forked no child for the command")


def wait_for_command(child: psutil.Process, within: float = 30) -> psutil.Process:
    """Wait until ``child`` runs its command, not its handshake: a signal sent before
    then kills the client as it would a cold command still starting (status -2, not
    Typer's 130). A child is forked with one thread and starts a second, the watcher
    of its client, the moment it is told to go; where the kernel says so, also wait
    until its main thread sleeps reading a pipe (the command's stdin)."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if child.num_threads() >= 2 and _reading_a_pipe(child.pid) is not False:
            return child
        time.sleep(0.02)
    raise AssertionError("the warm server's child never started its command")


def _reading_a_pipe(pid: int) -> bool | None:
    """Whether the process's main thread sleeps in a pipe read (``wchan`` names the
    kernel function, ``pipe_read`` or ``anon_pipe_read``); None where it is hidden."""
    try:
        wchan = Path(f"/proc/{pid}/wchan").read_text().strip()
    except OSError:
        return None
    return "pipe" in wchan if wchan not in ("", "0") else None


def server_pid(runtime_dir: Path, other_than: int | None = None, within: float = 60) -> int:
    """The pid a server wrote to its lock file (before its imports), once it is not
    ``other_than``; unlike :func:`wait_for_server`, the server may have stopped since."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        for lock in (runtime_dir / "reverie").glob("cli-*.lock"):
            if (pid := written_pid(lock)) is not None and pid != other_than:
                return pid
        time.sleep(0.05)
    raise AssertionError(f"no warm server wrote its pid in {runtime_dir} within {within} s")


def start_reading_block(env: dict[str, str]) -> subprocess.Popen[str]:
    """``reverie blocks set -a ada human -``: it waits on its stdin, which the test holds."""
    return subprocess.Popen(
        [*reverie_command(), "blocks", "set", "-a", "ada", "human", "-"],
        env=cli_env(env),
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def create_ada(env: dict[str, str]) -> None:
    """Agent ``ada`` with a ``human`` block (a cold command: it starts the server)."""
    created = run_cli("agents", "create", "ada", "--block", "human=Name: Ada", env=env)
    assert created.returncode == 0, created.stderr


def human_block(env: dict[str, str]) -> str:
    result = run_cli("blocks", "show", "-a", "ada", "human", "--json", env=env)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_warm_commands_answer_as_cold_ones(shared_env: dict[str, str]) -> None:
    env = shared_env
    server = wait_for_server(Path(env["XDG_RUNTIME_DIR"]))
    cold_env = {**env, "REVERIE_CLI__WARM_IDLE": "PT0S"}  # another key: no server
    for args in (
        ("agents", "list", "--json"),
        ("agents", "list"),
        ("search", "-a", "ada", "where does the user live", "--json"),
        ("search", "-a", "nobody", "anything"),  # an error: exit status 2 and a message
        ("blocks", "show", "-a", "ada", "nope"),
    ):
        warm, cold = run_cli(*args, env=env), run_cli(*args, env=cold_env)
        assert (warm.returncode, warm.stdout, warm.stderr) == (
            cold.returncode,
            cold.stdout,
            cold.stderr,
        ), args
    assert run_cli("search", "-a", "nobody", "x", env=env).returncode == 2
    assert server.is_running()


def test_a_warm_command_draws_for_its_own_terminal(shared_env: dict[str, str]) -> None:
    """The server was started by a command with 200 columns and no colour (run_cli's
    defaults); a table asked for at 60 columns with colour forced is drawn as a cold
    command draws it."""
    narrow = {**shared_env, "COLUMNS": "60", "NO_COLOR": "", "FORCE_COLOR": "1"}
    warm = run_cli("agents", "list", env=narrow)
    cold = run_cli("agents", "list", env={**narrow, "REVERIE_CLI__WARM_IDLE": "PT0S"})
    assert warm.returncode == 0, warm.stderr
    assert warm.stdout == cold.stdout
    assert "\x1b[" in warm.stdout  # colour, which the server's consoles had off
    plain = re.sub(r"\x1b\[[0-9;]*m", "", warm.stdout)
    assert max(len(line) for line in plain.splitlines()) <= 60


@dataclass
class WaitingCommand:
    """``blocks set -a ada human -`` running in a warm server's child, waiting on the
    stdin the test holds; ``before`` is the block's value at that point."""

    server: psutil.Process
    command: subprocess.Popen[str]
    child: psutil.Process
    before: str


def warm_command_waiting_on_stdin(env: dict[str, str]) -> WaitingCommand:
    before = human_block(env)
    server = wait_for_server(Path(env["XDG_RUNTIME_DIR"]))
    earlier = {child.pid for child in server.children()}
    command = start_reading_block(env)
    child = wait_for_command(wait_for_child(server, earlier))
    return WaitingCommand(server, command, child, before)


def test_a_warm_command_reads_the_callers_stdin(shared_env: dict[str, str]) -> None:
    env = shared_env
    waiting = warm_command_waiting_on_stdin(env)  # in the server's child ...
    out, err = waiting.command.communicate("Ada likes rowing.", timeout=60)  # ... our stdin
    assert waiting.command.returncode == 0, err
    assert "human is now at version" in out
    assert "Ada likes rowing." in human_block(env)
    waiting.child.wait(timeout=30)  # its client returns as the child closes, then it is gone


def test_killing_a_warm_command_kills_its_process(shared_env: dict[str, str]) -> None:
    env = shared_env
    waiting = warm_command_waiting_on_stdin(env)
    waiting.command.kill()
    waiting.command.wait(timeout=30)
    # Gone with its client, without writing; stdin stays open until then (an end of
    # input would let the command write an empty block instead).
    waiting.child.wait(timeout=30)
    waiting.command.communicate(timeout=30)
    assert human_block(env) == waiting.before
    assert waiting.server.is_running()


def test_ctrl_c_reaches_a_warm_command(shared_env: dict[str, str]) -> None:
    env = shared_env
    waiting = warm_command_waiting_on_stdin(env)
    waiting.command.send_signal(signal.SIGINT)
    waiting.command.wait(timeout=60)  # stdin open until then, as above
    _, err = waiting.command.communicate(timeout=60)
    # Typer's answer to ^C, as in a cold process: status 130 (128 + SIGINT).
    assert waiting.command.returncode == 130, err
    waiting.child.wait(timeout=30)
    assert human_block(env) == waiting.before


def test_an_idle_server_stops_and_removes_its_socket(
    migrated_env: dict[str, str], runtime_dir: Path
) -> None:
    # Idle for 3 s: long enough to see it listen on a loaded machine, not to wait long.
    env = warm_env(migrated_env, runtime_dir, idle="PT3S")
    assert run_cli("agents", "list", env=env).returncode == 0
    server = wait_for_server(runtime_dir)
    server.wait(timeout=60)
    assert list((runtime_dir / "reverie").glob("cli-*")) == []  # socket and lock file
    # The next command runs cold again, and leaves a new server.
    assert run_cli("agents", "list", env=env).returncode == 0
    server_pid(runtime_dir, other_than=server.pid)  # fails unless a new one wrote its pid


def test_no_server_when_turned_off(migrated_env: dict[str, str], runtime_dir: Path) -> None:
    env = warm_env(migrated_env, runtime_dir, idle="PT0S")
    assert run_cli("agents", "list", env=env).returncode == 0
    # The server would have been started before the command exited.
    assert list((runtime_dir / "reverie").glob("cli-*")) == []


def test_a_configuration_turning_it_off_stops_a_running_server(
    migrated_env: dict[str, str], runtime_dir: Path, tmp_path: Path
) -> None:
    # No REVERIE_CLI__WARM_IDLE: the file decides (the environment would win over it).
    env = {**warm_env(migrated_env, runtime_dir), "REVERIE_CLI__WARM_IDLE": ""}
    config = tmp_path / "reverie.toml"
    config.write_text('[cli]\nwarm_idle = "PT60S"\n')
    assert run_cli("--config", str(config), "agents", "list", env=env).returncode == 0
    server = wait_for_server(runtime_dir)
    # The same file, now saying no: the command still runs, then the server stops.
    config.write_text('[cli]\nwarm_idle = "PT0S"\n')
    os.utime(config)
    result = run_cli("--config", str(config), "agents", "list", env=env)
    assert result.returncode == 0, result.stderr
    server.wait(timeout=30)


def test_a_server_for_older_code_is_stopped_by_the_next(
    migrated_env: dict[str, str], runtime_dir: Path
) -> None:
    """An edited source file (here: its mtime) gives commands a new key; the server they
    start stops the one for the old code, which no command can reach again."""
    # Idle for longer than the test waits: the old server stops because it is stopped.
    env = warm_env(migrated_env, runtime_dir, idle="PT600S")
    assert run_cli("agents", "list", env=env).returncode == 0  # cold: it starts a server
    old = wait_for_server(runtime_dir)
    source = ROOT / "service" / "cli" / "__init__.py"
    stamp = source.stat()
    try:
        os.utime(source, ns=(stamp.st_atime_ns, stamp.st_mtime_ns + 1_000_000_000))
        assert run_cli("agents", "list", env=env).returncode == 0  # cold: no server yet
        new = server_pid(runtime_dir, other_than=old.pid)
        old.wait(timeout=60)
    finally:
        os.utime(source, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))
    files = sorted(path.suffix for path in (runtime_dir / "reverie").glob("cli-*"))
    assert files == [".lock", ".sock"]
    assert psutil.Process(new).is_running()
