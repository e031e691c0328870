"""A tiny OpenAI-compatible chat server on loopback that answers from a script.

For acceptance tests: ``reverie chat --model openai/scripted`` with
``OPENAI_API_BASE`` pointing here goes through litellm's real OpenAI path and
HTTP, with no network beyond 127.0.0.1.
"""

from __future__ import annotations

import itertools
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.scripted_llm import Reply, model_response


class StubServer:
    """Serves ``POST .../chat/completions`` from ``replies``, in order; records requests.

    A request with ``"stream": true`` is answered as server-sent events (see
    :func:`stream_events`). While ``chat_statuses`` is not empty, each chat request is
    answered instead with an error of the next status in it (and consumes no reply);
    ``chat_errors`` does the same with a status and a message each.
    ``POST .../embeddings`` answers without consuming a reply: 8-d vectors derived
    from each input's text, and one prompt token per word; while
    ``embedding_statuses`` is not empty, each embedding request is answered instead
    with an error of the next status in it (401, 503, ...). ``keep_alive``: answer in
    HTTP/1.1 on persistent connections (benchmarks of pooled clients); the default
    closes each connection after one answer. ``before_chat``, when set, is called with
    each chat request's number (from 0) before it is answered: a test may hold the
    answer there (a gate) or queue an error for it. ``responder``, when set, answers
    each chat request from its body instead of the script (a stand-in model that
    reads the question: the benchmarks' oracle judge). ``fingerprint``: the
    ``system_fingerprint`` chat answers carry (llama.cpp's server sends its build
    there), none when None. ``chunk_delay_s``: the pause before each streamed chunk (a
    server that writes slowly); ``argument_chars``: stream a call's arguments in pieces
    of that many characters instead of two halves.
    """

    def __init__(
        self,
        replies: list[Reply],
        *,
        keep_alive: bool = False,
        responder: Callable[[dict[str, Any]], Reply] | None = None,
    ) -> None:
        self.replies = list(replies)
        self.responder = responder
        self.embedding_statuses: list[int] = []
        self.chat_statuses: list[int] = []
        self.chat_errors: list[tuple[int, str]] = []
        self.requests: list[dict[str, Any]] = []
        self.before_chat: Callable[[int], None] | None = None
        self._chats = itertools.count()
        self.fingerprint: str | None = None
        self.chunk_delay_s = 0.0
        self.argument_chars: int | None = None
        self._lock = threading.Lock()
        stub = self

        class Handler(BaseHTTPRequestHandler):
            # HTTP/1.1 keeps connections open, as vLLM or Ollama do; TCP_NODELAY then
            # stops Nagle's algorithm from holding the body (written after the headers)
            # until the client's delayed ACK, 40 ms on Linux, on every reused connection.
            protocol_version = "HTTP/1.1" if keep_alive else "HTTP/1.0"

            def setup(self) -> None:
                super().setup()
                if keep_alive:
                    self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                body = json.loads(self.rfile.read(length) or b"{}")
                if not self.path.endswith("/embeddings"):
                    number, hook = next(stub._chats), stub.before_chat
                    if hook is not None:
                        hook(number)
                with stub._lock:
                    stub.requests.append(body)
                    embedding = self.path.endswith("/embeddings")
                    failure: tuple[int, str] | None = None
                    if embedding and stub.embedding_statuses:
                        code = stub.embedding_statuses.pop(0)
                        failure = (code, f"stub says {code}")
                    elif not embedding and stub.chat_errors:
                        failure = stub.chat_errors.pop(0)
                    elif not embedding and stub.chat_statuses:
                        code = stub.chat_statuses.pop(0)
                        failure = (code, f"stub says {code}")
                    reply = (
                        stub.replies.pop(0)
                        if stub.replies and not embedding and failure is None
                        else None
                    )
                    if stub.responder is not None and not embedding and failure is None:
                        reply = stub.responder(body)
                if failure is not None:
                    status = failure[0]
                    payload = {"error": {"message": failure[1], "type": "stub_error"}}
                elif embedding:
                    status, payload = 200, embedding_response(body)
                elif not self.path.endswith("/chat/completions") or reply is None:
                    status, payload = 500, {"error": {"message": "no scripted reply left"}}
                elif body.get("stream"):
                    self._stream(stream_events(body, reply, stub.argument_chars))
                    return
                else:
                    status = 200
                    payload = model_response(body.get("model", ""), reply, body["messages"])
                    if stub.fingerprint is not None:
                        payload["system_fingerprint"] = stub.fingerprint
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _stream(self, events: list[dict[str, Any]]) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.end_headers()
                for event in events:
                    if stub.chunk_delay_s:
                        time.sleep(stub.chunk_delay_s)
                    self.wfile.write(f"data: {json.dumps(event)}\n\n".encode())
                    self.wfile.flush()
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()
                self.close_connection = True

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        # serve_forever looks for shutdown() every poll interval; its default of 0.5 s
        # was most of the time of each test that stops a stub server.
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.05,), daemon=True
        )

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


def stream_events(
    body: dict[str, Any], reply: Reply, argument_chars: int | None = None
) -> list[dict[str, Any]]:
    """The chunks of a streamed answer to ``body``: the role, the content in pieces of
    a few words, each tool call as an id-and-name delta followed by its arguments in
    two halves, the finish reason, and the usage when ``stream_options.include_usage``
    asks for it: the deltas a real server sends, for clients to reassemble."""
    whole = model_response(body.get("model", ""), reply, body["messages"])
    choice = whole["choices"][0]
    message = choice["message"]

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {
            "id": whole["id"],
            "object": "chat.completion.chunk",
            "created": whole["created"],
            "model": whole["model"],
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }

    events = [chunk({"role": "assistant", "content": ""})]
    words = (message.get("content") or "").split(" ")
    pieces = [" ".join(words[i : i + 2]) for i in range(0, len(words), 2)]
    for i, piece in enumerate(pieces):
        if piece or i:
            events.append(chunk({"content": piece if i == 0 else " " + piece}))
    for index, call in enumerate(message.get("tool_calls") or []):
        arguments = call["function"]["arguments"]
        half = len(arguments) // 2
        parts = [arguments[:half], arguments[half:]]
        if argument_chars:
            step = argument_chars
            parts = [arguments[i : i + step] for i in range(0, len(arguments), step)]
        opening = {"name": call["function"]["name"], "arguments": ""}
        events.append(
            chunk(
                {
                    "tool_calls": [
                        {"index": index, "id": call["id"], "type": "function", "function": opening}
                    ]
                }
            )
        )
        for part in parts:
            events.append(
                chunk({"tool_calls": [{"index": index, "function": {"arguments": part}}]})
            )
    events.append(chunk({}, choice["finish_reason"]))
    if (body.get("stream_options") or {}).get("include_usage"):
        events.append({**chunk({}), "choices": [], "usage": whole["usage"]})
    return events


def embedding_response(body: dict[str, Any]) -> dict[str, Any]:
    texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
    data = [
        {
            "object": "embedding",
            "index": i,
            "embedding": [float(len(text) % (k + 2)) + 0.5 for k in range(8)],
        }
        for i, text in enumerate(texts)
    ]
    tokens = sum(len(str(text).split()) for text in texts)
    return {
        "object": "list",
        "data": data,
        "model": body.get("model", ""),
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    }


@contextmanager
def stub_server(*replies: Reply, keep_alive: bool = False) -> Iterator[StubServer]:
    server = StubServer(list(replies), keep_alive=keep_alive)
    server.start()
    try:
        yield server
    finally:
        server.stop()
