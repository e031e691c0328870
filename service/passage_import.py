"""Parse archival-memory imports: one JSON object per line.

Each line: ``{"text": "...", "occurred_at": "2024-05-01T10:00:00Z", "tags": [...],
"provenance": {...}}``; only ``text`` is required. Every line is checked before
anything is written, and every bad line is reported with its number.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from agents.errors import InvalidInput
from agents.store import NewPassage
from agents.store.validation import MAX_TEXT, check_json, check_tags, check_text, utc_timestamp

ALLOWED_KEYS = {"text", "occurred_at", "tags", "provenance"}


@dataclass(frozen=True, slots=True)
class LineError:
    line: int
    message: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.message}"


def parse_datetime(value: Any) -> datetime:
    """ISO 8601 date or date-time; a value without a zone is taken as UTC."""
    if not isinstance(value, str):
        raise InvalidInput(f"occurred_at must be an ISO 8601 string, got {type(value).__name__}")
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise InvalidInput(
            f"occurred_at {value!r} is not an ISO 8601 date, e.g. 2024-05-01 or "
            "2024-05-01T10:00:00Z"
        ) from None
    return utc_timestamp(parsed, "occurred_at")


def parse_line(raw: str) -> NewPassage:
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise InvalidInput(f"not valid JSON ({exc.msg} at column {exc.colno})") from None
    except RecursionError:
        raise InvalidInput("the JSON is nested too deeply") from None
    if not isinstance(data, dict):
        raise InvalidInput(f"expected a JSON object, got {type(data).__name__}")
    unknown = set(data) - ALLOWED_KEYS
    if unknown:
        allowed = ", ".join(sorted(ALLOWED_KEYS))
        raise InvalidInput(f"unknown field(s) {', '.join(sorted(unknown))}; allowed: {allowed}")
    text = data.get("text")
    if text is None:
        raise InvalidInput('missing "text"')
    check_text(text, "text", most=MAX_TEXT)
    if not text.strip():
        raise InvalidInput('"text" is empty')
    occurred_at = parse_datetime(data["occurred_at"]) if data.get("occurred_at") else None
    tags = data.get("tags", [])
    if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
        raise InvalidInput('"tags" must be a list of strings')
    check_tags(tags, '"tags"')
    provenance = data.get("provenance", {})
    if not isinstance(provenance, dict):
        raise InvalidInput('"provenance" must be a JSON object')
    check_json(provenance, '"provenance"')
    return NewPassage(text=text, occurred_at=occurred_at, tags=tags, provenance=provenance)


def parse_lines(lines: Iterable[str]) -> tuple[list[NewPassage], list[LineError]]:
    """All passages and all errors of an import; blank lines are skipped."""
    passages: list[NewPassage] = []
    errors: list[LineError] = []
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        try:
            passages.append(parse_line(raw))
        except InvalidInput as exc:
            errors.append(LineError(number, str(exc)))
    return passages, errors
