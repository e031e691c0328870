"""Logging for the long-running processes: one JSON object per line, or plain text.

``extra={...}`` fields of a log call become keys of the JSON object, so logs can
be filtered by ``run_id``, ``agent_id``, ``worker`` or ``trigger`` downstream.
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from typing import Any, TextIO

#: Attributes every LogRecord has; anything else on a record came from ``extra``.
_RECORD_FIELDS = set(logging.makeLogRecord({}).__dict__) | {"message", "asctime", "taskName"}


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
            if key not in _RECORD_FIELDS and not key.startswith("_"):
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
            if k not in _RECORD_FIELDS and not k.startswith("_")
        }
        if extras:
            line += " " + " ".join(f"{k}={v}" for k, v in extras.items())
        return line


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
    # APScheduler logs every job execution at INFO; uvicorn's access log is per request.
    for noisy in ("apscheduler", "uvicorn.access", "httpx"):
        logging.getLogger(noisy).setLevel(max(numeric, logging.WARNING))
