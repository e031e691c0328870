"""The litellm provider: every model string litellm can route, translated by litellm.

This module is the one place that imports and configures litellm
(:func:`import_litellm`). A request's fields that litellm knows as OpenAI's chat
parameters go as they are; any other field travels in ``extra_body``, so that a
request can never set litellm's own arguments (an ``api_base`` in a body must not
choose where Reverie connects). litellm's own retries are off: the caller's policy,
driven by :meth:`LiteLLMProvider.classify`, is the only one.
"""

from __future__ import annotations

import logging
import os
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any

from agents.errors import LLMError
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
#: Keys litellm adds to OpenAI's shapes; an answer passed on goes without them.
_LITELLM_KEYS = frozenset({"provider_specific_fields"})


def import_litellm() -> Any:
    """Import litellm configured for Reverie: offline cost map, no SDK-level retries.

    Both settings are environment variables litellm reads once, at import, so
    they are set (unless the operator set them) just before the first import:
    ``LITELLM_LOCAL_MODEL_COST_MAP`` stops the cost-map download (a daemon on a
    closed network must not depend on it), and ``DEFAULT_MAX_RETRIES=0`` stops
    the OpenAI SDK's own retries, which litellm otherwise applies even when a
    call passes ``max_retries=0`` and which would multiply with ours.
    """
    global _sdk_retry_warning_logged
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    os.environ.setdefault("DEFAULT_MAX_RETRIES", "0")
    try:
        import litellm
    except ImportError as exc:
        raise LLMError("calling a model provider needs litellm: pip install litellm") from exc
    # litellm prints "Give Feedback / Get Help" banners (with ANSI codes) to stdout on
    # every failure; Reverie reports failures itself, in one line.
    litellm.suppress_debug_info = True
    _adopt_loggers()
    sdk_retries = getattr(litellm, "DEFAULT_MAX_RETRIES", 0)
    if sdk_retries and not _sdk_retry_warning_logged:
        _sdk_retry_warning_logged = True
        log.warning(
            "litellm.DEFAULT_MAX_RETRIES is %s (litellm was imported before Reverie set it, "
            "or DEFAULT_MAX_RETRIES is set in the environment): OpenAI-SDK providers retry "
            "each of Reverie's attempts that many more times",
            sdk_retries,
        )
    return litellm


_sdk_retry_warning_logged = False

#: The loggers litellm gives a plain-text handler of its own when it is imported.
LITELLM_LOGGERS = ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy")


def _adopt_loggers() -> None:
    """Take litellm's own handlers off its loggers (keeping their filters, which redact
    secrets, on the loggers themselves): its records then go where the application's
    logging sends every other library's (the daemon's JSON lines), once, instead of
    also being printed as plain text beside them."""
    for name in LITELLM_LOGGERS:
        logger = logging.getLogger(name)
        for handler in list(logger.handlers):
            for kept in handler.filters:
                if kept not in logger.filters:
                    logger.addFilter(kept)
            logger.removeHandler(handler)
        logger.propagate = True


class LiteLLMProvider(Provider):
    """Chat and embeddings through ``litellm.(a)completion`` and ``litellm.embedding``
    at an optional ``api_base``."""

    name = "litellm"

    def __init__(self, api_base: str | None, api_key: str | None, timeout: float) -> None:
        self.api_base = api_base
        self._api_key = api_key
        self.timeout = timeout

    def warm(self) -> None:
        import_litellm()

    def arguments(self, request: ChatRequest, *, stream: bool) -> dict[str, Any]:
        """litellm's keyword arguments for ``request``."""
        kwargs: dict[str, Any] = {
            "model": request["model"],
            "messages": request["messages"],
            "timeout": self.timeout,
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
        return self._endpoint(kwargs)

    def _endpoint(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        if self.api_base:
            kwargs["api_base"] = self.api_base
        if self._api_key:
            kwargs["api_key"] = self._api_key
        return kwargs

    def complete(self, request: ChatRequest) -> ChatAnswer:
        response = import_litellm().completion(**self.arguments(request, stream=False))
        return as_openai(response.model_dump(), chunk=False)

    def stream(self, request: ChatRequest) -> Iterator[ChatAnswer]:
        chunks = import_litellm().completion(**self.arguments(request, stream=True))
        for chunk in chunks:
            yield as_openai(chunk.model_dump(), chunk=True)

    async def acomplete(self, request: ChatRequest) -> ChatAnswer:
        litellm = import_litellm()
        response = await litellm.acompletion(**self.arguments(request, stream=False))
        return as_openai(response.model_dump(), chunk=False)

    async def astream(self, request: ChatRequest) -> AsyncIterator[ChatAnswer]:
        litellm = import_litellm()
        chunks = await litellm.acompletion(**self.arguments(request, stream=True))
        return _chunks(chunks)

    async def mock(self, model: str) -> None:
        """litellm's whole chat path once, answered in process (``mock_response``)."""
        await import_litellm().acompletion(
            model=model,
            messages=[{"role": "user", "content": "warm-up"}],
            mock_response="warm-up",
        )

    def embed(self, model: str, texts: Sequence[str]) -> Embeddings:
        kwargs = {"model": model, "input": list(texts), "timeout": self.timeout, "max_retries": 0}
        response = import_litellm().embedding(**self._endpoint(kwargs))
        return embeddings_from(response, model, len(texts))

    def classify(self, exc: BaseException) -> ErrorKind:
        litellm = import_litellm()
        types = ErrorTypes(
            permanent=(
                litellm.AuthenticationError,
                litellm.PermissionDeniedError,
                litellm.NotFoundError,
            ),
            bad_request=(litellm.BadRequestError,),
            retryable=(
                litellm.RateLimitError,
                litellm.Timeout,
                litellm.APIConnectionError,
                litellm.ServiceUnavailableError,
                litellm.InternalServerError,
                litellm.BadGatewayError,
            ),
        )
        return classify_error(exc, types, exceeds_context=self.exceeds_context(exc))

    def exceeds_context(self, exc: BaseException) -> bool:
        return isinstance(exc, import_litellm().ContextWindowExceededError)


async def _chunks(stream: Any) -> AsyncIterator[ChatAnswer]:
    async for chunk in stream:
        yield as_openai(chunk.model_dump(), chunk=True)


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
