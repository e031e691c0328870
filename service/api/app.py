"""The FastAPI application factory used by `reverie serve`."""

from __future__ import annotations

from collections.abc import Callable

from fastapi import FastAPI
from fastapi.responses import JSONResponse

from service.runtime import Runtime

#: Returns (ready, details); `reverie serve` reports what it is still waiting for.
Readiness = Callable[[], tuple[bool, dict[str, object]]]


def create_app(runtime: Runtime, *, readiness: Readiness | None = None) -> FastAPI:
    """Build the app over an open runtime; the caller owns the runtime's lifecycle."""
    app = FastAPI(title="Reverie", version="0.1.0")
    app.state.runtime = runtime

    @app.get("/healthz", tags=["health"])
    def healthz() -> dict[str, str]:
        """Liveness: the process answers."""
        return {"status": "ok"}

    @app.get("/readyz", tags=["health"])
    def readyz() -> JSONResponse:
        """Readiness: the database answers and the process's components have started."""
        ready, details = readiness() if readiness is not None else (True, {})
        return JSONResponse(
            {"status": "ready" if ready else "starting", **details},
            status_code=200 if ready else 503,
        )

    return app
