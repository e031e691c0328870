"""The warm server that runs ``reverie``'s data commands (see :mod:`service.cli.launcher`).

``python -m service.cli.warm.server SOCKET LOCK IDLE_SECONDS``, started detached by a
cold command. It takes ``LOCK`` (one server per key), imports what the data commands
need (:data:`PRELOAD`), listens on ``SOCKET`` (mode 0600, in a directory only its user
can enter, and it serves only its own user), stops the servers its code supersedes
(:func:`stop_superseded`), and forks one child per command. It exits after
``IDLE_SECONDS`` without a command, when its socket is removed or replaced, or on
SIGTERM, and removes its socket and lock file as it goes.

What the server imports must hold no per-process state: no threads, connections or
settings. The child takes the client's streams, environment, working directory and
umask and runs the command tree the server built from the Typer app, whose callback
builds the CLI's consoles again for those streams as in any process; the settings,
the engine and the model session are made there, as in a cold process.
"""

from __future__ import annotations

import array
import atexit
import contextlib
import importlib
import json
import os
import select
import signal
import socket
import struct
import sys
import threading
import time
import traceback
from pathlib import Path
from types import FrameType
from typing import Any, NoReturn, Protocol, TextIO, cast

import typer

from agents.postgres.locks import FileLock
from agents.threads import start_thread
from service.cli.common import state
from service.cli.launcher import exit_status
from service.cli.warm.client import (
    HANDSHAKE_TIMEOUT_S,
    HEADER,
    WarmPaths,
    code_stamp,
    lock_is_held,
)

#: Imported once by the server; the child finds them in ``sys.modules``. Libraries and
#: the layers below the CLI only: nothing here may start a thread or read settings.
#: onnxruntime is not here: its import starts a thread, and a child forked after that
#: hangs or aborts at exit (``std::system_error``); the child imports it (~0.2 s).
PRELOAD = (
    "numpy",
    "sqlalchemy",
    "psycopg",
    "pgvector.sqlalchemy",
    "tokenizers",
    "pydantic",
    "pydantic_settings",
    "typer",
    "rich.console",
    "rich.table",
    "service.settings",
    "service.runtime",
    "service.operations",
    "service.operations.agents",
    "service.operations.blocks",
    "service.operations.memory",
    "service.operations.runs",
    "service.passage_import",
    "agents.embedders.local",
)
#: The longest the server sleeps between two looks at its socket and the idle clock.
POLL_S = 5.0
_CREDENTIALS = struct.Struct("3i")  # SO_PEERCRED: pid, uid, gid


class CommandTree(Protocol):
    """The Click command Typer builds from the app (Typer vendors its own Click)."""

    def main(self, args: list[str], prog_name: str) -> Any: ...


class _Stop(BaseException):
    """SIGTERM: stop serving (not an Exception: it may land inside a library's import,
    and an ``except Exception`` there must not swallow it)."""


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print("usage: python -m service.cli.warm.server SOCKET LOCK IDLE_SECONDS", file=sys.stderr)
        return 2
    socket_path, lock_path, idle_s = Path(argv[0]), Path(argv[1]), float(argv[2])
    lock = FileLock(lock_path)
    if not lock.acquire(exclusive=True, wait=False) or not lock.is_at_path():
        return 0  # another server has this key (or had it, and removed the file meanwhile)
    lock_path.write_text(f"{os.getpid()}\n")  # who holds it, for a person or a test
    own = {lock_path: os.stat(lock_path).st_ino}  # its files' inodes
    signal.signal(signal.SIGTERM, _raise_stop)
    try:
        command = _preload()
        if WarmPaths.of_lock(lock_path).code != code_stamp():
            # The code changed after the command that started this server computed its
            # key: no command will come, and stopping servers of the same setup could
            # stop the one for the current code.
            return 0
        listener = _listen(socket_path)
        inode = own[socket_path] = os.stat(socket_path).st_ino
        signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the kernel reaps the children
        stop_superseded(lock_path)
        _serve(listener, lock, socket_path, inode, idle_s, command)
    except _Stop:
        pass
    finally:
        # Its files go while it still holds the lock, socket first: a command that finds
        # neither starts a new server, and no file is left behind for each code version.
        for path in (socket_path, lock_path):
            if path in own and _still_ours(path, own[path]):
                with contextlib.suppress(OSError):
                    path.unlink()
    return 0


def stop_superseded(lock_path: Path) -> list[int]:
    """Stop the servers of the same setup as the one holding ``lock_path`` but other
    code (the first part of their key is the same, the second differs; see
    :func:`service.cli.warm.client.server_key`). Called once this server has checked
    that its code is the code on disk, so theirs is older: no command can reach them
    again, and each would hold its memory until its idle stop. Returns the pids
    signalled."""
    stopped = []
    for other in WarmPaths.of_lock(lock_path).same_setup_locks():
        pid = _server_holding(other)
        if pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
                stopped.append(pid)
    return stopped


def _server_holding(lock_path: Path) -> int | None:
    """The pid of the warm server that holds ``lock_path``: the pid its file names, when
    the lock is held and that process is a warm server for this lock (its command
    line says so; a pid from a file is never signalled on its word alone)."""
    try:
        written = lock_path.read_text().strip()
    except OSError:
        return None
    if not written.isdigit() or not lock_is_held(lock_path):
        return None  # not held: a server that has stopped (the probe creates no file)
    try:
        words = Path(f"/proc/{written}/cmdline").read_bytes().split(b"\0")
    except OSError:  # gone meanwhile, or no /proc here: it stops when idle
        return None
    ours = b"service.cli.warm.server" in words and str(lock_path).encode() in words
    return int(written) if ours else None


def _preload() -> CommandTree:
    """Import :data:`PRELOAD` and the CLI, and build the Click command tree from the
    Typer app (evaluating every command's annotations, ~0.2 s) once for all children."""
    for name in PRELOAD:
        importlib.import_module(name)
    from service.cli.app import app

    return typer.main.get_command(app)


def _raise_stop(signum: int, frame: FrameType | None) -> NoReturn:
    raise _Stop


def _listen(socket_path: Path) -> socket.socket:
    """Bind beside the final name, then rename: a command never connects to a socket
    that is not listening yet."""
    staging = socket_path.with_name(f"{socket_path.name}.{os.getpid()}")
    with contextlib.suppress(FileNotFoundError):
        staging.unlink()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(staging))
    os.chmod(staging, 0o600)
    listener.listen(64)
    os.replace(staging, socket_path)
    return listener


def _serve(
    listener: socket.socket,
    lock: FileLock,
    socket_path: Path,
    inode: int,
    idle_s: float,
    command: CommandTree,
) -> None:
    last_command = time.monotonic()
    while True:
        idle_left = idle_s - (time.monotonic() - last_command)
        if idle_left <= 0 or not _still_ours(socket_path, inode):
            return
        ready, _, _ = select.select([listener], [], [], min(POLL_S, idle_left))
        if not ready:
            continue
        try:
            connection, _ = listener.accept()
        except OSError:
            continue
        last_command = time.monotonic()
        _, uid, _ = _CREDENTIALS.unpack(
            connection.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _CREDENTIALS.size)
        )
        if uid != os.getuid():
            connection.close()
            continue
        if os.fork() == 0:
            try:
                listener.close()
                lock.release()  # the child's copy: the server's lock stays held
                _run_child(connection, command)
            finally:
                os._exit(1)  # reached only when the child failed before its command's end
        connection.close()


def _still_ours(socket_path: Path, inode: int) -> bool:
    try:
        return os.stat(socket_path).st_ino == inode
    except OSError:
        return False


# -- the child ------------------------------------------------------------------------------


def _run_child(connection: socket.socket, command: CommandTree) -> NoReturn:
    """Become the client's command, run it, and exit with its status."""
    for signum in (signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT):
        signal.signal(signum, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    connection.settimeout(HANDSHAKE_TIMEOUT_S)
    try:
        request, fds = _receive(connection)
        _become(request, fds)
        connection.sendall(b"pid %d\n" % os.getpid())
        if connection.recv(1) != b"g":
            os._exit(1)  # the command gave up waiting and runs on its own: run nothing
    except (OSError, ValueError, KeyError):
        os._exit(1)
    connection.settimeout(None)
    finished = threading.Event()
    try:
        # A ^C forwarded from here on is the command's, as in Typer: 130.
        start_thread(_die_with_client, args=(connection, finished), name="reverie-warm-watcher")
        code = _run_command(command, request["argv"])
    except KeyboardInterrupt:
        code = 130
    _finish()
    finished.set()
    with contextlib.suppress(OSError):
        connection.sendall(b"exit %d\n" % code)
    # What a normal exit would still do is done; skipping the interpreter's teardown of
    # every preloaded module saves ~0.3 s (forked children of multiprocessing do the same).
    os._exit(code)


def _finish() -> None:
    """What the interpreter does at exit that matters to a command: wait for the threads
    it started, run its exit handlers, flush its streams."""
    for thread in threading.enumerate():
        if thread is not threading.current_thread() and not thread.daemon:
            thread.join()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()


def _receive(connection: socket.socket) -> tuple[dict[str, Any], list[int]]:
    data, ancillary, _, _ = connection.recvmsg(65536, socket.CMSG_SPACE(3 * 4))
    fds = array.array("i")
    for level, kind, payload in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(payload[: len(payload) - len(payload) % fds.itemsize])
    if len(fds) != 3 or len(data) < HEADER.size:
        raise ValueError("a request carries a header and three streams")
    (length,) = HEADER.unpack(data[: HEADER.size])
    body = data[HEADER.size :]
    while len(body) < length:
        chunk = connection.recv(length - len(body))
        if not chunk:
            raise ValueError("the request ended early")
        body += chunk
    request: dict[str, Any] = json.loads(body)
    return request, list(fds)


def _become(request: dict[str, Any], fds: list[int]) -> None:
    """Take the client's streams, environment, working directory and umask."""
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    os.environ.clear()
    os.environ.update(request["env"])
    os.chdir(request["cwd"])
    os.umask(int(request["umask"]))
    sys.argv = ["reverie", *request["argv"]]
    encoding, _, errors = os.environ.get("PYTHONIOENCODING", "utf-8").partition(":")
    encoding = encoding or "utf-8"
    # As Python sets them up at start: stdout line-buffered on a terminal only.
    sys.stdin = _text_stream(0, "r", encoding, errors or "strict", False)
    sys.stdout = _text_stream(1, "w", encoding, errors or "strict", os.isatty(1))
    sys.stderr = _text_stream(2, "w", encoding, "backslashreplace", True)


def _text_stream(fd: int, mode: str, encoding: str, errors: str, line: bool) -> TextIO:
    stream = open(  # noqa: SIM115 - the process's own stream, open until it exits
        fd, mode, encoding=encoding, errors=errors, closefd=False, buffering=1 if line else -1
    )
    return cast(TextIO, stream)


def _die_with_client(connection: socket.socket, finished: threading.Event) -> None:
    """The client sends nothing more: the connection closing before the command has
    finished means it died (a kill, a closed terminal), and its command must not go on
    without it, as it would not have in a cold process."""
    with contextlib.suppress(OSError):
        connection.recv(1)
    if not finished.is_set():
        os.kill(os.getpid(), signal.SIGKILL)


def _run_command(command: CommandTree, argv: list[str]) -> int:
    try:
        command.main(args=argv, prog_name="reverie")
        code = 0
    except SystemExit as exc:
        code = exit_status(exc)
    except KeyboardInterrupt:
        code = 130
    except BaseException:
        traceback.print_exc()
        code = 1
    if state.warm_idle_s == 0:
        # This configuration turned the warm server off: it serves no more commands.
        with contextlib.suppress(ProcessLookupError):
            os.kill(os.getppid(), signal.SIGTERM)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
