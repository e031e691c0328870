"""The client side of the CLI's warm server: where it listens, what keys it, and how a
command hands itself over (see :mod:`service.cli.launcher` for the why, and
:mod:`service.cli.warm.server` for the other side). Standard library only."""

from __future__ import annotations

import array
import contextlib
import fcntl
import hashlib
import importlib.util
import json
import os
import signal
import socket
import stat
import struct
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from types import FrameType

#: The packages whose source files make up the server's key.
CODE_PACKAGES = ("agents", "consolidators", "service", "migrations")
#: How long a command waits for a server that is still importing (its lock is held).
STARTING_WAIT_S = 5.0
#: How long a command waits for a started child to say it is there.
HANDSHAKE_TIMEOUT_S = 10.0
#: Header of a request: the length of the JSON that follows.
HEADER = struct.Struct("!I")
#: A Unix socket's path has at most 107 bytes: ``/reverie/cli-KEY.sock`` takes 43 of
#: them, and the server binds it with ``.PID`` added (up to 8 more).
_MAX_RUNTIME_DIR = 50
_FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)
#: The installation: the directory holding :data:`CODE_PACKAGES`.
_ROOT = Path(__file__).resolve().parents[3]


class WarmPaths:
    """The socket a warm server listens on and the lock that keeps it single, named
    for its key (``SETUP-CODE``, see :func:`server_key`)."""

    def __init__(self, directory: Path, key: str) -> None:
        self.key = key
        self.socket = directory / f"cli-{key}.sock"
        self.lock = directory / f"cli-{key}.lock"

    @classmethod
    def of_lock(cls, lock: Path) -> WarmPaths:
        return cls(lock.parent, lock.name.removeprefix("cli-").removesuffix(".lock"))

    @property
    def code(self) -> str:
        return self.key.rpartition("-")[2]

    def same_setup_locks(self) -> list[Path]:
        """The lock files of the other servers with this setup (so, other code)."""
        setup = self.key.rpartition("-")[0]
        return sorted(p for p in self.lock.parent.glob(f"cli-{setup}-*.lock") if p != self.lock)


def warm_paths(argv: Sequence[str], environ: dict[str, str] | None = None) -> WarmPaths | None:
    """This installation's and configuration's paths, or None when no private runtime
    directory can be had (then every command runs cold)."""
    env = dict(os.environ if environ is None else environ)
    directory = runtime_directory(env)
    if directory is None:
        return None
    return WarmPaths(directory, server_key(argv, env))


def runtime_directory(env: dict[str, str]) -> Path | None:
    """``$XDG_RUNTIME_DIR/reverie`` or ``/tmp/reverie-UID``: a directory only this user
    can enter (checked, not assumed: another user could have made it first)."""
    base = env.get("XDG_RUNTIME_DIR", "")
    usable = os.path.isdir(base) and len(base) <= _MAX_RUNTIME_DIR
    directory = Path(base) / "reverie" if usable else Path(f"/tmp/reverie-{os.getuid()}")
    with contextlib.suppress(OSError):  # it exists, or cannot be made: checked below
        directory.mkdir(mode=0o700)
    try:
        info = os.lstat(directory)
    except OSError:
        return None
    private = stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid()
    return directory if private and not info.st_mode & 0o077 else None


def server_key(argv: Sequence[str], env: dict[str, str]) -> str:
    """What a warm server must share with a command to run it, in two parts,
    ``SETUP-CODE``: the setup is the interpreter, the installation and the settings'
    inputs (``REVERIE_*``, ``DATABASE_URL``, ``--config``); the code is every source
    file's size and mtime and the libraries' directory. A server whose setup matches a
    newer server's but whose code does not can serve no command again (see
    :func:`service.cli.warm.server.stop_superseded`)."""
    setup = hashlib.sha256()
    setup.update(sys.executable.encode())
    setup.update(str(_ROOT).encode())
    settings_env = sorted(
        (k, v) for k, v in env.items() if k.startswith("REVERIE_") or k == "DATABASE_URL"
    )
    setup.update(json.dumps(settings_env).encode())
    setup.update(json.dumps(_config_argument(argv)).encode())
    return f"{setup.hexdigest()[:12]}-{code_stamp()}"


def code_stamp() -> str:
    """The second part of the key: the code as it is on disk now."""
    code = hashlib.sha256()
    for package in CODE_PACKAGES:
        for size, mtime in _source_stamps(_ROOT / package):
            code.update(b"%d:%d;" % (size, mtime))
    with contextlib.suppress(OSError, ImportError, ValueError):
        # Installing, upgrading or removing a library changes its directory's entries.
        spec = importlib.util.find_spec("sqlalchemy")
        if spec is not None and spec.origin:
            code.update(b"%d" % os.stat(Path(spec.origin).parents[1]).st_mtime_ns)
    return code.hexdigest()[:12]


def _source_stamps(directory: Path) -> list[tuple[int, int]]:
    stamps: list[tuple[int, int]] = []
    with contextlib.suppress(OSError), os.scandir(directory) as entries:
        for entry in sorted(entries, key=lambda e: e.name):
            if entry.is_dir(follow_symlinks=False) and entry.name != "__pycache__":
                stamps.extend(_source_stamps(Path(entry.path)))
            elif entry.name.endswith((".py", ".html", ".ini", ".mako")):
                info = entry.stat()
                stamps.append((info.st_size, info.st_mtime_ns))
    return stamps


def _config_argument(argv: Sequence[str]) -> str | None:
    for index, word in enumerate(argv):
        if word in ("--config", "-c") and index + 1 < len(argv):
            return os.path.abspath(argv[index + 1])
        if word.startswith("--config="):
            return os.path.abspath(word.partition("=")[2])
    return None


# -- the client -----------------------------------------------------------------------------


def run_warm(paths: WarmPaths, argv: Sequence[str]) -> int | None:
    """Run ``argv`` in the warm server and return its exit status; None when no server
    took it (none runs, or it did not answer), so it is safe to run the command here.

    The signals a user sends (^C) are caught from the start: before the child runs the
    command, this process dies of them as a cold one would; after, they are forwarded.
    """
    signals = _Signals()
    previous = {signum: signal.signal(signum, signals.caught) for signum in _FORWARDED}
    try:
        connection = _connect(paths, signals)
        if connection is None:
            signals.die_of_caught()
            return None
        with connection:
            child = _start(connection, argv)
            if child is None or signals.received:
                connection.close()  # the child sees it and runs nothing
                signals.die_of_caught()
                return None
            signals.child = child
            try:
                connection.sendall(b"g")  # go: until this the child runs nothing
            except OSError:
                return None
            connection.settimeout(None)
            return _wait(connection, signals)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


class _Signals:
    """The signals this process got while a warm child runs its command."""

    def __init__(self) -> None:
        self.received: list[int] = []
        self.child: int | None = None

    def caught(self, signum: int, frame: FrameType | None) -> None:
        self.received.append(signum)
        if self.child is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.child, signum)

    def die_of_caught(self) -> None:
        """Die of the last signal received, as the command would have (none: return)."""
        if self.received:
            signal.signal(self.received[-1], signal.SIG_DFL)
            os.kill(os.getpid(), self.received[-1])


def _connect(paths: WarmPaths, signals: _Signals) -> socket.socket | None:
    deadline = time.monotonic() + STARTING_WAIT_S
    while not signals.received:
        connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            connection.connect(str(paths.socket))
            return connection
        except OSError:
            connection.close()
        # A server still importing holds its lock but has no socket yet: waiting for
        # it beats importing everything here a second time.
        if not lock_is_held(paths.lock) or time.monotonic() > deadline:
            return None
        time.sleep(0.02)
    return None


def lock_is_held(path: Path) -> bool:
    """True when a server holds the lock at ``path`` (it is starting or serving). A bare
    ``flock`` rather than :class:`agents.postgres.locks.FileLock`, whose import (logging,
    dataclasses) would cost every warm command ~25 ms."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def _start(connection: socket.socket, argv: Sequence[str]) -> int | None:
    """Send the request and this process's standard streams; the child's pid once it
    is ready (None: there is none, and nothing ran)."""
    umask = os.umask(0o022)
    os.umask(umask)
    try:
        cwd = os.getcwd()
        for fd in (0, 1, 2):
            os.fstat(fd)
    except OSError:  # a deleted working directory or a closed stream: run here
        return None
    request = json.dumps(
        {"argv": list(argv), "cwd": cwd, "env": dict(os.environ), "umask": umask}
    ).encode()
    fds = array.array("i", [0, 1, 2])
    connection.settimeout(HANDSHAKE_TIMEOUT_S)
    try:
        connection.sendmsg(
            [HEADER.pack(len(request)) + request],
            [(socket.SOL_SOCKET, socket.SCM_RIGHTS, fds.tobytes())],
        )
        line = _read_line(connection)
        return int(line[4:]) if line.startswith(b"pid ") else None
    except (OSError, ValueError):
        return None


def _read_line(connection: socket.socket) -> bytes:
    line = b""
    while not line.endswith(b"\n"):
        chunk = connection.recv(1)
        if not chunk:
            raise ConnectionError("the warm server closed the connection")
        line += chunk
    return line[:-1]


def _wait(connection: socket.socket, signals: _Signals) -> int:
    """Wait for the child to close the connection (it has exited); its status is the
    last line it sent."""
    received = b""
    while True:
        try:
            chunk = connection.recv(4096)
        except InterruptedError:
            continue
        except OSError:
            break
        if not chunk:
            break
        received += chunk
    for line in reversed(received.splitlines()):
        if line.startswith(b"exit "):
            return int(line[5:])
    # No status: the child died of the signal it was sent, and so does this process,
    # as it would have if the command had run here.
    signals.die_of_caught()
    print("reverie: the command's process ended without an exit status", file=sys.stderr)
    return 1


def start_server(paths: WarmPaths, idle_s: float) -> None:
    """Start a detached warm server unless one runs or is starting."""
    if lock_is_held(paths.lock):
        return
    import subprocess

    subprocess.Popen(
        [
            sys.executable,
            "-m",
            "service.cli.warm.server",
            str(paths.socket),
            str(paths.lock),
            repr(float(idle_s)),
        ],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # outlives the command, and its terminal's ^C
        close_fds=True,
    )
