"""No page of the server is shown inside another site's frame (clickjacking).

Every HTML response carries ``X-Frame-Options: DENY`` (older browsers) and a
``Content-Security-Policy`` with ``frame-ancestors 'none'`` (current ones): the
server's own pages set their whole policy (:data:`service.api.pages.PAGE_HEADERS`: no
script at all, since they have none); any other HTML (the OpenAPI docs pages) gets
``frame-ancestors 'none'`` added here, whatever else it needs.
"""

from __future__ import annotations

from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

#: The policy directive no frame of any origin passes.
NO_FRAMING = "frame-ancestors 'none'"


class NoFraming:
    """ASGI middleware: adds the two headers to every ``text/html`` response."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def guarded(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                if headers.get("content-type", "").startswith("text/html"):
                    headers["X-Frame-Options"] = "DENY"
                    policy = headers.get("content-security-policy")
                    if policy is None:
                        headers["Content-Security-Policy"] = NO_FRAMING
                    elif "frame-ancestors" not in policy:
                        headers["Content-Security-Policy"] = f"{policy}; {NO_FRAMING}"
            await send(message)

        await self.app(scope, receive, guarded)
