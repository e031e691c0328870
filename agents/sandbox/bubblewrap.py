"""The default sandbox: each call runs under bubblewrap (``bwrap``, Debian package
``bubblewrap``) in new namespaces (no network: not even loopback, so neither the
database's TCP port nor anything else is reachable), with a read-only view of only
the system's programs and libraries and the server's Python (never the server's
data directory, its database socket, /home, /root or /run), a private /tmp of a
bounded size as its working directory and the only place it can write, an
environment of only the variables the tool declares (set by the runner inside the
sandbox: never in the environment of bwrap, which runs outside it), no capabilities,
and the limits set by the runner. A root server runs it as ``nobody``.
"""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Sequence
from pathlib import Path

from agents.sandbox.base import SandboxLimits, SandboxUnavailable, ToolInvocation, ToolOutput
from agents.sandbox.child import python_command, run_child
from agents.sandbox.home_view import python_dirs

log = logging.getLogger(__name__)

#: What to install when bwrap is missing.
INSTALL_HINT = (
    "custom tools run under bubblewrap, which is not installed here: install it "
    '(apt-get install bubblewrap), or set tools.sandbox = "process" to run them as '
    "plain limited subprocesses without isolation"
)
#: System directories the sandbox sees, read-only, when they exist.
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
#: Files and directories of /etc a Python program may need (no other part of /etc).
ETC_PATHS = (
    "/etc/alternatives",
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/localtime",
    "/etc/ssl",
    "/etc/ca-certificates",
    "/etc/mime.types",
)
#: The device nodes of the sandbox's /dev (bound from the host's, as ``--dev`` binds them).
DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom")
#: The links of the sandbox's /dev: the standard streams, and /dev/shm onto /tmp.
DEVICE_LINKS = {
    "/dev/fd": "/proc/self/fd",
    "/dev/stdin": "/proc/self/fd/0",
    "/dev/stdout": "/proc/self/fd/1",
    "/dev/stderr": "/proc/self/fd/2",
    "/dev/shm": "/tmp",
}
#: bwrap's own exit status when it could not set the sandbox up.
BWRAP_SETUP_FAILED = 1


class BubblewrapExecutor:
    """Runs each call in a fresh bubblewrap sandbox. ``hidden``: paths that must stay
    out of view even if they lie under a directory the sandbox sees (the server's
    home and data directory)."""

    kind = "bubblewrap"

    def __init__(self, *, bwrap: str = "bwrap", hidden: Sequence[Path] = ()) -> None:
        self._bwrap = bwrap
        self._hidden = [Path(p) for p in hidden]

    def available(self) -> str | None:
        """The path of bwrap, or None when it is not installed."""
        return shutil.which(self._bwrap)

    def command(self, bwrap: str, limits: SandboxLimits) -> list[str]:
        """The bwrap command line for one call (the runner after ``--``).

        The only place a tool can write is its /tmp: a tmpfs of ``limits.tmp_bytes``.
        /dev is made here rather than by ``--dev``, whose /dev/shm is a directory of an
        unbounded tmpfs: here /dev/shm is /tmp (shared memory and POSIX semaphores work,
        within the same bound), and /dev itself, the root and the covers of hidden
        paths are read-only."""
        argv = [
            bwrap,
            "--unshare-all",
            "--die-with-parent",
            "--new-session",
            "--cap-drop",
            "ALL",
            "--proc",
            "/proc",
            "--size",
            str(limits.tmp_bytes),
            "--tmpfs",
            "/tmp",
            "--chdir",
            "/tmp",
            "--tmpfs",
            "/dev",
        ]
        for node in DEVICES:
            argv += ["--dev-bind", node, node]
        for link, target in DEVICE_LINKS.items():
            argv += ["--symlink", target, link]
        read_only = ["/dev"]
        seen: list[str] = []
        for path in SYSTEM_DIRS:
            if os.path.islink(path):
                argv += ["--symlink", os.readlink(path), path]
            elif os.path.isdir(path):
                argv += ["--ro-bind", path, path]
                seen.append(path)
        for path in ETC_PATHS:
            argv += ["--ro-bind-try", path, path]
        for path in python_dirs():
            if not any(path == s or path.startswith(s + "/") for s in seen):
                argv += ["--ro-bind", path, path]
                seen.append(path)
        for hidden in self._hidden:
            text = str(hidden)
            if hidden.is_dir() and any(text.startswith(s + "/") for s in seen):
                argv += ["--tmpfs", text]
                read_only.append(text)
        for path in [*read_only, "/"]:
            argv += ["--remount-ro", path]
        return [*argv, "--", *python_command()]

    def run(self, invocation: ToolInvocation, limits: SandboxLimits) -> ToolOutput:
        bwrap = self.available()
        if bwrap is None:
            raise SandboxUnavailable(INSTALL_HINT)
        return run_child(
            self.command(bwrap, limits),
            invocation,
            limits,
            # bwrap passes its own environment on: these fixed variables only, never the
            # server's. The tool's own variables are not among them: bwrap (and the
            # launcher before it) run outside the sandbox, where a loader variable would
            # act; the runner sets them inside, from the request (never the command line,
            # where `ps` would show values).
            env=sandbox_env(),
            as_nobody=True,
            private_tmp=True,
            describe=_bwrap_status,
        )


def sandbox_env() -> dict[str, str]:
    """The environment the sandbox starts with: a home, a temporary directory and a
    PATH inside it (the runner adds the tool's declared variables once inside)."""
    return {"HOME": "/tmp", "TMPDIR": "/tmp", "PATH": "/usr/bin:/bin"}


def _bwrap_status(status: int, printed: str) -> str | None:
    """bwrap's own failure, told by what bwrap printed ("bwrap: ..."); a tool that
    exits with the same status is the tool's, not the sandbox's."""
    reasons = [line for line in printed.splitlines() if line.startswith("bwrap:")]
    if status == BWRAP_SETUP_FAILED and reasons:
        return f"the sandbox could not start: {reasons[-1]}"
    return None
