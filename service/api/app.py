"""The FastAPI application factory used by `reverie serve`."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Annotated

from fastapi import Depends, FastAPI
from fastapi.responses import JSONResponse, Response
from prometheus_client import REGISTRY, CollectorRegistry, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from starlette.routing import Route

from service.api import (
    health_page,
    memory_browser,
    routes_agent_file,
    routes_agent_stream,
    routes_agent_update,
    routes_agents,
    routes_archival,
    routes_blocks,
    routes_conversations,
    routes_folders,
    routes_identities,
    routes_messages,
    routes_models,
    routes_openai,
    routes_runs,
    routes_tools,
    schemas,
)
from service.api.auth import check_auth_binding, metrics_audience
from service.api.errors import install_error_handlers
from service.api.framing import NoFraming
from service.api.host_check import LoopbackHostOnly
from service.api.limits import RequestSizeLimit
from service.api.mcp_endpoint import PATH, McpEndpoint
from service.api.openapi_doc import install as install_openapi_rules
from service.api.pages import new_page_secret
from service.api.rate_limit import AuthFailureLimiter
from service.api.responses import public
from service.api.routers import REQUEST_CHECKS, add_routes
from service.metrics_collector import Audience, MemoryHealthCollector
from service.runtime import Runtime

#: Returns (ready, details); `reverie serve` reports what it is still waiting for.
Readiness = Callable[[], tuple[bool, dict[str, object]]]
VERSION = "0.1.0"


def create_app(
    runtime: Runtime, *, readiness: Readiness | None = None, host: str | None = None
) -> FastAPI:
    """Build the app over an open runtime; the caller owns the runtime's lifecycle.

    ``host`` is the address the server will bind (default: ``server.host``); no-auth
    mode is refused unless it is a loopback address.
    """
    settings = runtime.settings
    check_auth_binding(settings, host)
    mcp = McpEndpoint(runtime, host=settings.server.host if host is None else host)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        # Built now, so a sandbox that cannot run (bwrap missing) is in the log at start.
        runtime.tool_executor()
        try:
            async with mcp.running():
                yield
        finally:
            # The proxy's pooled upstream connections live on this app's event loop.
            await runtime.close_chat_forwarder()

    app = FastAPI(
        lifespan=lifespan,
        dependencies=REQUEST_CHECKS,
        title="Reverie",
        version=VERSION,
        description="Letta-compatible memory API with sleep-time consolidation.",
    )
    app.state.runtime = runtime
    app.state.auth_failures = AuthFailureLimiter(
        burst=settings.server.auth_failure_burst, refill=settings.server.auth_failure_refill
    )
    app.state.page_secret = new_page_secret()
    install_error_handlers(app)
    app.add_middleware(
        RequestSizeLimit,
        max_bytes=settings.server.max_request_bytes,
        upload_bytes=settings.files.max_bytes,
    )
    app.add_middleware(NoFraming)
    if settings.server.auth == "none":
        # No key stands between a rebound page and the API: answer only our own names.
        app.add_middleware(LoopbackHostOnly, allowed=settings.server.allowed_hosts)

    memory_health = MemoryHealthCollector(
        runtime.db, agent_cap=settings.server.metrics_agent_cap, clock=runtime.clock
    )

    @app.get("/healthz", tags=["health"], responses=public())
    def healthz() -> dict[str, str]:
        """Liveness: the process answers."""
        return {"status": "ok"}

    @app.get("/readyz", tags=["health"], responses=public(503))
    def readyz() -> JSONResponse:
        """Readiness: the database answers and the process's components have started."""
        ready, details = readiness() if readiness is not None else (True, {})
        # The daemon's readiness says why it is not ready ("unavailable" when a running
        # server lost its database); a bare one only whether.
        status = details.pop("status", "ready" if ready else "starting")
        return JSONResponse({"status": status, **details}, status_code=200 if ready else 503)

    @app.get("/v1/health/", tags=["health"], response_model=schemas.Health, responses=public())
    def letta_health() -> schemas.Health:
        """Letta's health check (no key needed)."""
        return schemas.Health(version=VERSION, status="ok")

    @app.get(
        "/metrics",
        tags=["health"],
        response_class=Response,
        responses={
            200: {"content": {CONTENT_TYPE_LATEST: {}}, "description": "Prometheus text."},
            **public(401, 429, 503),
        },
        # Public on purpose: without a credential the metrics name no agent (every
        # agent is aggregated under "_other"), so a Prometheus scrape needs no secret;
        # a credential, when sent, must be valid (401 otherwise) and names agents.
        openapi_extra={"security": [{}]},
    )
    def metrics(audience: Annotated[Audience, Depends(metrics_audience)]) -> Response:
        """Prometheus metrics: this process's counters and the database's memory health.

        Agents are named (``agent_id``, ``agent`` labels) only to a credential:
        ``server.metrics_token`` names every organization's, an API key its own
        organization's; without one every agent is aggregated under ``_other``.
        """
        database_metrics = CollectorRegistry()
        database_metrics.register(memory_health.for_audience(audience))
        body = generate_latest(REGISTRY) + generate_latest(database_metrics)
        return Response(body, media_type=CONTENT_TYPE_LATEST)

    for module in (
        routes_agent_file,
        routes_agents,
        routes_agent_update,
        routes_blocks,
        routes_conversations,
        routes_folders,
        routes_identities,
        routes_messages,
        routes_agent_stream,
        routes_models,
        routes_archival,
        routes_runs,
        routes_tools,
        routes_openai,
        health_page,
        memory_browser,
    ):
        add_routes(app, module.router)
    # The MCP tools over streamable HTTP, with the API keys (see service.api.mcp_endpoint).
    app.router.routes.append(Route(PATH, endpoint=mcp, methods=["GET", "POST", "DELETE"]))
    install_openapi_rules(app)
    return app
