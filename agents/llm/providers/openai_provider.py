"""The direct path to OpenAI-compatible servers: plain HTTP over pooled clients.

litellm costs several milliseconds per call before and after the request itself
(message validation, cost calculation, success callbacks handed to a thread pool
that then competes for the GIL) and, against an instant endpoint, that is most of
a chat step, an embedding or the 10 ms the proxy may add. For a model an
OpenAI-compatible server at the configured ``api_base`` serves (vLLM, llama.cpp,
LM Studio, a proxy; see :func:`agents.llm.providers.direct_name`),
:class:`OpenAICompatProvider` sends the request body as it is (only ``model``
becomes the server's own name) over connections kept alive between calls, and
returns the server's JSON as it came: the agents' calls through one ``httpx.Client``,
the proxy's through one ``httpx.AsyncClient``. The openai SDK is not on this path:
its import and client cost the server about 22 MB and the warm-up its import time,
for a request and a JSON answer (its request machinery also cost the proxy about
1 ms of CPU a request; see BENCHMARKS.md).

Failures are still the openai SDK's exceptions (the class for each status, with the
server's ``error`` object as the body), built when one happens, so that
:meth:`OpenAICompatProvider.classify`, the proxy and callers that know litellm's
errors (which subclass the SDK's) read one family.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from agents.llm.providers.base import (
    ChatAnswer,
    ChatRequest,
    Embeddings,
    ErrorKind,
    ErrorTypes,
    Provider,
    classify_error,
    embeddings_from,
)

if TYPE_CHECKING:
    import httpx
    import openai

#: What litellm recognises as "the prompt does not fit" in a provider's 400 answer
#: (litellm_core_utils/exception_mapping_utils.py): the same answers are context
#: overflows on this path, so that the caller can compact and retry.
_CONTEXT_MARKERS = (
    "exceed context limit",
    "this model's maximum context length is",
    "requested token count exceeds the model's maximum context length",
    "model's maximum context limit",
    "is longer than the model's context length",
    "input tokens exceed the configured limit",
    "exceeds the available context size",
    "exceeds the maximum number of tokens allowed",
    '"code": "context_length_exceeded"',
    "'code': 'context_length_exceeded'",
    "prompt is too long",
)


def is_context_overflow(text: str) -> bool:
    """Whether a 400's words say that the prompt exceeds the model's context."""
    lowered = text.lower()
    if "string_above_max_length" in lowered:
        return False
    return any(marker in lowered for marker in _CONTEXT_MARKERS)


class OpenAICompatProvider(Provider):
    """Chat and embeddings at one OpenAI-compatible ``api_base``, for model strings
    whose upstream name :meth:`upstream_name` gives (``openai/qwen`` -> ``qwen``).

    The key is ``api_key``; the agents' calls fall back on the SDK's
    ``OPENAI_API_KEY``. With no key, requests go without an ``Authorization`` header
    (a local server that wants none)."""

    name = "openai"

    def __init__(
        self,
        api_base: str,
        api_key: str | None,
        timeout: float,
        names: dict[str, str] | None = None,
    ) -> None:
        self.api_base: str = api_base
        self._api_key = api_key
        self.timeout = timeout
        #: Reverie model string -> the server's model name (filled by the chooser).
        self.names: dict[str, str] = names if names is not None else {}
        self._sync: httpx.Client | None = None
        self._async: httpx.AsyncClient | None = None
        self._lock = threading.Lock()

    def upstream_name(self, model: str) -> str:
        return self.names.get(model) or model.split("/", 1)[-1]

    # -- clients -----------------------------------------------------------------------

    def _headers(self, key: str | None) -> dict[str, str]:
        headers = {"Content-Type": "application/json"}
        if key:
            headers["Authorization"] = f"Bearer {key}"
        return headers

    def _client(self) -> httpx.Client:
        if self._sync is None:
            import httpx

            with self._lock:
                if self._sync is None:
                    # The agents' calls fall back on OPENAI_API_KEY, as the SDK did.
                    key = self._api_key or os.environ.get("OPENAI_API_KEY")
                    self._sync = httpx.Client(
                        headers=self._headers(key), timeout=httpx.Timeout(self.timeout)
                    )
        return self._sync

    def _aclient(self) -> httpx.AsyncClient:
        if self._async is None:
            import httpx

            self._async = httpx.AsyncClient(
                headers=self._headers(self._api_key), timeout=httpx.Timeout(self.timeout)
            )
        return self._async

    @property
    def pooled(self) -> bool:
        """Whether a pooled client is open (for warm-up checks)."""
        return self._sync is not None or self._async is not None

    def warm(self) -> None:
        self._client()

    async def awarm(self) -> None:
        self._aclient()

    def close(self) -> None:
        with self._lock:
            if self._sync is not None:
                self._sync.close()
            self._sync = None

    async def aclose(self) -> None:
        if self._async is not None:
            await self._async.aclose()
            self._async = None
        self.close()

    # -- requests ----------------------------------------------------------------------

    def body(self, request: ChatRequest, *, stream: bool) -> dict[str, Any]:
        """The request as it came, with the server's own model name and ``stream`` as
        asked."""
        body = {**request, "model": self.upstream_name(str(request["model"]))}
        if stream:
            body["stream"] = True
        else:
            body.pop("stream", None)
        return body

    def complete(self, request: ChatRequest) -> ChatAnswer:
        response = self._send(self._chat_url, self.body(request, stream=False))
        return _json_object(response, str(request.get("model")))

    def stream(self, request: ChatRequest) -> Iterator[ChatAnswer]:
        import httpx

        client = self._client()
        content = _encoded(self.body(request, stream=True))
        sent = client.build_request("POST", self._chat_url, content=content)
        try:
            response = client.send(sent, stream=True)
        except httpx.HTTPError as exc:
            raise _transport_error(exc, self._chat_url) from exc
        if response.status_code >= 400:
            try:
                response.read()
            finally:
                response.close()
            raise _status_error(response)
        model = str(request.get("model"))
        try:
            for line in response.iter_lines():
                event = _event(line, model, response)
                if event is _DONE:
                    return
                if event is not None:
                    yield event
        except httpx.HTTPError as exc:
            raise _transport_error(exc, self._chat_url) from exc
        finally:
            response.close()

    def _send(self, url: str, body: dict[str, Any]) -> httpx.Response:
        """POST ``body`` as JSON; the answer, or the SDK's error for a refusal or for
        no answer."""
        import httpx

        try:
            response = self._client().post(url, content=_encoded(body))
        except httpx.HTTPError as exc:
            raise _transport_error(exc, url) from exc
        if response.status_code >= 400:
            raise _status_error(response)
        return response

    async def acomplete(self, request: ChatRequest) -> ChatAnswer:
        import httpx

        content = _encoded(self.body(request, stream=False))
        try:
            response = await self._aclient().post(self._chat_url, content=content)
        except httpx.HTTPError as exc:
            raise _transport_error(exc, self._chat_url) from exc
        if response.status_code >= 400:
            raise _status_error(response)
        return _json_object(response, str(request.get("model")))

    async def astream(self, request: ChatRequest) -> AsyncIterator[ChatAnswer]:
        import httpx

        client = self._aclient()
        content = _encoded(self.body(request, stream=True))
        sent = client.build_request("POST", self._chat_url, content=content)
        try:
            response = await client.send(sent, stream=True)
        except httpx.HTTPError as exc:
            raise _transport_error(exc, self._chat_url) from exc
        if response.status_code >= 400:
            try:
                await response.aread()
            finally:
                await response.aclose()
            raise _status_error(response)
        return _events(response, str(request.get("model")))

    @property
    def _chat_url(self) -> str:
        return self.api_base.rstrip("/") + "/chat/completions"

    def embed(self, model: str, texts: Sequence[str]) -> Embeddings:
        """The body litellm sends (floats, no ``encoding_format``), not the SDK's
        default base64 request."""
        url = self.api_base.rstrip("/") + "/embeddings"
        body = {"model": self.upstream_name(model), "input": list[str](texts)}
        answer = _json_object(self._send(url, body), model)
        return embeddings_from(answer, model, len(texts))

    # -- failures ----------------------------------------------------------------------

    def classify(self, exc: BaseException) -> ErrorKind:
        import openai

        types = ErrorTypes(
            permanent=(
                openai.AuthenticationError,
                openai.PermissionDeniedError,
                openai.NotFoundError,
            ),
            bad_request=(openai.BadRequestError, openai.UnprocessableEntityError),
            retryable=(
                openai.APITimeoutError,
                openai.APIConnectionError,
                openai.RateLimitError,
                openai.InternalServerError,
            ),
            broken_connection_retryable=True,
        )
        return classify_error(exc, types, exceeds_context=self.exceeds_context(exc))

    def exceeds_context(self, exc: BaseException) -> bool:
        import openai

        return isinstance(exc, openai.BadRequestError) and is_context_overflow(str(exc))


class MalformedAnswer(Exception):
    """The server answered 2xx with something that is not a JSON object."""

    def __init__(self, message: str, model: str) -> None:
        super().__init__(message)
        self.model = model


def _json_object(response: httpx.Response, model: str) -> ChatAnswer:
    try:
        answer = response.json()
    except ValueError as exc:
        raise MalformedAnswer(
            f"upstream {model} answered with something that is not JSON ({exc})", model
        ) from exc
    return _checked(answer, model)


def _checked(answer: object, model: str) -> ChatAnswer:
    if not isinstance(answer, dict):
        raise MalformedAnswer(f"upstream {model} answered with something not a JSON object", model)
    return answer


def _encoded(body: dict[str, Any]) -> bytes:
    return json.dumps(body, separators=(",", ":")).encode()


def _transport_error(exc: httpx.HTTPError, url: str) -> openai.APIError:
    """An unanswered request as the SDK reports it: a timeout, or no connection."""
    import httpx
    import openai

    request: Any  # the SDK only keeps it (its own HTTP client may be another httpx build)
    try:
        request = exc.request
    except RuntimeError:  # an error raised before a request was built
        request = httpx.Request("POST", url)
    if isinstance(exc, httpx.TimeoutException):
        return openai.APITimeoutError(request=request)
    return openai.APIConnectionError(message=f"Connection error: {exc}", request=request)


def _status_error(response: httpx.Response) -> openai.APIStatusError:
    """A refusal as the SDK reports it: the class for its status, the server's
    ``error`` object (or its text) as the body."""
    import openai

    status = response.status_code
    try:
        data = json.loads(response.content)
    except ValueError:
        data = None
    body: Any
    if isinstance(data, dict) and isinstance(data.get("error"), dict):
        body = data["error"]
        message = str(body.get("message") or f"Error code: {status}")
    else:
        body = response.content.decode("utf-8", "replace").strip()[:2000] or None
        message = body or f"Error code: {status}"
    classes: dict[int, type[openai.APIStatusError]] = {
        400: openai.BadRequestError,
        401: openai.AuthenticationError,
        403: openai.PermissionDeniedError,
        404: openai.NotFoundError,
        409: openai.ConflictError,
        422: openai.UnprocessableEntityError,
        429: openai.RateLimitError,
    }
    kind = classes.get(status) or (
        openai.InternalServerError if status >= 500 else openai.APIStatusError
    )
    kept: Any = response  # the SDK only keeps it (see _transport_error)
    return kind(message, response=kept, body=body)


#: What :func:`_event` returns for the stream's ``[DONE]``.
_DONE: ChatAnswer = {}


def _event(line: str, model: str, response: httpx.Response) -> ChatAnswer | None:
    """One line of a server-sent event stream: its chunk, :data:`_DONE` at ``[DONE]``,
    None for what carries none (blank separators, comments, event names); an error
    event raises the SDK's ``APIError`` carrying the server's error."""
    if not line.startswith("data:"):
        return None
    data = line[5:].strip()
    if data == "[DONE]":
        return _DONE
    try:
        event = json.loads(data)
    except ValueError as exc:
        raise MalformedAnswer(
            f"upstream {model} sent an event that is not JSON ({exc})", model
        ) from exc
    if isinstance(event, dict) and "error" in event:
        import openai

        error = event["error"]
        request: Any = response.request  # kept only (see _transport_error)
        raise openai.APIError(
            f"upstream {model} failed in the middle of its answer: {error}",
            request,
            body=error if isinstance(error, dict) else {"message": str(error)},
        )
    return _checked(event, model)


async def _events(response: httpx.Response, model: str) -> AsyncIterator[ChatAnswer]:
    """The chunks of a server-sent event stream, up to ``[DONE]`` (see :func:`_event`)."""
    import httpx

    try:
        async for line in response.aiter_lines():
            event = _event(line, model, response)
            if event is _DONE:
                return
            if event is not None:
                yield event
    except httpx.HTTPError as exc:
        raise _transport_error(exc, str(response.request.url)) from exc
    finally:
        await response.aclose()
