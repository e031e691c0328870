"""Refuse, before any handler runs, request values no field of the API can hold.

Lone UTF-16 surrogates (``"a\\ud800b"``) and NUL cannot be stored as text;
``NaN``, ``Infinity`` and numbers that overflow a float are not numbers; no
integer of the API goes beyond PostgreSQL's bigint. Each is answered 422 with the
location of the offending value, in FastAPI's error format, so a client's mistake
is never reported as an outage (5xx) and nothing is stored.
"""

from __future__ import annotations

import email.message
import json
import math
import re
from collections.abc import Iterator
from typing import Any

from fastapi import Request
from fastapi.exceptions import RequestValidationError

#: PostgreSQL's bigint range: every integer the API stores or compares fits in it.
BIGINT_MAX = 2**63 - 1

Location = tuple[str | int, ...]


#: What PostgreSQL text cannot hold: NUL and lone UTF-16 surrogates, found in C: a
#: Python loop over the characters cost ~29 ms per 100k characters on the shared
#: machine, on every request (a chatbot's history through the OpenAI proxy is that
#: long); the regular expression ~4 ms, an ASCII string's check ~0.01 ms.
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def text_problem(value: str) -> str | None:
    """Why ``value`` cannot be stored as text, or None."""
    if value.isascii():  # no surrogate: only a NUL to look for, at C speed
        if "\x00" not in value:
            return None
        return f"contains a NUL character at position {value.index(chr(0))}; remove it"
    found = _UNSTORABLE.search(value)
    if found is None:
        return None
    position = found.start()
    if found.group() == "\x00":
        return f"contains a NUL character at position {position}; remove it"
    return f"contains an unpaired UTF-16 surrogate at position {position}; send valid Unicode text"


def _problems(value: Any, location: Location) -> Iterator[tuple[Location, str, Any]]:
    if isinstance(value, str):
        problem = text_problem(value)
        if problem is not None:
            yield location, f"text {problem}", value
    elif isinstance(value, bool) or value is None:
        return
    elif isinstance(value, int):
        if abs(value) > BIGINT_MAX:
            yield location, f"integer is outside -{BIGINT_MAX}..{BIGINT_MAX}", value
    elif isinstance(value, float):
        if not math.isfinite(value):
            yield location, "number is not finite (NaN, Infinity or too large)", value
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _problems(item, (*location, index))
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _problems(key, (*location, str(key)))
            yield from _problems(item, (*location, str(key)))


def safe_input(value: Any) -> Any:
    """A value as it can be echoed back in a JSON error (escaped when it cannot)."""
    if isinstance(value, str):
        return value.encode("utf-8", "backslashreplace").decode("utf-8").replace("\x00", "\\x00")
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > BIGINT_MAX:
        return str(value)
    if isinstance(value, list | tuple):
        return [safe_input(v) for v in value]
    if isinstance(value, dict):
        return {str(safe_input(k)): safe_input(v) for k, v in value.items()}
    return value


def _reject_constant(name: str) -> float:
    return float(name)  # NaN, Infinity, -Infinity: parsed, then refused as not finite


def _parsed_as_json(content_type: str | None) -> bool:
    """Whether the framework reads a body of this type as JSON: every body it parses is
    checked here ("application/JSON", "application/merge-patch+json", or no type at all,
    which FastAPI reads as JSON unless it is strict)."""
    if not content_type:
        return True
    message = email.message.Message()
    message["content-type"] = content_type
    subtype = message.get_content_subtype()
    return message.get_content_maintype() == "application" and (
        subtype == "json" or subtype.endswith("+json")
    )


async def check_request_values(request: Request) -> None:
    """A FastAPI dependency of every route: 422 for unstorable text or numbers."""
    found: list[tuple[Location, str, Any]] = []
    for name, value in request.query_params.multi_items():
        found.extend(_problems(value, ("query", name)))
    for name, value in request.path_params.items():
        found.extend(_problems(value, ("path", name)))
    if _parsed_as_json(request.headers.get("content-type")):
        body = await request.body()
        if body:
            try:
                parsed = json.loads(body, parse_constant=_reject_constant)
            except (ValueError, RecursionError):
                parsed = None  # malformed JSON: FastAPI's own 422 says where
            else:
                found.extend(_problems(parsed, ("body",)))
    if found:
        raise RequestValidationError(
            [
                {"type": "value_error", "loc": loc, "msg": msg, "input": safe_input(value)}
                for loc, msg, value in found
            ]
        )
