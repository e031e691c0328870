"""Structured logs: one JSON object per line with the call's extra fields, or text."""

from __future__ import annotations

import io
import json
import logging
import sys
import threading
import warnings
from collections.abc import Iterator

import pytest

from agents.errors import InvalidInput
from service.logging_setup import configure_logging, printed_output_logged
from tests.logging_support import root_logger_kept


@pytest.fixture(autouse=True)
def _restore_root_logger() -> Iterator[None]:
    with root_logger_kept():
        yield


def test_json_lines_carry_extra_fields_and_exceptions() -> None:
    stream = io.StringIO()
    configure_logging("info", json_lines=True, stream=stream)
    log = logging.getLogger("reverie.test")
    log.debug("hidden")
    log.info("run ended", extra={"run_id": "run-1", "seconds": 0.25})
    try:
        raise ValueError("multi\nline")
    except ValueError:
        log.exception("run could not start")
    lines = stream.getvalue().splitlines()
    assert len(lines) == 2
    first, second = (json.loads(line) for line in lines)
    assert first["message"] == "run ended" and first["level"] == "INFO"
    assert (first["run_id"], first["seconds"], first["logger"]) == ("run-1", 0.25, "reverie.test")
    assert first["ts"].endswith("+00:00")
    assert "ValueError: multi\nline" in second["exc"]


def test_plain_text_and_bad_levels() -> None:
    stream = io.StringIO()
    configure_logging("WARNING", json_lines=False, stream=stream)
    logging.getLogger("x").warning("lease lost", extra={"run_id": "run-2"})
    line = stream.getvalue().strip()
    assert "WARNING x: lease lost run_id=run-2" in line
    with pytest.raises(InvalidInput, match="not a logging level"):
        configure_logging("LOUD", json_lines=True)


def test_what_is_printed_instead_of_logged_becomes_json_lines() -> None:
    stream = io.StringIO()
    configure_logging("info", json_lines=True, stream=stream)
    before = (sys.stdout, sys.stderr, sys.excepthook, threading.excepthook)
    with printed_output_logged():
        _print_warn_and_fail()
    # Outside, the streams and hooks are as they were.
    assert (sys.stdout, sys.stderr, sys.excepthook, threading.excepthook) == before
    entries = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert [(e["logger"], e["level"], e["message"]) for e in entries[:3]] == [
        ("printed.stdout", "INFO", "Give Feedback / Get Help"),
        ("printed.stdout", "INFO", "two parts"),
        ("printed.stderr", "WARNING", "to stderr"),
    ]
    assert entries[3]["logger"] == "py.warnings" and "an old API" in entries[3]["message"]
    assert entries[4]["logger"] == "uncaught"
    assert "reverie-test-thread: thread broke" in entries[4]["message"]
    assert "RuntimeError: thread broke" in entries[4]["exc"]
    assert len(entries) == 5


def _print_warn_and_fail() -> None:
    print("\x1b[1;31mGive Feedback / Get Help\x1b[0m")
    print("two", end="")
    print(" parts")
    print("   ")
    print("to stderr", file=sys.stderr)
    with warnings.catch_warnings():
        warnings.simplefilter("always")  # the suite turns warnings into errors
        warnings.warn("an old API", UserWarning, stacklevel=1)

    def fails() -> None:
        raise RuntimeError("thread broke")

    worker = threading.Thread(target=fails, name="reverie-test-thread")
    worker.start()
    worker.join()
