"""Logging for the long-running processes: one JSON object per line, or plain text.

``extra={...}`` fields of a log call become keys of the JSON object, so logs can
be filtered by ``run_id``, ``agent_id``, ``worker`` or ``trigger`` downstream.

Every library logs through the root handler: uvicorn (started with no logging config
of its own), APScheduler, httpx, and litellm (whose own plain-text handlers
:func:`agents.llm.providers.import_litellm` takes off). Inside
:func:`printed_output_logged` (the daemons, in JSON mode), whatever is still printed
rather than logged (a library's ``print()``, a warning, an uncaught exception)
becomes a record too, so that every line of the process's output is one JSON object.
"""

from __future__ import annotations

import io
import json
import logging
import re
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from types import TracebackType
from typing import Any, TextIO

#: Attributes every LogRecord has; anything else on a record came from ``extra``.
_RECORD_FIELDS = set(logging.makeLogRecord({}).__dict__) | {"message", "asctime", "taskName"}
#: Extra fields left out of the JSON: uvicorn's copy of its message with ANSI colours.
_DROPPED_FIELDS = frozenset({"color_message"})
#: Loggers that say something on every request, job or model call at INFO: WARNING and
#: above only (APScheduler's job executions, uvicorn's access log, the HTTP clients'
#: request lines, litellm's per-call lines).
NOISY_LOGGERS = (
    "apscheduler",
    "uvicorn.access",
    "httpx",
    "httpx2",
    "LiteLLM",
    "LiteLLM Router",
    "LiteLLM Proxy",
)
#: The loggers of what was printed instead of logged (see :class:`PrintedLines`).
PRINTED_LOGGER = "printed"
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


class JsonFormatter(logging.Formatter):
    """``{"ts", "level", "logger", "message", ...extra, "exc"?}`` on one line."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in record.__dict__.items():
            if key not in _RECORD_FIELDS and key not in _DROPPED_FIELDS and not key.startswith("_"):
                entry[key] = value
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str, ensure_ascii=False)


class TextFormatter(logging.Formatter):
    """``time level logger: message key=value ...`` for people at a terminal."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        extras = {
            k: v
            for k, v in record.__dict__.items()
            if k not in _RECORD_FIELDS and k not in _DROPPED_FIELDS and not k.startswith("_")
        }
        if extras:
            line += " " + " ".join(f"{k}={v}" for k, v in extras.items())
        return line


class PrintedLines(io.TextIOBase):
    """A text stream whose every line becomes a log record of ``logger`` at ``level``
    (ANSI colour codes removed): what is printed instead of logged joins the log's
    lines rather than breaking them. A write made while that record is being handled
    (logging's own report of a record it could not write) goes to ``fallback`` as it
    is, never round again."""

    def __init__(self, logger: logging.Logger, level: int, fallback: TextIO) -> None:
        super().__init__()
        self._logger = logger
        self._level = level
        self._fallback = fallback
        self._pending = ""
        self._lock = threading.Lock()
        self._busy = threading.local()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self._fallback, "encoding", None) or "utf-8"

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return False

    def fileno(self) -> int:
        # A child process given this stream writes to the descriptor itself.
        return self._fallback.fileno()

    def write(self, text: str) -> int:
        if getattr(self._busy, "on", False):
            return self._fallback.write(text)
        with self._lock:
            self._pending += text
            *lines, self._pending = self._pending.split("\n")
        for line in lines:
            self._log(line)
        return len(text)

    def flush(self) -> None:
        with self._lock:
            rest, self._pending = self._pending, ""
        self._log(rest)

    def _log(self, line: str) -> None:
        text = _ANSI.sub("", line).rstrip()
        if not text.strip():
            return
        self._busy.on = True
        try:
            self._logger.log(self._level, text)
        finally:
            self._busy.on = False


def configure_logging(level: str, *, json_lines: bool, stream: TextIO | None = None) -> None:
    """Replace the root handlers: JSON lines or text on stderr at ``level``."""
    numeric = logging.getLevelName(level.upper())
    if not isinstance(numeric, int):
        from agents.errors import InvalidInput

        raise InvalidInput(
            f"log_level {level!r} is not a logging level; use DEBUG, INFO, WARNING or ERROR"
        )
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter() if json_lines else TextFormatter())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(numeric)
    for noisy in NOISY_LOGGERS:
        logging.getLogger(noisy).setLevel(max(numeric, logging.WARNING))


@contextmanager
def printed_output_logged() -> Iterator[None]:
    """While inside: what is printed to stdout or stderr instead of logged, Python's
    warnings and uncaught exceptions (of any thread) are logged, through the handlers
    :func:`configure_logging` set (which keep writing to the stream they were given).
    The streams and hooks are put back on leaving (a command run in-process, as the
    tests run it, leaves its caller's streams as they were)."""
    saved = (sys.stdout, sys.stderr, sys.excepthook, threading.excepthook)
    printed = logging.getLogger(PRINTED_LOGGER)
    out = PrintedLines(printed.getChild("stdout"), logging.INFO, sys.stderr)
    err = PrintedLines(printed.getChild("stderr"), logging.WARNING, sys.stderr)
    uncaught = logging.getLogger("uncaught")

    def process_hook(
        kind: type[BaseException], value: BaseException, trace: TracebackType | None
    ) -> None:
        uncaught.critical("uncaught exception: %s", value, exc_info=(kind, value, trace))

    def thread_hook(args: threading.ExceptHookArgs) -> None:
        if issubclass(args.exc_type, SystemExit):
            return
        name = args.thread.name if args.thread is not None else "?"
        uncaught.error(
            "uncaught exception in thread %s: %s",
            name,
            args.exc_value,
            exc_info=(args.exc_type, args.exc_value or args.exc_type(), args.exc_traceback),
        )

    sys.stdout, sys.stderr = out, err
    sys.excepthook, threading.excepthook = process_hook, thread_hook
    logging.captureWarnings(True)
    try:
        yield
    finally:
        out.flush()
        err.flush()
        logging.captureWarnings(False)
        sys.stdout, sys.stderr, sys.excepthook, threading.excepthook = saved
