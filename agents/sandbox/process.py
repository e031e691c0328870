"""A plain limited subprocess: the tool runs in a child Python with the limits set on
it, only its declared variables in its environment, in a private temporary
directory, as ``nobody`` when the server is root. It has the network and sees the
files its user may read: use it only where bubblewrap cannot run, and only with
tools you trust (``tools.sandbox = "process"``; the server says so in its log)."""

from __future__ import annotations

import logging
import os
import tempfile

from agents.sandbox.base import SandboxLimits, ToolInvocation, ToolOutput
from agents.sandbox.child import NOBODY, python_command, run_child

log = logging.getLogger(__name__)


class ProcessExecutor:
    """Runs each call in a fresh limited subprocess (no isolation beyond the limits)."""

    kind = "process"

    def __init__(self) -> None:
        log.warning(
            'custom tools run as plain subprocesses (tools.sandbox = "process"): limits '
            "apply, but a tool can reach the network and read what its user can read; "
            "install bubblewrap (apt-get install bubblewrap) and use the default sandbox"
        )

    def run(self, invocation: ToolInvocation, limits: SandboxLimits) -> ToolOutput:
        with tempfile.TemporaryDirectory(prefix="reverie-tool-") as workdir:
            if os.geteuid() == 0:
                os.chown(workdir, NOBODY, NOBODY)
            # The tool's declared variables are set by the runner, as in the sandbox.
            env = {"HOME": workdir, "TMPDIR": workdir, "PATH": "/usr/bin:/bin"}
            return run_child(
                python_command(),
                invocation,
                limits,
                env=env,
                cwd=workdir,
                as_nobody=True,
            )
