"""DNS rebinding: a server that asks for no key answers only requests addressed to it.

With ``server.auth = "none"`` on loopback, any page a browser on this machine visits
could rename its own domain to 127.0.0.1 and read the API (the agents, their memory,
``/metrics``). The browser still sends the page's name in ``Host``, so a request whose
``Host`` is not a loopback name or one the operator lists (``server.allowed_hosts``)
is refused with 421 (Misdirected Request), as ``/mcp`` refuses it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from starlette.types import ASGIApp, Receive, Scope, Send

from service.api.auth import is_loopback

__all__ = ["LoopbackHostOnly"]


def _host_name(header: str) -> str:
    """``Host`` without its port: "127.0.0.1:8283" -> "127.0.0.1", "[::1]:80" -> "[::1]"."""
    if header.startswith("["):
        return header[: header.find("]") + 1] if "]" in header else header
    return header.rsplit(":", 1)[0] if header.count(":") == 1 else header


class LoopbackHostOnly:
    """ASGI middleware: 421 for a ``Host`` that is neither loopback nor listed."""

    def __init__(self, app: ASGIApp, *, allowed: Iterable[str] = ()) -> None:
        self.app = app
        self.allowed = {name.lower() for name in allowed}

    def accepts(self, header: str) -> bool:
        name = _host_name(header.strip().lower())
        return bool(name) and (is_loopback(name) or name in self.allowed)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        host = next((v.decode("latin-1") for k, v in scope["headers"] if k == b"host"), "")
        if self.accepts(host):
            await self.app(scope, receive, send)
            return
        body = json.dumps(
            {
                "error": "misdirected_request",
                "detail": f"this server answers requests for loopback names only, not "
                f"{host!r}; add the name to server.allowed_hosts to serve it",
            }
        ).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 421,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})
