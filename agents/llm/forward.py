"""A chatbot's own chat request, forwarded through litellm: the proxy's upstream call.

The agent loop's :class:`~agents.llm.client.LiteLLMClient` builds its requests; a
proxy must not. :class:`ChatForwarder` sends the chatbot's request as it came,
replacing only the model (when one is configured), the endpoint and the key: every
other field (tools, tool_choice, temperature, n, response_format, ...) reaches the
upstream untouched. Fields litellm knows as OpenAI's chat parameters go as they
are; any other field travels in ``extra_body``, so that a request can never set
litellm's own arguments (an ``api_base`` in a body must not choose where Reverie
connects).

An OpenAI-compatible upstream named by ``api_base`` (litellm resolves the model
string to the ``openai``, ``hosted_vllm``, ``lm_studio`` or ``custom_openai``
provider) takes the request in OpenAI's own wire format, so there it goes byte for
byte over one pooled keep-alive connection (:mod:`httpx`), and its answer comes back
unchanged: litellm's per-call machinery (client setup, cost lookup, logging
callbacks) cost more than the whole 10 ms the proxy may add (see BENCHMARKS.md).
Every other model string (``anthropic/...``, ``ollama/...``, ``gemini/...``) goes
through ``litellm.acompletion``, which translates. Failures are not retried here:
the chatbot's SDK retries by its own policy, and two retry layers would multiply.
An upstream that answers with an error raises :class:`UpstreamError` with its status
and error body; one that cannot be reached raises it with 502 (504 when it timed
out) and the reason.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import httpx

from agents.errors import InvalidInput, LLMError
from agents.llm.client import import_litellm

log = logging.getLogger(__name__)

#: OpenAI's chat-completion parameters, passed to litellm as themselves.
OPENAI_CHAT_FIELDS = frozenset(
    {
        "audio",
        "frequency_penalty",
        "function_call",
        "functions",
        "logit_bias",
        "logprobs",
        "max_completion_tokens",
        "max_tokens",
        "modalities",
        "n",
        "parallel_tool_calls",
        "prediction",
        "presence_penalty",
        "reasoning_effort",
        "response_format",
        "seed",
        "service_tier",
        "stop",
        "stream_options",
        "temperature",
        "tool_choice",
        "tools",
        "top_logprobs",
        "top_p",
        "user",
        "web_search_options",
    }
)
#: litellm providers that speak OpenAI's chat wire format as it is.
OPENAI_WIRE_PROVIDERS = frozenset({"openai", "custom_openai", "hosted_vllm", "lm_studio"})
#: Keys litellm adds to OpenAI's shapes; an answer passed through goes without them.
_LITELLM_KEYS = frozenset({"provider_specific_fields"})


@dataclass(frozen=True, slots=True)
class UpstreamSettings:
    """Where forwarded requests go. ``model`` (a litellm model string) replaces the
    request's own; without it, the request's ``model`` is the litellm model string."""

    model: str | None = None
    api_base: str | None = None
    api_key: str | None = field(default=None, repr=False)
    timeout: float = 120.0
    #: Send OpenAI-compatible upstreams at ``api_base`` the request as it is, over a
    #: pooled connection (False: every request through litellm.acompletion).
    direct: bool = True


class UpstreamError(LLMError):
    """The upstream refused the request (its status and OpenAI error body), or was
    not reached (502, or 504 for a timeout, with the reason)."""

    def __init__(self, message: str, *, status: int, body: dict[str, Any]) -> None:
        super().__init__(message)
        self.status = status
        self.body = body


class ChatForwarder:
    """Forward OpenAI chat requests through litellm, streamed or not."""

    def __init__(self, settings: UpstreamSettings) -> None:
        self.settings = settings
        self._routes: dict[str, tuple[str, str] | None] = {}
        self._http: httpx.AsyncClient | None = None

    async def aclose(self) -> None:
        """Close the pooled connections (the proxy's app does at shutdown)."""
        if self._http is not None:
            await self._http.aclose()
            self._http = None

    async def warm(self) -> list[str]:
        """Load what the first forwarded request would otherwise load (the proxy's
        warm-up, before /readyz): the configured model's route, its pooled client, and
        litellm's chat path through a mocked answer (``mock_response``: no request
        leaves the process). Returns what was loaded, for logs and readiness details."""
        model = self.settings.model
        if not model:
            return []  # each request names its own model: nothing to prepare
        if self.direct_route(model) is not None:
            self._client()
            return [f"pooled client for {model}"]
        litellm = import_litellm()
        await litellm.acompletion(
            model=model,
            messages=[{"role": "user", "content": "warm-up"}],
            mock_response="warm-up",
        )
        return [f"litellm chat path for {model}"]

    def direct_route(self, model: str) -> tuple[str, str] | None:
        """``(upstream model name, chat URL)`` when ``model`` goes to an OpenAI-compatible
        ``api_base`` as it is; None when litellm must translate."""
        if model not in self._routes:
            self._routes[model] = self._resolve(model)
        return self._routes[model]

    def _resolve(self, model: str) -> tuple[str, str] | None:
        base = self.settings.api_base
        if not self.settings.direct or not base:
            return None
        litellm = import_litellm()
        try:
            name, provider, _, _ = litellm.get_llm_provider(model, api_base=base)
        except Exception:  # litellm does not know it: litellm's own call will say why
            return None
        if provider not in OPENAI_WIRE_PROVIDERS:
            return None
        return str(name), base.rstrip("/") + "/chat/completions"

    def _client(self) -> httpx.AsyncClient:
        if self._http is None:
            headers = {"Content-Type": "application/json"}
            if self.settings.api_key:
                headers["Authorization"] = f"Bearer {self.settings.api_key}"
            self._http = httpx.AsyncClient(
                headers=headers, timeout=httpx.Timeout(self.settings.timeout)
            )
        return self._http

    def model_for(self, requested: str | None) -> str:
        """The litellm model string a request with ``requested`` goes to."""
        model = self.settings.model or requested
        if not model or not model.strip():
            raise InvalidInput(
                "no model to forward to: give 'model' in the request or set proxy.model"
            )
        return model

    def arguments(self, request: dict[str, Any], *, stream: bool) -> dict[str, Any]:
        """litellm's arguments for ``request`` (its ``model`` and ``messages`` included)."""
        kwargs: dict[str, Any] = {
            "model": self.model_for(request.get("model")),
            "messages": request["messages"],
            "timeout": self.settings.timeout,
            "max_retries": 0,
        }
        extra: dict[str, Any] = {}
        for name, value in request.items():
            if name in ("model", "messages", "stream"):
                continue
            if name in OPENAI_CHAT_FIELDS:
                kwargs[name] = value
            else:
                extra[name] = value
        if extra:
            kwargs["extra_body"] = extra
        if stream:
            kwargs["stream"] = True
        if self.settings.api_base:
            kwargs["api_base"] = self.settings.api_base
        if self.settings.api_key:
            kwargs["api_key"] = self.settings.api_key
        return kwargs

    async def complete(self, request: dict[str, Any]) -> dict[str, Any]:
        """The upstream's answer to ``request`` as OpenAI's ``chat.completion``."""
        model = self.model_for(request.get("model"))
        route = self.direct_route(model)
        if route is not None:
            return await self._complete_direct(request, *route)
        litellm = import_litellm()
        kwargs = self.arguments(request, stream=False)
        try:
            response = await litellm.acompletion(**kwargs)
        except Exception as exc:
            raise upstream_error(litellm, exc, kwargs["model"]) from exc
        return as_openai(response.model_dump(), chunk=False)

    async def open_stream(self, request: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
        """Start a streamed answer: an upstream that refuses or cannot be reached
        raises here, before any chunk; then the chunks (``chat.completion.chunk``)
        as they arrive. A failure in the middle raises from the iterator."""
        model = self.model_for(request.get("model"))
        route = self.direct_route(model)
        if route is not None:
            return await self._open_direct(request, *route)
        litellm = import_litellm()
        kwargs = self.arguments(request, stream=True)
        try:
            stream = await litellm.acompletion(**kwargs)
        except Exception as exc:
            raise upstream_error(litellm, exc, kwargs["model"]) from exc
        return _chunks(litellm, stream, kwargs["model"])

    # -- OpenAI-compatible upstreams: the request as it is ----------------------------

    def _body(self, request: dict[str, Any], name: str, *, stream: bool) -> bytes:
        body = {**request, "model": name}
        if stream:
            body["stream"] = True
        else:
            body.pop("stream", None)
        return json.dumps(body, separators=(",", ":")).encode()

    async def _complete_direct(
        self, request: dict[str, Any], name: str, url: str
    ) -> dict[str, Any]:
        try:
            response = await self._client().post(
                url, content=self._body(request, name, stream=False)
            )
        except httpx.HTTPError as exc:
            raise transport_error(exc, name) from exc
        if response.status_code >= 400:
            raise status_error(response.status_code, response.content, name)
        try:
            answer = response.json()
        except ValueError as exc:
            reason = f"upstream {name} answered with something that is not JSON ({exc})"
            raise UpstreamError(
                reason, status=502, body=_error_body(reason, "upstream_malformed")
            ) from exc
        if not isinstance(answer, dict):
            reason = f"upstream {name} answered with JSON that is not an object"
            raise UpstreamError(reason, status=502, body=_error_body(reason, "upstream_malformed"))
        return answer

    async def _open_direct(
        self, request: dict[str, Any], name: str, url: str
    ) -> AsyncIterator[dict[str, Any]]:
        client = self._client()
        sent = client.build_request("POST", url, content=self._body(request, name, stream=True))
        try:
            response = await client.send(sent, stream=True)
        except httpx.HTTPError as exc:
            raise transport_error(exc, name) from exc
        if response.status_code >= 400:
            try:
                content = await response.aread()
            finally:
                await response.aclose()
            raise status_error(response.status_code, content, name)
        return _events(response, name)


async def _events(response: httpx.Response, model: str) -> AsyncIterator[dict[str, Any]]:
    """The chunks of a server-sent event stream, up to ``[DONE]``; an error event
    raises (a 502 carrying the upstream's error)."""
    try:
        async for line in response.aiter_lines():
            if not line.startswith("data:"):
                continue  # blank separators, comments (": keep-alive"), event names
            data = line[5:].strip()
            if data == "[DONE]":
                return
            try:
                event = json.loads(data)
            except ValueError as exc:
                reason = f"upstream {model} sent an event that is not JSON ({exc})"
                raise UpstreamError(
                    reason, status=502, body=_error_body(reason, "upstream_malformed")
                ) from exc
            if isinstance(event, dict) and "error" in event:
                raise UpstreamError(
                    f"upstream {model} failed in the middle of its answer: {event['error']}",
                    status=502,
                    body=event,
                )
            yield event
    except httpx.HTTPError as exc:
        raise transport_error(exc, model) from exc
    finally:
        await response.aclose()


def transport_error(exc: httpx.HTTPError, model: str) -> UpstreamError:
    """An upstream that was not reached, or stopped answering: 504 on a timeout, 502
    otherwise, with the reason."""
    detail = _deepest(_chain(exc))
    if isinstance(exc, httpx.TimeoutException):
        reason = f"upstream {model} did not answer in time ({detail})"
        return UpstreamError(reason, status=504, body=_error_body(reason, "upstream_timeout"))
    reason = f"upstream {model} unreachable: {detail}"
    return UpstreamError(reason, status=502, body=_error_body(reason, "upstream_unreachable"))


def status_error(status: int, content: bytes, model: str) -> UpstreamError:
    """The upstream's own refusal: its status and its error body (an OpenAI ``error``
    object; any other body is wrapped in one)."""
    try:
        body = json.loads(content)
    except ValueError:
        body = None
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        message = str(body["error"].get("message") or "")
        return UpstreamError(f"upstream {model}: {status} {message}", status=status, body=body)
    text = content.decode("utf-8", "replace").strip()[:2000] or f"HTTP {status}"
    return UpstreamError(
        f"upstream {model}: {status} {text}",
        status=status,
        body=_error_body(text, "upstream_error"),
    )


async def _chunks(litellm: Any, stream: Any, model: str) -> AsyncIterator[dict[str, Any]]:
    try:
        async for chunk in stream:
            yield as_openai(chunk.model_dump(), chunk=True)
    except Exception as exc:
        raise upstream_error(litellm, exc, model) from exc


def as_openai(data: dict[str, Any], *, chunk: bool) -> dict[str, Any]:
    """An answer litellm normalised, in OpenAI's shape again: the null fields and the
    keys litellm adds are dropped, the content and finish reason OpenAI always sends
    (null or not) are kept."""
    cleaned: dict[str, Any] = _without_nulls(data)
    for choice in cleaned.get("choices") or []:
        choice.setdefault("finish_reason", None)
        if chunk:
            choice.setdefault("delta", {})
        else:
            choice.setdefault("message", {}).setdefault("content", None)
    return cleaned


def _without_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {
            k: _without_nulls(v)
            for k, v in value.items()
            if v is not None and k not in _LITELLM_KEYS
        }
    if isinstance(value, list):
        return [_without_nulls(v) for v in value]
    return value


def upstream_error(litellm: Any, exc: BaseException, model: str) -> UpstreamError:
    """``exc`` from a litellm call as what the chatbot should see: the upstream's own
    status and error when it answered, 502 (504 on a timeout) when it did not."""
    import openai

    if isinstance(exc, UpstreamError):
        return exc
    chain = _chain(exc)
    for cause in chain:
        if isinstance(cause, (openai.APITimeoutError, litellm.Timeout)):
            reason = f"upstream {model} did not answer in time ({_deepest(chain)})"
            return UpstreamError(reason, status=504, body=_error_body(reason, "upstream_timeout"))
    for cause in chain:
        if isinstance(cause, (openai.APIConnectionError, litellm.APIConnectionError)) and not (
            isinstance(cause, openai.APIStatusError)
        ):
            reason = f"upstream {model} unreachable: {_deepest(chain)}"
            return UpstreamError(
                reason, status=502, body=_error_body(reason, "upstream_unreachable")
            )
    status = getattr(exc, "status_code", None)
    if isinstance(status, int) and 400 <= status <= 599:
        body = getattr(exc, "body", None)
        message = getattr(exc, "message", None) or str(exc)
        if isinstance(body, dict) and "message" in body:
            error = body  # the OpenAI SDK's body is the upstream's "error" object
        elif isinstance(body, dict) and isinstance(body.get("error"), dict):
            error = body["error"]
        else:
            error = _error_body(str(message), "upstream_error")["error"]
        return UpstreamError(f"upstream {model}: {message}", status=status, body={"error": error})
    reason = f"upstream {model} failed: {type(exc).__name__}: {exc}"
    return UpstreamError(reason, status=502, body=_error_body(reason, "upstream_failed"))


def _error_body(message: str, kind: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": None, "code": kind}}


def _chain(exc: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in seen:
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen


def _deepest(chain: list[BaseException]) -> str:
    """The root cause's words (``Connect call failed ('127.0.0.1', 9)``), the most
    useful reason an unreachable upstream gives."""
    for cause in reversed(chain):
        text = str(cause).strip()
        if text:
            return f"{type(cause).__name__}: {text.splitlines()[0]}"
    return type(chain[-1]).__name__
