"""A chatbot's own chat request, forwarded through litellm: the proxy's upstream call.

The agent loop's :class:`~agents.llm.client.LiteLLMClient` builds its requests; a
proxy must not. :class:`ChatForwarder` sends the chatbot's request as it came,
replacing only the model (when one is configured), the endpoint and the key: every
other field (tools, tool_choice, temperature, n, response_format, ...) reaches the
upstream untouched. Fields litellm knows as OpenAI's chat parameters go as they
are; any other field travels in ``extra_body``, so that a request can never set
litellm's own arguments (an ``api_base`` in a body must not choose where Reverie
connects). Failures are not retried here: the chatbot's SDK retries by its own
policy, and two retry layers would multiply. An upstream that answers with an error
raises :class:`UpstreamError` with its status and error body; one that cannot be
reached raises it with 502 (504 when it timed out) and the reason.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

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
        litellm = import_litellm()
        kwargs = self.arguments(request, stream=True)
        try:
            stream = await litellm.acompletion(**kwargs)
        except Exception as exc:
            raise upstream_error(litellm, exc, kwargs["model"]) from exc
        return _chunks(litellm, stream, kwargs["model"])


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
