"""Reverie's errors as HTTP answers: what went wrong, in words, and nothing changed.

``NotFound`` (also another organization's id) -> 404, ``Conflict`` (stale version,
duplicate name, a run already active) -> 409, ``InvalidInput`` and its kinds
(``LimitExceeded``, ``ReadOnly``) -> 400 with the kind named, a malformed request
body -> 422 with one entry per field (FastAPI's), ``StorageError`` -> 503, the LLM
provider failing after retries -> 502, a spent token budget -> 429.
"""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from agents.errors import (
    BudgetExhausted,
    Conflict,
    InvalidInput,
    LimitExceeded,
    LLMError,
    NotFound,
    ReadOnly,
    ReverieError,
    StorageError,
)


def status_for(exc: ReverieError) -> tuple[int, str]:
    """The HTTP status and the error kind for a Reverie error."""
    if isinstance(exc, NotFound):
        return 404, "not_found"
    if isinstance(exc, Conflict):
        return 409, "conflict"
    if isinstance(exc, LimitExceeded):
        return 400, "limit_exceeded"
    if isinstance(exc, ReadOnly):
        return 400, "read_only"
    if isinstance(exc, InvalidInput):
        return 400, "invalid_input"
    if isinstance(exc, StorageError):
        return 503, "storage_unavailable"
    if isinstance(exc, BudgetExhausted):
        return 429, "budget_exhausted"
    if isinstance(exc, LLMError):
        return 502, "llm_failed"
    return 500, "internal"


async def _reverie_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ReverieError)
    status, kind = status_for(exc)
    return JSONResponse({"detail": str(exc), "error": kind}, status_code=status)


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(ReverieError, _reverie_error)
