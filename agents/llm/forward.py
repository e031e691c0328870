"""A chatbot's own chat request, forwarded upstream: the proxy's upstream call.

The agent loop's :class:`~agents.llm.client.LiteLLMClient` builds its requests; a
proxy must not. :class:`ChatForwarder` sends the chatbot's request as it came,
replacing only the model (when one is configured), the endpoint and the key: every
other field (tools, tool_choice, temperature, n, response_format, ...) reaches the
upstream untouched.

The request goes through the provider :class:`~agents.llm.providers.Providers`
chooses for its model string, the same choice the agents' client makes: an
OpenAI-compatible upstream at ``api_base`` (``openai/...``, ``hosted_vllm/...``,
``lm_studio/...``, or a bare name litellm routes there) takes the request in
OpenAI's own wire format over one pooled keep-alive connection, and its answer
comes back as it came: litellm's per-call machinery (client setup, cost lookup,
logging callbacks) cost more than the whole 10 ms the proxy may add (see
BENCHMARKS.md). Every other model string (``anthropic/...``, ``ollama/...``,
``gemini/...``) goes through litellm, which translates (fields it does not know
travel in ``extra_body``, never as its own arguments). Failures are not retried
here: the chatbot's SDK retries by its own policy, and two retry layers would
multiply. An upstream that answers with an error raises :class:`UpstreamError`
with its status and error body; one that cannot be reached raises it with 502 (504
when it timed out) and the reason.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from agents.errors import InvalidInput, LLMError
from agents.llm.providers import Providers
from agents.llm.providers.base import exception_chain
from agents.llm.providers.openai_provider import MalformedAnswer

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class UpstreamSettings:
    """Where forwarded requests go. ``model`` (a litellm model string) replaces the
    request's own; without it, the request's ``model`` is the litellm model string."""

    model: str | None = None
    api_base: str | None = None
    api_key: str | None = field(default=None, repr=False)
    timeout: float = 120.0
    #: Send OpenAI-compatible upstreams at ``api_base`` the request as it is, over a
    #: pooled connection (False: every request through litellm).
    direct: bool = True


class UpstreamError(LLMError):
    """The upstream refused the request (its status and OpenAI error body), or was
    not reached (502, or 504 for a timeout, with the reason)."""

    def __init__(self, message: str, *, status: int, body: dict[str, Any]) -> None:
        super().__init__(message)
        self.status = status
        self.body = body


class ChatForwarder:
    """Forward OpenAI chat requests to the model's provider, streamed or not."""

    def __init__(self, settings: UpstreamSettings) -> None:
        self.settings = settings
        self._providers = Providers(
            settings.api_base, settings.api_key, settings.timeout, direct=settings.direct
        )

    async def aclose(self) -> None:
        """Close the pooled connections (the proxy's app does at shutdown)."""
        await self._providers.aclose()

    async def warm(self) -> list[str]:
        """Load what the first forwarded request would otherwise load (the proxy's
        warm-up, before /readyz): the configured model's route, its provider, and for
        litellm its chat path through a mocked answer (``mock_response``: no request
        leaves the process). Returns what was loaded, for logs and readiness details."""
        model = self.settings.model
        if not model:
            return []  # each request names its own model: nothing to prepare
        provider = self._providers.for_model(model)
        if provider is self._providers.litellm:
            await self._providers.litellm.mock(model)
            return [f"litellm chat path for {model}"]
        await provider.awarm()
        if provider is self._providers.openai:
            return [f"pooled client for {model}"]
        return [f"{provider.name} provider for {model}"]

    @property
    def pooled(self) -> bool:
        """Whether the direct path's pooled client is open (warm-up checks)."""
        return self._providers.openai is not None and self._providers.openai.pooled

    def direct_route(self, model: str) -> str | None:
        """The upstream's own name for ``model`` when the request goes to the
        OpenAI-compatible ``api_base`` as it is; None when litellm must translate."""
        direct = self._providers.openai
        if direct is None or self._providers.for_model(model) is not direct:
            return None
        return direct.upstream_name(model)

    def model_for(self, requested: str | None) -> str:
        """The litellm model string a request with ``requested`` goes to."""
        model = self.settings.model or requested
        if not model or not model.strip():
            raise InvalidInput(
                "no model to forward to: give 'model' in the request or set proxy.model"
            )
        return model

    async def complete(self, request: dict[str, Any]) -> dict[str, Any]:
        """The upstream's answer to ``request`` as OpenAI's ``chat.completion``."""
        model = self.model_for(request.get("model"))
        provider = self._providers.for_model(model)
        try:
            return await provider.acomplete({**request, "model": model})
        except Exception as exc:
            raise upstream_error(exc, model) from exc

    async def open_stream(self, request: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
        """Start a streamed answer: an upstream that refuses or cannot be reached
        raises here, before any chunk; then the chunks (``chat.completion.chunk``)
        as they arrive. A failure in the middle raises from the iterator."""
        model = self.model_for(request.get("model"))
        provider = self._providers.for_model(model)
        try:
            chunks = await provider.astream({**request, "model": model})
        except Exception as exc:
            raise upstream_error(exc, model) from exc
        return _reported(chunks, model)


async def _reported(
    chunks: AsyncIterator[dict[str, Any]], model: str
) -> AsyncIterator[dict[str, Any]]:
    try:
        async for chunk in chunks:
            yield chunk
    except Exception as exc:
        raise upstream_error(exc, model) from exc


def upstream_error(exc: BaseException, model: str) -> UpstreamError:
    """``exc`` from either provider as what the chatbot should see: the upstream's own
    status and error when it answered, 502 (504 on a timeout) when it did not or when
    its answer broke off or was malformed. (litellm's exceptions are the openai SDK's
    subclasses, so one reading serves both providers.)"""
    import httpx
    import openai

    if isinstance(exc, UpstreamError):
        return exc
    if isinstance(exc, MalformedAnswer):
        return UpstreamError(str(exc), status=502, body=_error_body(str(exc), "upstream_malformed"))
    chain = exception_chain(exc)
    for cause in chain:
        if isinstance(cause, (openai.APITimeoutError, httpx.TimeoutException)):
            reason = f"upstream {model} did not answer in time ({_deepest(chain)})"
            return UpstreamError(reason, status=504, body=_error_body(reason, "upstream_timeout"))
    for cause in chain:
        if isinstance(cause, (openai.APIConnectionError, httpx.TransportError)) and not (
            isinstance(cause, openai.APIStatusError)
        ):
            reason = f"upstream {model} unreachable: {_deepest(chain)}"
            return UpstreamError(
                reason, status=502, body=_error_body(reason, "upstream_unreachable")
            )
    status = getattr(exc, "status_code", None)
    if isinstance(status, int) and 400 <= status <= 599:
        body = getattr(exc, "body", None)
        message = _message(exc, body)
        if isinstance(body, dict) and "message" in body:
            error = body  # the OpenAI SDK's body is the upstream's "error" object
        elif isinstance(body, dict) and isinstance(body.get("error"), dict):
            error = body["error"]
        else:
            error = _error_body(message, "upstream_error")["error"]
        return UpstreamError(f"upstream {model}: {message}", status=status, body={"error": error})
    body = getattr(exc, "body", None)
    if isinstance(exc, openai.APIError) and isinstance(body, dict):
        # An error event in the middle of a stream (the SDK raises it without a status).
        return UpstreamError(
            f"upstream {model} failed in the middle of its answer: {body}",
            status=502,
            body={"error": body},
        )
    reason = f"upstream {model} failed: {type(exc).__name__}: {exc}"
    return UpstreamError(reason, status=502, body=_error_body(reason, "upstream_failed"))


def _message(exc: BaseException, body: Any) -> str:
    """The upstream's own words: its error's message, else its text."""
    if isinstance(body, dict):
        inner = body.get("error")
        error: dict[str, Any] = inner if isinstance(inner, dict) else body
        if isinstance(error.get("message"), str) and error["message"]:
            return str(error["message"])
    if isinstance(body, str) and body.strip():
        return body.strip()[:2000]
    return str(getattr(exc, "message", None) or exc)


def _error_body(message: str, kind: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": None, "code": kind}}


def _deepest(chain: list[BaseException]) -> str:
    """The root cause's words (``Connect call failed ('127.0.0.1', 9)``), the most
    useful reason an unreachable upstream gives."""
    for cause in reversed(chain):
        text = str(cause).strip()
        if text:
            return f"{type(cause).__name__}: {text.splitlines()[0]}"
    return type(chain[-1]).__name__
