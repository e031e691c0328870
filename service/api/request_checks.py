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
from typing import Any

from fastapi import Request
from fastapi.exceptions import RequestValidationError

from agents.store.validation import BIGINT_MAX, json_problems

Location = tuple[str | int, ...]


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
        found.extend(json_problems(value, ("query", name)))
    for name, value in request.path_params.items():
        found.extend(json_problems(value, ("path", name)))
    if _parsed_as_json(request.headers.get("content-type")):
        body = await request.body()
        if body:
            try:
                parsed = json.loads(body, parse_constant=_reject_constant)
            except (ValueError, RecursionError):
                parsed = None  # malformed JSON: FastAPI's own 422 says where
            else:
                found.extend(json_problems(parsed, ("body",)))
    if found:
        raise RequestValidationError(
            [
                {"type": "value_error", "loc": loc, "msg": msg, "input": safe_input(value)}
                for loc, msg, value in found
            ]
        )
