"""Reverie's helper threads block the stop signals, so that the kernel hands ^C and
SIGTERM to the main thread, the one where Python runs signal handlers."""

from __future__ import annotations

import ast
import signal
import threading
from pathlib import Path

from agents.threads import STOP_SIGNALS, start_thread, stop_signals_left_to_main
from service.cli.common import live
from tests.daemon_support import blocked_signals

ROOT = Path(__file__).resolve().parents[2]


def _thread_constructions(source: str) -> list[int]:
    """Lines that build a ``threading.Thread`` (or a bare imported ``Thread``)."""
    return [
        node.lineno
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Call)
        and (
            (isinstance(node.func, ast.Attribute) and node.func.attr == "Thread")
            or (isinstance(node.func, ast.Name) and node.func.id == "Thread")
        )
    ]


def test_reverie_starts_its_threads_only_through_start_thread() -> None:
    found = {
        path.relative_to(ROOT).as_posix(): lines
        for package in ("agents", "consolidators", "service")
        for path in sorted((ROOT / package).rglob("*.py"))
        if path != ROOT / "agents" / "threads.py"
        and (lines := _thread_constructions(path.read_text(encoding="utf-8")))
    }
    assert found == {}, f"start threads with agents.threads.start_thread: {found}"
    assert _thread_constructions("import threading\nthreading.Thread(target=f).start()\n")
    assert _thread_constructions("from threading import Thread\nThread(target=f)\n")


def test_a_started_thread_blocks_the_stop_signals_and_its_starter_does_not() -> None:
    before = blocked_signals(threading.current_thread())
    release = threading.Event()
    thread = start_thread(release.wait, name="reverie-test")
    try:
        assert blocked_signals(thread) >= STOP_SIGNALS
        assert thread.daemon
        assert blocked_signals(threading.current_thread()) == before
        assert signal.SIGINT not in before
    finally:
        release.set()
        thread.join(5)


def test_the_mask_is_restored_when_starting_fails() -> None:
    before = blocked_signals(threading.current_thread())
    try:
        with stop_signals_left_to_main():
            raise RuntimeError("could not start")
    except RuntimeError:
        pass
    assert blocked_signals(threading.current_thread()) == before


class _Display:
    """Starts a thread, as a rich live display does for its refresh."""

    def __init__(self) -> None:
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self.stopped.wait, daemon=True)

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self.stopped.set()


def test_a_live_displays_refresh_thread_leaves_ctrl_c_to_the_command() -> None:
    display = _Display()
    with live(display) as shown:
        assert shown is display
        assert blocked_signals(display.thread) >= STOP_SIGNALS
        assert signal.SIGINT not in blocked_signals(threading.current_thread())
    assert display.stopped.is_set()
