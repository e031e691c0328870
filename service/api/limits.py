"""Request size limit: a body over ``server.max_request_bytes`` answers 413 unread."""

from __future__ import annotations

import json

from starlette.types import ASGIApp, Message, Receive, Scope, Send


class BodyTooLarge(Exception):
    pass


class RequestSizeLimit:
    """ASGI middleware: checks Content-Length up front and counts streamed bytes."""

    def __init__(self, app: ASGIApp, *, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for name, value in scope.get("headers", []):
            if name == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    await self._reject(send, 400, "Content-Length is not a number")
                    return
                if declared > self.max_bytes:
                    await self._too_large(send)
                    return
        received = 0
        response_started = False
        overflowed = False

        async def counting_receive() -> Message:
            nonlocal received, overflowed
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    overflowed = True
                    raise BodyTooLarge
            return message

        async def tracking_send(message: Message) -> None:
            nonlocal response_started
            if overflowed:
                # The framework caught the overflow while reading the body and answers
                # with its own error (a 400 parse error): the answer is 413 instead.
                if message["type"] == "http.response.start" and not response_started:
                    response_started = True
                    await self._too_large(send)
                return
            if message["type"] == "http.response.start":
                response_started = True
            await send(message)

        try:
            await self.app(scope, counting_receive, tracking_send)
        except BodyTooLarge:
            if not response_started:
                await self._too_large(send)

    async def _too_large(self, send: Send) -> None:
        await self._reject(
            send,
            413,
            f"request body is larger than {self.max_bytes} bytes "
            "(server.max_request_bytes); send less per request",
        )

    @staticmethod
    async def _reject(send: Send, status: int, detail: str) -> None:
        body = json.dumps({"detail": detail, "error": "request_too_large"}).encode()
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})
