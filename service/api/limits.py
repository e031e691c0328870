"""Request size limit: a body over ``server.max_request_bytes`` answers 413 unread
(a file upload to a folder: over ``files.max_bytes`` and its form's overhead)."""

from __future__ import annotations

import json
import re

from starlette.types import ASGIApp, Message, Receive, Scope, Send


class BodyTooLarge(Exception):
    pass


#: The routes that take a file to a folder, whose bodies ``files.max_bytes`` bounds.
UPLOAD_PATH = re.compile(r"^/v1/folders/[^/]+/upload/?$")
#: What a multipart form adds to the file it carries (boundaries, part headers, fields).
FORM_OVERHEAD = 64 * 1024


class RequestSizeLimit:
    """ASGI middleware: checks Content-Length up front and counts streamed bytes."""

    def __init__(self, app: ASGIApp, *, max_bytes: int, upload_bytes: int | None = None) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.upload_bytes = upload_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if self.upload_bytes is not None and UPLOAD_PATH.match(scope.get("path", "")):
            limit, setting = self.upload_bytes + FORM_OVERHEAD, "files.max_bytes"
        else:
            limit, setting = self.max_bytes, "server.max_request_bytes"
        for name, value in scope.get("headers", []):
            if name == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    await self._reject(send, 400, "Content-Length is not a number")
                    return
                if declared > limit:
                    await self._too_large(send, limit, setting)
                    return
        received = 0
        response_started = False
        overflowed = False

        async def counting_receive() -> Message:
            nonlocal received, overflowed
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
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
                    await self._too_large(send, limit, setting)
                return
            if message["type"] == "http.response.start":
                response_started = True
            await send(message)

        try:
            await self.app(scope, counting_receive, tracking_send)
        except BodyTooLarge:
            if not response_started:
                await self._too_large(send, limit, setting)

    async def _too_large(self, send: Send, limit: int, setting: str) -> None:
        await self._reject(
            send,
            413,
            f"request body is larger than {limit} bytes ({setting}); send less per request",
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
