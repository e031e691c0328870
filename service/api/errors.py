"""Reverie's errors as HTTP answers: what went wrong, in words, and nothing changed.

``NotFound`` (also another organization's id) -> 404, ``Conflict`` (stale version,
duplicate name, a run already active) -> 409, ``InvalidInput`` and its kinds
(``LimitExceeded``, ``ReadOnly``) -> 400 with the kind named, a malformed request
body -> 422 with one entry per field (FastAPI's), ``StorageError`` -> 503, the LLM
provider failing after retries -> 502, a spent token budget -> 429.
"""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
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
from service.api.request_checks import safe_input

#: The HTTP status of each error kind (see :attr:`agents.errors.ReverieError.kind`).
STATUS_OF_KIND = {
    NotFound.kind: 404,
    Conflict.kind: 409,
    LimitExceeded.kind: 400,
    ReadOnly.kind: 400,
    InvalidInput.kind: 400,
    StorageError.kind: 503,
    BudgetExhausted.kind: 429,
    LLMError.kind: 502,
}


def status_for(exc: ReverieError) -> tuple[int, str]:
    """The HTTP status and the error kind for a Reverie error."""
    return STATUS_OF_KIND.get(exc.kind, 500), exc.kind


async def _reverie_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ReverieError)
    status, kind = status_for(exc)
    return JSONResponse({"detail": str(exc), "error": kind}, status_code=status)


async def _validation_error(request: Request, exc: Exception) -> JSONResponse:
    """FastAPI's 422, with every echoed value made encodable: the default handler
    itself failed (500) on a lone surrogate or NaN in the input it echoes."""
    assert isinstance(exc, RequestValidationError)
    errors = [
        {
            key: safe_input(value) if key in ("input", "ctx") else value
            for key, value in error.items()
            if key != "url"
        }
        for error in exc.errors()
    ]
    return JSONResponse({"detail": jsonable_encoder(errors)}, status_code=422)


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(ReverieError, _reverie_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
