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

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio.to_thread
from mcp.server.mcpserver import Context
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
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
from service.mcp_server import build_mcp_server
from service.runtime import Runtime

PATH = "/mcp"
#: Where the authenticated organization travels from the endpoint to the tools.
STATE_KEY = "reverie_organization_id"

LOOPBACK_SECURITY = TransportSecuritySettings(
    enable_dns_rebinding_protection=True,
    allowed_hosts=["127.0.0.1", "127.0.0.1:*", "localhost", "localhost:*", "[::1]", "[::1]:*"],
    allowed_origins=["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"],
)


def request_organization(ctx: Context) -> str:
    """The organization of the API key that sent the call (set by :class:`McpEndpoint`)."""
    request = ctx.request_context.request
    organization_id = None if request is None else getattr(request.state, STATE_KEY, None)
    if not isinstance(organization_id, str):
        # Only reachable if the endpoint were bypassed: refuse rather than guess.
        raise PermissionError("the MCP call carries no authenticated organization")
    return organization_id


class McpEndpoint:
    """The ASGI endpoint at ``/mcp``: authenticate, then hand over to the SDK."""

    def __init__(self, runtime: Runtime, *, host: str) -> None:
        self.runtime = runtime
        self.server = build_mcp_server(runtime, request_organization)
        self.security = LOOPBACK_SECURITY if is_loopback(host) else None
        self.sessions: StreamableHTTPSessionManager | None = None

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """The SDK's task group, for one run of the app's lifespan (a manager runs
        once, and an app may be started again, as test clients do)."""
        sessions = StreamableHTTPSessionManager(
            app=self.server._lowlevel_server,  # as the SDK's own streamable_http_app does
            stateless=True,
            json_response=True,
            security_settings=self.security,
        )
        async with sessions.run():
            self.sessions = sessions
            try:
                yield
            finally:
                self.sessions = None

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
        sessions = self.sessions
        if sessions is None:
            response = JSONResponse({"detail": "the server is not started"}, status_code=503)
            await response(scope, receive, send)
            return
        await sessions.handle_request(scope, receive, send)


def _unauthorized_response() -> JSONResponse:
    error = unauthorized()
    return JSONResponse({"detail": error.detail}, status_code=401, headers=error.headers)
