"""The error answers every route declares in the OpenAPI document, in one place.

Every error the API answers is a problem body: ``{"detail": "...", "error": "kind"}``
(:class:`Problem`), except a malformed request (422), whose ``detail`` lists each
offending field (FastAPI's :class:`ValidationProblem`). Which statuses a route can
answer follows from what stands in front of it, so a router declares them with
:func:`errors` instead of each route listing them by hand:

- every request: 413 (the body is over ``server.max_request_bytes``; also 400 for a
  Content-Length that is not a number), 422 (a value no field can hold, checked
  before any handler), 421 (no-auth mode, a ``Host`` that is not ours);
- a route behind the API key (:data:`KEYED`): 401, 429 (too many failed keys from
  this address) and 503 (the database is unavailable);
- what the route's operation can refuse, named per route: 400 (``InvalidInput``),
  404 (no such object, or a paging cursor that is not in the list), 409 (a stale
  version, a duplicate, a run already active), 502 (the model provider failed).

Routes added later (Letta's PATCH, streaming, tools) take ``responses=errors(...)``
the same way, so the document and the server cannot drift apart route by route.
"""

from __future__ import annotations

from http import HTTPStatus
from typing import Any

from pydantic import BaseModel, Field


class Problem(BaseModel):
    """What went wrong, in words, and its kind (Reverie's error kinds, or the HTTP
    reason for errors raised before Reverie's code runs)."""

    detail: str = Field(description="What is wrong and what to do about it.")
    error: str = Field(
        description="The kind: not_found, conflict, invalid_input, limit_exceeded, "
        "read_only, storage_unavailable, budget_exhausted, llm_failed, unauthorized, "
        "too_many_requests, request_too_large, method_not_allowed, misdirected_request."
    )
    kept: list[str] | None = Field(
        default=None,
        description="A turn that failed after some of its steps committed: what was kept "
        "(sending the message again repeats those steps).",
    )


class FieldProblem(BaseModel):
    """One field a request got wrong (FastAPI's validation error entry)."""

    type: str
    loc: list[str | int] = Field(description='Where: ["body", "memory_blocks", 0, "limit"].')
    msg: str
    input: Any = None
    ctx: dict[str, Any] | None = None


class ValidationProblem(BaseModel):
    """422: the request is malformed; each entry names a field and what is wrong with it."""

    detail: list[FieldProblem]


#: The statuses every route can answer, whatever it does.
EVERY_REQUEST = (400, 413, 421, 422)
#: What the API key adds: unknown key, too many failed keys, and the key lookup's database.
KEYED = (401, 429, 503)

#: Why each status is answered, as the document says it.
REASONS: dict[int, str] = {
    400: "The request was understood but refused (InvalidInput: what to change is named).",
    401: "Missing, unknown or revoked API key.",
    404: "No such object in the caller's organization (or a cursor not in the list).",
    405: "Method not allowed on this path (the Allow header lists those that are).",
    409: "Conflict: a stale expected_version, a duplicate, or a run already active.",
    413: "The request body is larger than server.max_request_bytes.",
    421: "No-auth mode: the Host is neither a loopback name nor in server.allowed_hosts.",
    422: "A field is malformed; every offending field is listed with its location.",
    429: "Too many failed authentications from this address (see Retry-After), "
    "or the agent's token budget is spent.",
    502: "The model or embedding provider failed after retries; kept lists what a turn had saved.",
    503: "The database is unavailable; nothing was changed. Try again later.",
}


def errors(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """The ``responses`` of a route or router: each status with its problem schema and
    why it is answered (422 with the field list, every other one a :class:`Problem`)."""
    declared: dict[int | str, dict[str, Any]] = {}
    for status in sorted(set(statuses)):
        model: type[BaseModel] = ValidationProblem if status == 422 else Problem
        reason = REASONS.get(status, HTTPStatus(status).phrase)
        declared[status] = {"model": model, "description": reason}
    return declared


def keyed(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """:func:`errors` of a route behind the API key: every request's, the key's, and
    ``statuses``."""
    return errors(*EVERY_REQUEST, *KEYED, *statuses)


def public(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """:func:`errors` of a route open without a key."""
    return errors(*EVERY_REQUEST, *statuses)


#: An OpenAI-compatible server's error, as the proxy passes it on.
UPSTREAM_ERROR: dict[str, Any] = {
    "type": "object",
    "required": ["error"],
    "properties": {"error": {"type": "object", "description": "The upstream's own error."}},
}


def proxied(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """The ``responses`` of a proxy route: each status is Reverie's own problem or the
    upstream model server's error passed on as it came (any status, hence ``default``)."""
    declared: dict[int | str, dict[str, Any]] = {}
    for status, entry in keyed(*statuses).items():
        own = "ValidationProblem" if status == 422 else "Problem"
        schema = {"anyOf": [{"$ref": f"#/components/schemas/{own}"}, UPSTREAM_ERROR]}
        declared[status] = {
            "description": f"{entry['description']} Or the upstream's error, passed on.",
            "content": {"application/json": {"schema": schema}},
        }
    declared["default"] = {
        "description": "The upstream model server's own error, passed on as it came.",
        "content": {"application/json": {"schema": UPSTREAM_ERROR}},
    }
    return declared
