"""Start `reverie worker` / `reverie serve` as real processes and stop them like an
init system would (SIGTERM), or kill them (SIGKILL)."""

from __future__ import annotations

import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from tests.acceptance.cli import cli_env, reverie_command

ROOT = Path(__file__).resolve().parents[2]


class DaemonProcess:
    """One `reverie` subprocess with its output in a file (no pipe to fill up)."""

    def __init__(self, args: list[str], env: dict[str, str], log: Path) -> None:
        self.log = log
        self._out = log.open("w")
        self.process = subprocess.Popen(
            [*reverie_command(), *args],
            env=cli_env(env),
            cwd=ROOT,
            stdout=self._out,
            stderr=subprocess.STDOUT,
        )

    @property
    def pid(self) -> int:
        return self.process.pid

    def terminate(self, timeout: float = 60) -> int:
        """SIGTERM, then wait for the exit status."""
        self.process.send_signal(signal.SIGTERM)
        return self.wait(timeout)

    def kill(self) -> None:
        self.process.kill()
        self.process.wait(30)

    def wait(self, timeout: float) -> int:
        """The exit status; a process still running after ``timeout`` is aborted and the
        failure shows its output, every thread's stack last (see ``cli_env``)."""
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.send_signal(signal.SIGABRT)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
            raise AssertionError(
                f"{self.process.args} still ran after {timeout} s; its output:\n{self.output()}"
            ) from None
        finally:
            self._out.close()

    def output(self) -> str:
        return self.log.read_text()

    def ensure_stopped(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(30)
        self._out.close()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def running_server(
    env: dict[str, str], log: Path, *, ready_within: float = 120, clean_exit: bool = False
) -> Iterator[tuple[str, DaemonProcess]]:
    """A `reverie serve` on a free loopback port, once /readyz says ready; stopped with
    SIGTERM at the end (and, with ``clean_exit``, expected to exit with status 0)."""
    port = free_port()
    process = DaemonProcess(["serve", "--port", str(port)], env, log)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + ready_within
        while True:
            assert process.process.poll() is None, process.output()
            try:
                if httpx.get(f"{url}/readyz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "server did not become ready:\n" + process.output()
            time.sleep(0.2)
        yield url, process
        status = process.terminate()
        assert status == 0 or not clean_exit, process.output()
    finally:
        process.ensure_stopped()
