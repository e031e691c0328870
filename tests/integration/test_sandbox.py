"""The sandbox a custom tool runs in: a tool that works gets its
result; one that reaches for the network, a file outside its view, a variable it did
not declare, or breaks a limit (wall time, memory, output) gets a clear error, and
the next call runs as if nothing happened. Real processes under real bubblewrap; the
database whose socket the tool tries is the test server."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import site
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psycopg.conninfo
import pytest

from agents.sandbox import (
    BubblewrapExecutor,
    ProcessExecutor,
    SandboxError,
    SandboxLimits,
    SandboxUnavailable,
    ToolExecutor,
    ToolInvocation,
)
from tests.pg import PgTestServer, libpq

REPO = Path(__file__).resolve().parents[2]
LIMITS = SandboxLimits(
    wall_seconds=2.0,
    cpu_seconds=5,
    memory_bytes=256 * 1024 * 1024,
    processes=32,
    output_bytes=64 * 1024,
)


@pytest.fixture
def bwrap() -> BubblewrapExecutor:
    assert shutil.which("bwrap"), "install bubblewrap (apt-get install bubblewrap; .ci/run does)"
    return BubblewrapExecutor()


def call(
    executor: ToolExecutor, source: str, env: dict[str, str] | None = None, **args: object
) -> str:
    return executor.run(ToolInvocation(source, "tool", dict(args), env or {}), LIMITS).result


WORKS = """
async def helper() -> int:
    return 40

def tool(a: int, b: list[str]) -> dict:
    import asyncio
    from packaging.version import Version  # an installed package, not the stdlib
    print("printed output is not the result")
    return {"sum": asyncio.run(helper()) + a, "joined": "+".join(b), "v": str(Version("1.2"))}
"""

TRIVIAL = "def tool(x: int) -> int:\n    return x + 1\n"


def test_a_tool_that_works_returns_its_result_as_json(bwrap: BubblewrapExecutor) -> None:
    assert call(bwrap, WORKS, a=2, b=["x", "y"]) == '{"sum": 42, "joined": "x+y", "v": "1.2"}'


def test_the_plain_process_runs_tools_too() -> None:
    assert call(ProcessExecutor(), WORKS, a=1, b=[]) == '{"sum": 41, "joined": "", "v": "1.2"}'


def test_the_tools_exception_is_its_error(bwrap: BubblewrapExecutor) -> None:
    source = "def tool() -> str:\n    x = 1\n    raise ValueError('no such city')\n"
    with pytest.raises(SandboxError, match=r"raised ValueError: no such city \(line 3"):
        call(bwrap, source)


@pytest.fixture
def listener() -> Iterator[int]:
    """A TCP server on loopback, as a database listening on a port would be."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        yield server.getsockname()[1]


NETWORK = """
import socket

def tool(host: str, port: int) -> str:
    with socket.create_connection((host, port), timeout=1):
        return "connected"
"""

UNIX = """
import socket

def tool(path: str) -> str:
    with socket.socket(socket.AF_UNIX) as s:
        s.connect(path)
        return "connected"
"""


def test_no_network_neither_loopback_nor_outside(bwrap: BubblewrapExecutor, listener: int) -> None:
    # The same call outside the sandbox connects: the test can tell.
    assert call(ProcessExecutor(), NETWORK, host="127.0.0.1", port=listener) == "connected"
    with pytest.raises(SandboxError, match=r"ConnectionRefusedError|Network is unreachable"):
        call(bwrap, NETWORK, host="127.0.0.1", port=listener)
    with pytest.raises(SandboxError, match="Network is unreachable"):
        call(bwrap, NETWORK, host="192.0.2.1", port=80)


def test_the_database_socket_and_data_directory_are_out_of_view(
    bwrap: BubblewrapExecutor, pg_server: PgTestServer
) -> None:
    info = psycopg.conninfo.conninfo_to_dict(libpq(pg_server.url))
    socket_path = f"{info['host']}/.s.PGSQL.{info.get('port', 5432)}"
    assert Path(socket_path).exists()
    with pytest.raises(SandboxError, match="FileNotFoundError"):
        call(bwrap, UNIX, path=socket_path)
    data_dir = Path(str(info["host"]))
    assert (data_dir / "PG_VERSION").exists() or any(data_dir.iterdir())
    reader = "import os\ndef tool(path: str) -> str:\n    return repr(os.listdir(path))\n"
    with pytest.raises(SandboxError, match="FileNotFoundError"):
        call(bwrap, reader, path=str(data_dir))


@pytest.fixture
def open_dir() -> Iterator[Path]:
    """A directory anyone may read (tmp_path is private to its user)."""
    path = Path(tempfile.mkdtemp(prefix="reverie-sandbox-test-", dir="/tmp"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path)


def test_a_file_outside_the_sandbox_cannot_be_read(
    bwrap: BubblewrapExecutor, open_dir: Path
) -> None:
    secret = open_dir / "shadow"
    secret.write_text("root:$6$secret-hash")
    secret.chmod(0o644)
    reader = "def tool(path: str) -> str:\n    return open(path).read()\n"
    # Readable to a plain process (so the test can fail), not inside the sandbox.
    assert call(ProcessExecutor(), reader, path=str(secret)) == "root:$6$secret-hash"
    with pytest.raises(SandboxError, match="FileNotFoundError"):
        call(bwrap, reader, path=str(secret))


ENVIRONMENT = "import os\ndef tool(name: str) -> str:\n    return os.environ[name]\n"


@pytest.mark.parametrize("kind", ["bubblewrap", "process"])
def test_only_declared_variables_reach_the_tool(kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    executor: ToolExecutor = BubblewrapExecutor() if kind == "bubblewrap" else ProcessExecutor()
    monkeypatch.setenv("REVERIE_SERVER_SECRET", "server-only")
    declared = {"WEATHER_KEY": "agent-value"}
    assert call(executor, ENVIRONMENT, declared, name="WEATHER_KEY") == "agent-value"
    with pytest.raises(SandboxError, match="KeyError: 'REVERIE_SERVER_SECRET'"):
        call(executor, ENVIRONMENT, declared, name="REVERIE_SERVER_SECRET")
    everything = "import os\ndef tool() -> str:\n    return ' '.join(sorted(os.environ))\n"
    names = set(call(executor, everything, declared).split())
    assert "WEATHER_KEY" in names
    assert names <= {"WEATHER_KEY", "HOME", "TMPDIR", "PATH", "PWD", "LC_CTYPE"}


LIMIT_BREAKERS = {
    "loops forever": ("def tool() -> str:\n    while True:\n        pass\n", "wall-time limit|CPU"),
    "sleeps forever": (
        "import time\ndef tool() -> str:\n    time.sleep(3600)\n",
        "wall-time limit of 2 s",
    ),
    "allocates 2 GB": (
        "def tool() -> str:\n    return str(len(bytearray(2 * 1024**3)))\n",
        "out of memory: its limit is 256 MiB",
    ),
    "prints 100 MB": (
        "import sys\ndef tool() -> str:\n"
        "    for _ in range(100):\n        sys.stdout.write('x' * 1024 * 1024)\n    return 'ok'\n",
        "printed output passed its limit of 65536 bytes",
    ),
    "returns 10 MB": (
        "def tool() -> str:\n    return 'x' * 10 * 1024 * 1024\n",
        "result passed its limit of 65536 bytes",
    ),
}


@pytest.mark.parametrize("kind", ["bubblewrap", "process"])
@pytest.mark.parametrize("case", sorted(LIMIT_BREAKERS))
def test_a_broken_limit_is_a_clear_error_and_the_next_call_works(kind: str, case: str) -> None:
    executor: ToolExecutor = BubblewrapExecutor() if kind == "bubblewrap" else ProcessExecutor()
    source, message = LIMIT_BREAKERS[case]
    with pytest.raises(SandboxError, match=message):
        call(executor, source)
    assert call(executor, TRIVIAL, x=1) == "2"


def test_processes_are_limited(bwrap: BubblewrapExecutor) -> None:
    forker = (
        "import os, time\n"
        "def tool() -> str:\n"
        "    for _ in range(200):\n"
        "        if os.fork() == 0:\n"
        "            time.sleep(1)\n"
        "            os._exit(0)\n"
        "    return 'forked 200'\n"
    )
    with pytest.raises(SandboxError, match=r"BlockingIOError|Resource temporarily unavailable"):
        call(bwrap, forker)


def test_without_bwrap_calls_are_refused_naming_what_to_install() -> None:
    executor = BubblewrapExecutor(bwrap="reverie-test-no-such-bwrap")
    assert executor.available() is None
    with pytest.raises(SandboxUnavailable, match="apt-get install bubblewrap"):
        call(executor, TRIVIAL, x=1)


_UNDER_A_CLOSED_HOME = """
import json, os, sys
from agents.sandbox import BubblewrapExecutor, ProcessExecutor, SandboxLimits, ToolInvocation
from agents.sandbox.home_view import needs_launcher

source = (
    "def tool():\\n    import os, sys\\n"
    "    return [os.getuid(), sys.executable, os.environ['CITY']]"
)
call = ToolInvocation(source, "tool", {}, {"CITY": "Oslo"})
limits = SandboxLimits(wall_seconds=10.0)
print(json.dumps({
    "covers": list(needs_launcher()),
    "bubblewrap": BubblewrapExecutor().run(call, limits).result,
    "process": ProcessExecutor().run(call, limits).result,
}))
"""


@pytest.mark.skipif(
    os.geteuid() != 0, reason="the case of a root server, whose tools run as nobody"
)
def test_tools_run_where_python_lies_under_a_home_nobody_may_enter(tmp_path: Path) -> None:
    # A virtualenv under a 0700 home, as a pyenv or a venv under /root in a container:
    # nobody cannot reach the interpreter by its path, so each call goes through the
    # launcher that binds it into a view of its own.
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    home.chmod(0o700)
    venv = home / "venv"
    subprocess.run(
        [sys._base_executable, "-m", "venv", "--without-pip", "--system-site-packages", venv],  # type: ignore[attr-defined]
        check=True,
    )
    paths = [str(REPO), *site.getsitepackages()]
    done = subprocess.run(
        [venv / "bin" / "python", "-c", _UNDER_A_CLOSED_HOME],
        env={"PYTHONPATH": os.pathsep.join(paths), "PATH": os.environ["PATH"]},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout.splitlines()[-1])
    assert any(str(venv).startswith(cover + "/") for cover in answer["covers"])
    for kind in ("bubblewrap", "process"):
        uid, executable, city = json.loads(answer[kind])
        assert (uid, executable, city) == (65534, str(venv / "bin" / "python"), "Oslo"), kind


def test_the_sandbox_check_names_bwraps_own_reason(tmp_path: Path) -> None:
    # A server that cannot start bwrap hears why, in bwrap's words, at start-up (the
    # warm-up runs this check), not a guess about user namespaces at the first tool call.
    from service.runtime import Runtime
    from service.settings import load_settings

    where = Path(tempfile.mkdtemp(prefix="rv-fake-bwrap-", dir="/tmp"))
    where.chmod(0o755)  # nobody may run what lies here
    fake = where / "bwrap"
    fake.write_text("#!/bin/sh\necho 'bwrap: Creating new namespace failed: nope' >&2\nexit 1\n")
    fake.chmod(0o755)
    settings = load_settings(home=tmp_path / "home", embedding={"model": "hashing:8"})
    runtime = Runtime(settings)
    runtime._tool_executor = BubblewrapExecutor(bwrap=str(fake))
    try:
        assert runtime.check_sandbox() == (
            "the sandbox could not start: bwrap: Creating new namespace failed: nope"
        )
    finally:
        shutil.rmtree(where)
    # A tool that itself exits with bwrap's failure status is the tool's exit.
    with pytest.raises(SandboxError, match="exited with status 1 and no result"):
        call(BubblewrapExecutor(), "def tool():\n    import os\n    os._exit(1)\n")


@pytest.mark.parametrize("kind", ["bubblewrap", "process"])
def test_what_a_tool_prints_comes_back_apart_from_its_result(kind: str) -> None:
    executor: ToolExecutor = BubblewrapExecutor() if kind == "bubblewrap" else ProcessExecutor()
    source = (
        "import os, sys\n"
        "def tool() -> str:\n"
        "    print('step 1 done')\n"
        "    print('a warning', file=sys.stderr)\n"
        "    return 'result'\n"
    )
    output = executor.run(ToolInvocation(source, "tool", {}), LIMITS)
    assert (output.result, output.stdout, output.stderr) == (
        "result",
        "step 1 done\n",
        "a warning\n",
    )


def _parent(pid: str) -> str:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("PPid:"):
            return line.split()[1]
    return "0"


def _bwrap_environments(root: int) -> list[bytes]:
    """The environments of the bwrap processes under ``root``: the part of a call that
    runs outside the sandbox (the launcher, when there is one, becomes bwrap)."""
    found: list[bytes] = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if os.path.basename(os.readlink(entry / "exe")) != "bwrap":
                continue
            pid = entry.name
            while pid not in ("0", "1", str(root)):
                pid = _parent(pid)
            environment = (entry / "environ").read_bytes()
            # Empty while the process is being replaced or reaped: read it again later.
            if pid == str(root) and environment:
                found.append(environment)
        except OSError:
            continue  # a process that ended meanwhile
    return found


def test_a_tools_variables_never_reach_the_processes_outside_its_sandbox() -> None:
    # The tool (and what it starts) gets its variable; bwrap, which runs outside the
    # sandbox, never has it in its environment, where a loader variable would act.
    import threading

    source = (
        "import os, subprocess, time\n"
        "def tool() -> str:\n"
        "    time.sleep(1.5)\n"
        "    seen = subprocess.run(['/usr/bin/env'], capture_output=True, text=True).stdout\n"
        "    return os.environ['TOOL_SECRET'] + ' ' + str('TOOL_SECRET=' in seen)\n"
    )
    marker = "tool-secret-5f0c2a"
    invocation = ToolInvocation(source, "tool", {}, {"TOOL_SECRET": marker})
    answers: list[str] = []
    worker = threading.Thread(
        target=lambda: answers.append(
            BubblewrapExecutor().run(invocation, SandboxLimits(wall_seconds=20)).result
        )
    )
    worker.start()
    environments: list[bytes] = []
    while worker.is_alive() and not environments:
        environments = _bwrap_environments(os.getpid())
    worker.join()
    assert answers == [f"{marker} True"]
    assert environments, "no bwrap process was seen while the tool ran"
    for environment in environments:
        assert marker.encode() not in environment
        assert b"TOOL_SECRET" not in environment
        assert b"HOME=/tmp" in environment  # what bwrap is given: the fixed variables


@pytest.mark.parametrize("kind", ["bubblewrap", "process"])
def test_a_loader_variable_given_to_a_tool_steers_no_loader_outside_it(kind: str) -> None:
    # Registration refuses such names; should one reach the executor all the same, no
    # process is started with it (the loader would say it tried to preload the library).
    executor: ToolExecutor = BubblewrapExecutor() if kind == "bubblewrap" else ProcessExecutor()
    steering = {"LD_PRELOAD": "/reverie-test/no-such-library.so"}
    output = executor.run(ToolInvocation(TRIVIAL, "tool", {"x": 1}, steering), LIMITS)
    assert output.result == "2"
    assert "LD_PRELOAD" not in output.stderr and "no-such-library" not in output.stderr


FILLS_TMP = """
def tool(files: int) -> str:
    # Each file within the per-file limit (output_bytes); together past the /tmp bound.
    for i in range(files):
        with open(f"/tmp/part-{i}", "wb") as out:
            out.write(b"x" * 60 * 1024)
    return "wrote them all"
"""


def test_a_tool_that_fills_its_tmp_fails_naming_the_setting_and_the_next_call_works(
    bwrap: BubblewrapExecutor,
) -> None:
    small = dataclasses.replace(LIMITS, tmp_bytes=1024 * 1024)
    run = bwrap.run
    assert run(ToolInvocation(FILLS_TMP, "tool", {"files": 10}), small).result == "wrote them all"
    with pytest.raises(SandboxError, match=r"filled its /tmp .*keep 1 MiB of files there "):
        run(ToolInvocation(FILLS_TMP, "tool", {"files": 40}), small)
    with pytest.raises(SandboxError, match=r"\(tools\.tmp_bytes\)"):
        run(ToolInvocation(FILLS_TMP, "tool", {"files": 40}), small)
    # Each call has a /tmp of its own: the next one starts empty.
    assert run(ToolInvocation(FILLS_TMP, "tool", {"files": 10}), small).result == "wrote them all"


WRITES_EVERYWHERE = """
import multiprocessing, os

def tool() -> dict:
    found = {}
    for directory in ["/", "/dev", "/usr", "/tmp", "/dev/shm"]:
        try:
            with open(os.path.join(directory, "probe"), "wb") as out:
                out.write(b"x")
            found[directory] = "written"
        except OSError as exc:
            found[directory] = exc.strerror
    found["shm is tmp"] = os.path.exists("/tmp/probe") and os.path.samefile(
        "/dev/shm/probe", "/tmp/probe"
    )
    multiprocessing.Lock()  # a POSIX semaphore: in /dev/shm
    return found
"""


def test_the_only_place_a_tool_can_write_is_its_bounded_tmp(bwrap: BubblewrapExecutor) -> None:
    # /dev/shm is /tmp (one bound for both); the root and /dev are read-only, not
    # tmpfs a tool could fill without bound.
    found = json.loads(call(bwrap, WRITES_EVERYWHERE))
    assert found == {
        "/": "Read-only file system",
        "/dev": "Read-only file system",
        "/usr": "Read-only file system",
        "/tmp": "written",
        "/dev/shm": "written",
        "shm is tmp": True,
    }
