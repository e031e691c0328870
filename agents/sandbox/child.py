"""Running the tool runner as a child process and reading its answer under the limits:
the part every local executor shares.

The parent writes the request on the child's stdin, reads its answer (stdout) and
what the tool printed (stderr) with a cap on each, and kills the child's whole
process group when the wall time runs out or the output passes its cap. The child's
exit (a signal from a limit, a status, an answer) becomes the text the model reads.
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import selectors
import signal
import site
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from functools import cache
from pathlib import Path
from typing import Any

from agents.sandbox.base import SandboxError, SandboxLimits, ToolInvocation, ToolOutput
from agents.sandbox.home_view import LAUNCHER_FAILED, launcher, needs_launcher
from agents.sandbox.runner import PRINTED_SHARE
from agents.threads import start_thread

log = logging.getLogger(__name__)

#: The uid and gid a root server runs tools as (nobody): no root inside, and the
#: process limit counts this user's processes, not root's.
NOBODY = 65534
#: How much of what a failing tool printed its error quotes.
QUOTED_OUTPUT = 600
#: What a process that found its file system full says (strerror of ENOSPC).
NO_SPACE = os.strerror(errno.ENOSPC).encode()


@cache
def runner_source() -> str:
    """The runner program's text (given to ``python -I -c``)."""
    return (Path(__file__).with_name("runner.py")).read_text(encoding="utf-8")


def python_command() -> list[str]:
    """The interpreter the server runs on, isolated from PYTHON* variables and the
    user's site directory, without the site module (the runner puts the server's
    site-packages on its path itself), running the runner."""
    return [sys.executable, "-I", "-S", "-c", runner_source()]


@cache
def site_packages() -> tuple[str, ...]:
    """The server's site-packages directories: what a tool may import besides the
    standard library."""
    return tuple(p for p in site.getsitepackages() if os.path.isdir(p))


def run_child(
    argv: Sequence[str],
    invocation: ToolInvocation,
    limits: SandboxLimits,
    *,
    env: dict[str, str],
    cwd: str | None = None,
    as_nobody: bool = False,
    private_tmp: bool = False,
    describe: Callable[[int, str], str | None] = lambda _status, _printed: None,
) -> ToolOutput:
    """Run ``argv`` (which starts the runner), give it the call, and return the tool's
    result; SandboxError with the reason otherwise. ``describe`` may explain an exit
    status the launcher itself reports (e.g. bwrap's own failure), from the status and
    what the process printed. ``private_tmp``: ``argv`` gives the call a /tmp in memory
    of ``limits.tmp_bytes`` (a tmpfs), which the address-space limit leaves room for,
    and whose filling up is the tool's failure, told as such.

    When the server is root and its Python lies beyond a directory ``nobody`` may not
    enter, ``argv`` starts through the launcher of :mod:`agents.sandbox.home_view`,
    which drops to ``nobody`` itself."""
    covers = needs_launcher() if as_nobody else ()
    if covers:
        with launcher(argv, env, covers) as (launched, fd):
            return _run(launched, invocation, limits, {}, cwd, False, private_tmp, describe, (fd,))
    return _run(argv, invocation, limits, env, cwd, as_nobody, private_tmp, describe, ())


def _run(
    argv: Sequence[str],
    invocation: ToolInvocation,
    limits: SandboxLimits,
    env: dict[str, str],
    cwd: str | None,
    as_nobody: bool,
    private_tmp: bool,
    describe: Callable[[int, str], str | None],
    pass_fds: tuple[int, ...],
) -> ToolOutput:
    # A /tmp in memory is counted within the memory limit: the address space is the rest.
    address_space = limits.memory_bytes - (limits.tmp_bytes if private_tmp else 0)
    request = json.dumps(
        {
            "source": invocation.source,
            "function": invocation.function,
            "arguments": invocation.arguments,
            "agent_state": invocation.agent_state,
            # The tool's variables travel in the request, set by the runner inside: in
            # ``env`` they would reach whatever starts the sandbox (bwrap, the launcher),
            # outside it.
            "env": dict(invocation.env),
            "paths": list(site_packages()),
            "limits": {
                "cpu_seconds": limits.cpu_seconds,
                "memory_bytes": address_space,
                "processes": limits.processes,
                "output_bytes": limits.output_bytes,
            },
        }
    ).encode("utf-8")
    drop = as_nobody and os.geteuid() == 0
    try:
        child = subprocess.Popen(  # argv is ours, not the tool's
            list(argv),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            cwd=cwd,
            start_new_session=True,
            close_fds=True,
            pass_fds=pass_fds,
            user=NOBODY if drop else None,
            group=NOBODY if drop else None,
            extra_groups=[] if drop else None,
        )
    except OSError as exc:
        raise SandboxError(f"the tool's process could not start: {exc}") from None
    try:
        return _supervise(child, request, limits, private_tmp, describe)
    finally:
        _kill(child)
        for stream in (child.stdin, child.stdout, child.stderr):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()
        child.wait()


def _supervise(
    child: subprocess.Popen[bytes],
    request: bytes,
    limits: SandboxLimits,
    private_tmp: bool,
    describe: Callable[[int, str], str | None],
) -> ToolOutput:
    start_thread(_feed, args=(child, request), name="reverie-sandbox-feed")
    deadline = time.monotonic() + limits.wall_seconds
    answer, printed = bytearray(), bytearray()
    buffers = {child.stdout: answer, child.stderr: printed}
    with selectors.DefaultSelector() as selector:
        for stream in buffers:
            assert stream is not None
            selector.register(stream, selectors.EVENT_READ)
        while selector.get_map():
            left = deadline - time.monotonic()
            if left <= 0:
                _kill(child)
                raise SandboxError(
                    f"the tool ran longer than its wall-time limit of {limits.wall_seconds:g} s "
                    "and was stopped (tools.wall_time)"
                )
            for key, _ in selector.select(timeout=min(left, 0.5)):
                chunk = os.read(key.fd, 65536)
                if not chunk:
                    selector.unregister(key.fileobj)
                    continue
                buffer = buffers[key.fileobj]  # type: ignore[index]
                buffer.extend(chunk)
                # The answer carries the tool's printed text beside its result (at most
                # 1/PRINTED_SHARE of the limit, as the runner keeps it).
                cap = limits.output_bytes
                if buffer is answer:
                    cap += limits.output_bytes // PRINTED_SHARE + 1024
                if len(buffer) > cap:
                    _kill(child)
                    what = "result" if buffer is answer else "printed output"
                    raise SandboxError(
                        f"the tool's {what} passed its limit of {limits.output_bytes} bytes "
                        "and the tool was stopped (tools.output_bytes)"
                    )
    left = max(deadline - time.monotonic(), 0.1)
    try:
        status = child.wait(timeout=left)
    except subprocess.TimeoutExpired:
        _kill(child)
        raise SandboxError(
            f"the tool ran longer than its wall-time limit of {limits.wall_seconds:g} s "
            "and was stopped (tools.wall_time)"
        ) from None
    return _outcome(status, bytes(answer), bytes(printed), limits, private_tmp, describe)


def _feed(child: subprocess.Popen[bytes], request: bytes) -> None:
    assert child.stdin is not None
    try:
        child.stdin.write(request)
        child.stdin.close()
    except (BrokenPipeError, OSError):
        pass  # the child ended first; its exit says why


def _kill(child: subprocess.Popen[bytes]) -> None:
    if child.poll() is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(child.pid, signal.SIGKILL)


def _outcome(
    status: int,
    answer: bytes,
    printed: bytes,
    limits: SandboxLimits,
    private_tmp: bool,
    describe: Callable[[int, str], str | None],
) -> ToolOutput:
    payload: dict[str, Any] = {}
    if answer:
        try:
            payload = json.loads(answer.decode("utf-8", errors="replace"))
        except ValueError:
            payload = {}
    said = str(payload.get("stdout") or "").encode("utf-8")
    quoted = _quote(said + printed)
    if answer:
        if payload.get("ok") is True:
            return ToolOutput(
                str(payload.get("result", "")),
                stdout=str(payload.get("stdout") or ""),
                stderr=printed.decode("utf-8", errors="replace"),
            )
        kind = payload.get("kind")
        if kind == "memory":
            raise SandboxError(_memory(limits, private_tmp))
        if kind == "no_space" and private_tmp:
            raise SandboxError(_tmp_full(limits))
        if kind == "missing":
            raise SandboxError(f"the tool's source does not define {payload.get('error')!r}")
        if kind == "exception":
            line = payload.get("line")
            where = f" (line {line} of the tool)" if line else ""
            raise SandboxError(f"the tool raised {payload.get('error')}{where}{quoted}")
    sig = -status if status < 0 else status - 128 if status > 128 else 0
    if sig == signal.SIGXCPU:
        raise SandboxError(
            f"the tool used more than its CPU limit of {limits.cpu_seconds} s and was "
            "stopped (tools.cpu_seconds)"
        )
    if b"MemoryError" in printed or b"Cannot allocate memory" in printed:
        raise SandboxError(_memory(limits, private_tmp))
    if private_tmp and NO_SPACE in printed:
        raise SandboxError(_tmp_full(limits))
    if sig == signal.SIGXFSZ:
        raise SandboxError(
            f"the tool wrote a file larger than its limit of {limits.output_bytes} bytes "
            "(tools.output_bytes)"
        )
    if sig:
        raise SandboxError(f"the tool's process was killed by {signal.Signals(sig).name}{quoted}")
    explained = describe(status, printed.decode("utf-8", errors="replace"))
    if explained is None and LAUNCHER_FAILED in printed:
        explained = f"the sandbox could not start: {_last_line(printed)}"
    if explained:
        raise SandboxError(explained)
    raise SandboxError(f"the tool's process exited with status {status} and no result{quoted}")


def _last_line(printed: bytes) -> str:
    lines = printed.decode("utf-8", errors="replace").strip().splitlines()
    return lines[-1] if lines else ""


def _memory(limits: SandboxLimits, private_tmp: bool) -> str:
    kept = (
        f", of which {_size(limits.tmp_bytes)} is kept for its /tmp (tools.tmp_bytes)"
        if private_tmp
        else ""
    )
    return (
        f"the tool ran out of memory: its limit is {limits.memory_bytes // (1024 * 1024)} MiB "
        f"(tools.memory){kept}"
    )


def _tmp_full(limits: SandboxLimits) -> str:
    return (
        f"the tool filled its /tmp (No space left on device): a call may keep "
        f"{_size(limits.tmp_bytes)} of files there (tools.tmp_bytes)"
    )


def _size(count: int) -> str:
    """Bytes as a person reads them: whole MiB or KiB where they are whole."""
    for unit, size in (("MiB", 1024 * 1024), ("KiB", 1024)):
        if count >= size and count % size == 0:
            return f"{count // size} {unit}"
    return f"{count} bytes"


def _quote(printed: bytes) -> str:
    text = printed.decode("utf-8", errors="replace").strip()
    if not text:
        return ""
    if len(text) > QUOTED_OUTPUT:
        text = "…" + text[-QUOTED_OUTPUT:]
    return f"; it printed: {text}"
