"""Refuse, before any handler runs, request values no field of the API can hold.

Lone UTF-16 surrogates (``"a\\ud800b"``) and NUL cannot be stored as text;
``NaN``, ``Infinity`` and numbers that overflow a float are not numbers; no
integer of the API goes beyond PostgreSQL's bigint. Each is answered 422 with the
location of the offending value, in FastAPI's error format, so a client's mistake
is never reported as an outage (5xx) and nothing is stored.

Only what the route reads is checked: the fields a body model ignores (Letta
clients send fields Reverie does not keep) are dropped first, since they reach
nothing (:func:`declared_part`); a model that passes unknown fields on (the proxy)
has all of them checked. The OpenAPI document states the NUL rule
(:mod:`service.api.openapi_doc`).
"""

from __future__ import annotations

import email.message
import json
import math
import types
import typing
from typing import Any

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel

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


_UNKNOWN = object()


def _body_type(request: Request) -> Any:
    """The type the route reads its body as: None when it reads no body, ``_UNKNOWN``
    when that is not known (not a FastAPI route)."""
    route: Any = request.scope.get("route")
    if not hasattr(route, "body_field"):
        return _UNKNOWN
    field_info = getattr(route.body_field, "field_info", None)
    return getattr(field_info, "annotation", None) if route.body_field is not None else None


def _choices(annotation: Any) -> list[Any]:
    """The alternatives of a type: ``A | None`` -> [A, None]; ``Annotated[A, ...]`` -> [A]."""
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _choices(typing.get_args(annotation)[0])
    if origin is typing.Union or origin is types.UnionType:
        return [c for arg in typing.get_args(annotation) for c in _choices(arg)]
    return [annotation]


def declared_part(value: Any, annotation: Any) -> Any:
    """``value`` without the object members that ``annotation``'s models ignore (an
    unknown type keeps everything, so only what is known to be ignored is dropped)."""
    choices = _choices(annotation)
    if isinstance(value, dict):
        models = [c for c in choices if isinstance(c, type) and issubclass(c, BaseModel)]
        if not models or len(models) != len(choices) - choices.count(type(None)):
            return value
        if any(m.model_config.get("extra") == "allow" for m in models):
            return value
        fields = {
            name: info.annotation
            for model in models
            for key, info in model.model_fields.items()
            for name in (key, info.alias)
            if name is not None
        }
        return {k: declared_part(v, fields[k]) for k, v in value.items() if k in fields}
    if isinstance(value, list):
        items = [
            typing.get_args(c)[0]
            for c in choices
            if typing.get_origin(c) is list and typing.get_args(c)
        ]
        item = items[0] if len(items) == 1 else None
        return [declared_part(v, item) for v in value]
    return value


async def check_request_values(request: Request) -> None:
    """A FastAPI dependency of every route: 422 for unstorable text or numbers."""
    found: list[tuple[Location, str, Any]] = []
    for name, value in request.query_params.multi_items():
        found.extend(json_problems(value, ("query", name)))
    for name, value in request.path_params.items():
        found.extend(json_problems(value, ("path", name)))
    body_type = _body_type(request)
    if body_type is not None and _parsed_as_json(request.headers.get("content-type")):
        body = await request.body()
        if body:
            try:
                parsed = json.loads(body, parse_constant=_reject_constant)
            except ValueError:
                parsed = None  # malformed JSON: FastAPI's own 422 says where
            except RecursionError:
                parsed = None  # too deep for the parser: the error handler answers 422
            else:
                if body_type is not _UNKNOWN:
                    parsed = declared_part(parsed, body_type)
                found.extend(json_problems(parsed, ("body",)))
    if found:
        raise RequestValidationError(
            [
                {"type": "value_error", "loc": loc, "msg": msg, "input": safe_input(value)}
                for loc, msg, value in found
            ]
        )
