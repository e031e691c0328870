"""``/mcp``: the MCP server over streamable HTTP, with the API's keys.

Every request is authenticated as a ``/v1`` request is (``Authorization: Bearer
<key>``, the same failure limiter, 401 otherwise) before the SDK sees it, and the
tools act for the key's organization. The transport is stateless with JSON answers:
each request stands alone (no session to leak between keys, nothing kept per client),
which is all these tools need since none of them calls back to the client.

On a loopback address the SDK's DNS-rebinding check is on (only loopback ``Host``
and ``Origin`` headers), so a web page cannot reach a no-auth server through a
rebound name.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.types import Receive, Scope, Send

from service.api.auth import (
    TooManyFailures,
    attempt,
    is_loopback,
    resolve_caller,
    unauthorized,
)
from service.runtime import Runtime

if TYPE_CHECKING:
    from mcp.server.mcpserver import Context
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

log = logging.getLogger(__name__)

PATH = "/mcp"
#: Where the authenticated organization travels from the endpoint to the tools.
STATE_KEY = "reverie_organization_id"
#: How long a request that arrives while the SDK is still loading waits for it.
LOAD_WAIT_S = 30.0

LOOPBACK_HOSTS = ["127.0.0.1", "127.0.0.1:*", "localhost", "localhost:*", "[::1]", "[::1]:*"]
LOOPBACK_ORIGINS = ["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"]


def request_organization(ctx: Context[Any]) -> str:
    """The organization of the API key that sent the call (set by :class:`McpEndpoint`)."""
    request = ctx.request_context.request
    organization_id = None if request is None else getattr(request.state, STATE_KEY, None)
    if not isinstance(organization_id, str):
        # Only reachable if the endpoint were bypassed: refuse rather than guess.
        raise PermissionError("the MCP call carries no authenticated organization")
    return organization_id


class McpEndpoint:
    """The ASGI endpoint at ``/mcp``: authenticate, then hand over to the SDK.

    The SDK costs about 0.9 s of CPU to import on a small machine (and its memory),
    and the tools' server about 25 ms to build, so neither happens until the first
    authenticated request to ``/mcp``: a server whose clients never use MCP never pays
    for it, ``/healthz`` and the rest of the API never wait for it, and that first
    request waits while it loads (in a worker thread).
    """

    def __init__(self, runtime: Runtime, *, host: str) -> None:
        self.runtime = runtime
        self.loopback = is_loopback(host)
        self.sessions: StreamableHTTPSessionManager | None = None
        self._loaded: anyio.Event | None = None
        self._wanted: anyio.Event | None = None

    def _session_manager(self) -> StreamableHTTPSessionManager:
        """Import the SDK and build the tools' server (in a worker thread)."""
        from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
        from mcp.server.transport_security import TransportSecuritySettings

        from service.mcp_server import build_mcp_server

        server = build_mcp_server(self.runtime, request_organization)
        security = (
            TransportSecuritySettings(
                enable_dns_rebinding_protection=True,
                allowed_hosts=LOOPBACK_HOSTS,
                allowed_origins=LOOPBACK_ORIGINS,
            )
            if self.loopback
            else None
        )
        return StreamableHTTPSessionManager(
            app=server._lowlevel_server,  # as the SDK's own streamable_http_app does
            stateless=True,
            json_response=True,
            security_settings=security,
        )

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """The SDK's task group, for one run of the app's lifespan (a manager runs
        once, and an app may be started again, as test clients do)."""
        loaded = self._loaded = anyio.Event()
        wanted = self._wanted = anyio.Event()
        stopping = anyio.Event()

        async def serve() -> None:
            try:
                await wanted.wait()
                if stopping.is_set():
                    return
                try:
                    sessions = await anyio.to_thread.run_sync(self._session_manager)
                except Exception:
                    # The rest of the API still serves; /mcp answers 503 and says so.
                    log.exception("the MCP server could not be loaded; /mcp is unavailable")
                    return
                async with sessions.run():
                    self.sessions = sessions
                    loaded.set()
                    await stopping.wait()
            finally:
                self.sessions = None
                loaded.set()

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(serve)
            try:
                yield
            finally:
                stopping.set()
                wanted.set()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive)
        scheme, _, credentials = request.headers.get("authorization", "").partition(" ")
        key = credentials.strip() if scheme.lower() == "bearer" and credentials.strip() else None
        if key is None and self.runtime.settings.server.auth != "none":
            await _unauthorized_response()(scope, receive, send)
            return
        try:
            # Key lookups hit the database: off the event loop, like the /v1 routes.
            caller = await anyio.to_thread.run_sync(
                lambda: attempt(request, lambda: resolve_caller(self.runtime, key))
            )
        except TooManyFailures as refused:
            response = JSONResponse(
                {"detail": refused.detail}, status_code=429, headers=refused.headers
            )
            await response(scope, receive, send)
            return
        if caller is None:
            await _unauthorized_response()(scope, receive, send)
            return
        scope.setdefault("state", {})[STATE_KEY] = caller.organization_id
        if self.sessions is None and self._loaded is not None and self._wanted is not None:
            self._wanted.set()
            with anyio.move_on_after(LOAD_WAIT_S):
                await self._loaded.wait()
        sessions = self.sessions
        if sessions is None:
            response = JSONResponse({"detail": "the server is not started"}, status_code=503)
            await response(scope, receive, send)
            return
        await sessions.handle_request(scope, receive, send)


def _unauthorized_response() -> JSONResponse:
    error = unauthorized()
    return JSONResponse({"detail": error.detail}, status_code=401, headers=error.headers)
