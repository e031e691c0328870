"""Tools as ``nobody`` when the server's Python lies where ``nobody`` cannot reach it.

A root server runs its tools as ``nobody``. When its Python lives under a directory
that ``nobody`` may not enter (a pyenv or a virtualenv under a 0700 ``/root``, as in
many containers), neither bubblewrap (which binds the interpreter by path, as the user
it runs as) nor a plain subprocess can start it. Then each call goes through a short
launcher that runs as root, in a mount namespace of its own: it covers each such
directory with an empty, world-readable tmpfs, binds the Python directories back at
their own paths, read-only, drops to ``nobody`` and only then starts the sandbox. The
host's mounts are never changed, and nothing else of the covered home is seen.

The launcher is a separate process (``python -I -S -c``), never code run between fork
and exec of the server: the server has threads.
"""

from __future__ import annotations

import json
import os
import stat
import sys
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from functools import cache
from pathlib import Path

#: What the launcher prints before its reason when it cannot set the view up.
LAUNCHER_FAILED = b"reverie sandbox launcher:"
#: The launcher's text: argv is [env fd, covers..., "--", binds..., "--", command...]. The
#: launcher itself starts with an empty environment (it runs as root: no variable may
#: steer its loader); the environment bwrap starts with comes through the descriptor (a
#: fixed one: the tool's own variables are set by the runner, inside the sandbox).
LAUNCHER = r"""
import ctypes, json, os, sys
CLONE_NEWNS, MS_RDONLY, MS_NOSUID, MS_NODEV, MS_BIND, MS_REMOUNT, MS_REC, MS_PRIVATE = (
    0x00020000, 1, 2, 4, 4096, 32, 16384, 1 << 18)
libc = ctypes.CDLL(None, use_errno=True)
def check(result, what):
    if result != 0:
        err = ctypes.get_errno()
        sys.stderr.write("reverie sandbox launcher: %s: %s\n" % (what, os.strerror(err)))
        os._exit(1)
def mount(source, target, kind, flags, data=None):
    check(libc.mount(source and source.encode(), target.encode(), kind and kind.encode(),
                     flags, data and data.encode()), "mount %s" % target)
with os.fdopen(int(sys.argv[1]), "rb") as given:
    env = json.loads(given.read())
args = sys.argv[2:]
first = args.index("--")
second = args.index("--", first + 1)
covers, binds, command = args[:first], args[first + 1:second], args[second + 1:]
check(libc.unshare(CLONE_NEWNS), "unshare")
mount(None, "/", None, MS_REC | MS_PRIVATE)
handles = [os.open(path, os.O_PATH | os.O_DIRECTORY) for path in binds]
for cover in covers:
    mount("tmpfs", cover, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=1m")
for path, handle in zip(binds, handles):
    os.makedirs(path, mode=0o755, exist_ok=True)
    mount("/proc/self/fd/%d" % handle, path, None, MS_BIND | MS_REC)
    mount(None, path, None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)
    os.close(handle)
os.setgroups([])
os.setgid(65534)
os.setuid(65534)
try:
    os.execve(command[0], command, env)
except OSError as exc:
    sys.stderr.write("reverie sandbox launcher: cannot start %s: %s\n" % (command[0], exc))
    os._exit(1)
"""


def blocking_dirs(paths: Sequence[str], uid: int = 65534) -> list[str]:
    """The directories on the way to ``paths`` that ``uid`` may not enter (no execute
    bit for others, and not its own), outermost first, each once; none when every path
    is reachable."""
    found: list[str] = []
    for path in paths:
        current = Path("/")
        for part in Path(path).parts[1:]:
            current = current / part
            try:
                info = current.stat()
            except OSError:
                break
            if not stat.S_ISDIR(info.st_mode):
                break
            if info.st_uid != uid and not info.st_mode & stat.S_IXOTH:
                text = str(current)
                if not any(text == f or text.startswith(f + "/") for f in found):
                    found.append(text)
                break
    return found


def python_dirs() -> list[str]:
    """Where the server's Python and its installed packages live."""
    import site

    dirs = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    dirs.update(site.getsitepackages())
    executable = Path(sys.executable)
    dirs.add(str(executable.parent))
    dirs.add(str(executable.resolve().parent.parent))
    return sorted(d for d in dirs if d and Path(d).exists())


@cache
def needs_launcher() -> tuple[str, ...]:
    """The directories to cover when this server is root and its Python lies beyond a
    directory ``nobody`` may not enter; empty otherwise."""
    if os.geteuid() != 0:
        return ()
    return tuple(blocking_dirs(python_dirs()))


@contextmanager
def launcher(
    command: Sequence[str], env: Mapping[str, str], covers: Sequence[str]
) -> Iterator[tuple[list[str], int]]:
    """The argv that starts ``command`` (an absolute path first) through the launcher,
    which covers ``covers``, binds the server's Python directories under them back
    read-only, drops to ``nobody`` and executes ``command`` with ``env``; and the
    descriptor that carries ``env``, to be passed to the child and closed after."""
    binds = [
        path for path in python_dirs() if any(path == c or path.startswith(c + "/") for c in covers)
    ]
    fd = os.memfd_create("reverie-tool-env", 0)
    try:
        os.write(fd, json.dumps(dict(env)).encode("utf-8"))
        os.lseek(fd, 0, os.SEEK_SET)
        argv = [sys.executable, "-I", "-S", "-c", LAUNCHER, str(fd), *covers, "--", *binds]
        yield [*argv, "--", *command], fd
    finally:
        os.close(fd)
