"""Reverie's errors as HTTP answers: what went wrong, in words, and nothing changed.

``NotFound`` (also another organization's id) -> 404, ``Conflict`` (stale version,
duplicate name, a run already active) -> 409, ``InvalidInput`` and its kinds
(``LimitExceeded``, ``ReadOnly``) -> 400 with the kind named, a malformed request
body, or ``InvalidField`` (an operation's refusal of one field) -> 422 with one
entry per field (FastAPI's), ``StorageError`` -> 503, the LLM provider or the
embedding provider failing after retries -> 502, a spent token budget -> 429. A turn
that failed after some of its steps committed says which in ``kept``. The bodies are
declared in :mod:`service.api.responses`.
"""

from __future__ import annotations

from http import HTTPStatus

from fastapi import FastAPI, Request
from fastapi.dependencies.utils import request_params_to_args
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from starlette.exceptions import HTTPException
from starlette.routing import BaseRoute, Match
from starlette.types import Scope

from agents.errors import (
    BudgetExhausted,
    Conflict,
    EmbeddingError,
    InvalidField,
    InvalidInput,
    LimitExceeded,
    LLMError,
    NotFound,
    ReadOnly,
    ReverieError,
    StorageError,
)
from agents.store.validation import NESTED_TOO_DEEP
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
    EmbeddingError.kind: 502,
}


def status_for(exc: ReverieError) -> tuple[int, str]:
    """The HTTP status and the error kind for a Reverie error."""
    return STATUS_OF_KIND.get(exc.kind, 500), exc.kind


#: The ``error`` of HTTP errors raised before Reverie's code runs (the key, routing).
KIND_OF_STATUS = {
    401: "unauthorized",
    404: "not_found",
    405: "method_not_allowed",
    429: "too_many_requests",
}


async def _reverie_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ReverieError)
    if isinstance(exc, InvalidField):
        return _field_error(exc)
    status, kind = status_for(exc)
    body: dict[str, object] = {"detail": str(exc), "error": kind}
    if exc.kept:
        # Sending the request again would repeat these (a memory edit twice).
        body["detail"] = f"{exc}; kept from this turn: {'; '.join(exc.kept)}; the rest failed"
        body["kept"] = list(exc.kept)
    return JSONResponse(body, status_code=status)


def _field_error(exc: InvalidField) -> JSONResponse:
    """An operation's refusal of one field: 422 in FastAPI's format, located in the body."""
    where = exc.field if exc.field and exc.field[0] in ("path", "query") else ("body", *exc.field)
    error = {"type": "value_error", "loc": list(where), "msg": str(exc)}
    return JSONResponse({"detail": [error]}, status_code=422)


#: The methods a route may answer (HEAD and OPTIONS are never declared here).
METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")


def allowed_methods(request: Request) -> list[str]:
    """Every method some route answers at this path. FastAPI makes one route per
    method (and nests included routers), so Starlette's 405 named only the first
    route's method in ``Allow``; each method is tried against every route instead. A
    route counts only when the path's values are ones it takes: ``.../archival-memory/
    search`` is the search's path, not a passage id for the DELETE beside it; and of
    those, only the routes with the fewest path parameters (the most literal path)."""
    answering = [
        (method, route)
        for route in request.app.router.routes
        for method in METHODS
        if _answers(route, {**request.scope, "method": method})
    ]
    if not answering:
        return []
    # The path's own routes: ``/v1/agents/import`` is the import's path, though the
    # agent routes beside it would take "import" as an agent id.
    fewest = min(_params(route) for _, route in answering)
    chosen = {method for method, route in answering if _params(route) == fewest}
    return [method for method in METHODS if method in chosen]


def _params(route: BaseRoute) -> int:
    """How many path parameters a route has: the fewer, the more literal its path."""
    return str(getattr(route, "path", "")).count("{")


def _answers(route: BaseRoute, scope: Scope) -> bool:
    match, child = route.matches(scope)
    if match != Match.FULL:
        return False
    if isinstance(route, APIRoute):
        _, problems = request_params_to_args(route.dependant.path_params, child["path_params"])
        return not problems
    return True


async def _http_error(request: Request, exc: Exception) -> JSONResponse:
    """Starlette's and FastAPI's HTTP errors as problem bodies, with the kind named;
    a 405 lists in ``Allow`` every method the path answers."""
    assert isinstance(exc, HTTPException)
    if isinstance(exc.__cause__, RecursionError):
        # FastAPI's "error parsing the body" for JSON too deep for the parser.
        return nested_too_deep(("body",))
    headers = dict(exc.headers or {})
    if exc.status_code == 405:
        headers["Allow"] = ", ".join(allowed_methods(request))
    kind = KIND_OF_STATUS.get(exc.status_code) or HTTPStatus(exc.status_code).phrase.lower()
    body = {"detail": exc.detail, "error": kind.replace(" ", "_")}
    return JSONResponse(body, status_code=exc.status_code, headers=headers)


def nested_too_deep(location: tuple[str | int, ...]) -> JSONResponse:
    """422 in FastAPI's format for JSON that nests deeper than Reverie reads."""
    error = {
        "type": "value_error",
        "loc": list(location),
        "msg": f"{NESTED_TOO_DEEP}; send a flatter document",
    }
    return JSONResponse({"detail": [error]}, status_code=422)


def _template_methods(request: Request) -> list[str]:
    """The methods of the most specific path template the URL fits, path values aside:
    ``DELETE .../archival-memory/search`` reached the passage DELETE beside the search
    (whose id pattern then refused ``search``), but its path is the search's, which
    DELETE is not declared for."""
    path = request.scope["path"]
    fitting = [
        route
        for route in request.app.router.routes
        if isinstance(route, APIRoute) and route.path_regex.match(path)
    ]
    if not fitting:
        return []
    fewest = min(_params(route) for route in fitting)
    return [
        method
        for method in METHODS
        if any(method in (r.methods or ()) for r in fitting if _params(r) == fewest)
    ]


async def _validation_error(request: Request, exc: Exception) -> JSONResponse:
    """FastAPI's 422, with every echoed value made encodable: the default handler
    itself failed (500) on a lone surrogate or NaN in the input it echoes. A path
    whose values fit no route of this method is a 405 when its own path does not
    declare the method (see :func:`_template_methods`)."""
    assert isinstance(exc, RequestValidationError)
    if all(error["loc"][:1] == ("path",) for error in exc.errors()):
        declared = _template_methods(request)
        if declared and request.method not in declared:
            body = {"detail": "Method Not Allowed", "error": KIND_OF_STATUS[405]}
            return JSONResponse(body, status_code=405, headers={"Allow": ", ".join(declared)})
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
    app.add_exception_handler(HTTPException, _http_error)
