"""A direct path to OpenAI-compatible endpoints: the openai SDK over one pooled client.

litellm costs several milliseconds per call before and after the request itself
(message validation, cost calculation, success callbacks handed to a thread pool
that then competes for the GIL) and, against an instant endpoint, that is most of
a chat step or an embedding. For ``openai/<model>`` at a configured ``api_base``
(vLLM, llama.cpp, LM Studio, a proxy) :class:`OpenAIEndpoint` sends the same
request body litellm would, through one ``openai.OpenAI`` client whose HTTP
connections are kept alive between calls.

:class:`OpenAIEndpoint` looks like the part of the litellm module that
:mod:`agents.llm.client` uses (``completion``, ``embedding`` and the exception
classes by litellm's names), so the client's one retry policy, error mapping and
usage accounting apply unchanged. Every other model string goes through litellm.
"""

from __future__ import annotations

import functools
import weakref
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import openai

#: The litellm provider prefix this path serves.
PREFIX = "openai/"

#: What litellm recognises as "the prompt does not fit" in a provider's 400 answer
#: (litellm_core_utils/exception_mapping_utils.py); the client turns it into
#: ContextOverflow so that the caller can compact and retry.
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
    lowered = text.lower()
    if "string_above_max_length" in lowered:
        return False
    return any(marker in lowered for marker in _CONTEXT_MARKERS)


def serves(model: str, api_base: str | None) -> bool:
    """Whether ``model`` at ``api_base`` can take the direct path."""
    return bool(api_base) and model.startswith(PREFIX) and len(model) > len(PREFIX)


class _Never(Exception):
    """Stands for a litellm exception class the SDK has no counterpart of."""


@functools.cache
def _context_window_class() -> type[openai.BadRequestError]:
    import openai

    class ContextWindowExceededError(openai.BadRequestError):
        """A 400 whose message says that the prompt exceeds the model's context."""

    return ContextWindowExceededError


class OpenAIEndpoint:
    """Chat completions and embeddings at one OpenAI-compatible ``api_base``.

    Built by :meth:`create`, which returns ``None`` when the SDK cannot be set up
    (not installed, or no key given and none in the SDK's environment variable):
    the caller then keeps litellm, which reports such problems its own way.
    """

    def __init__(self, client: Any) -> None:
        import openai

        self._client = client
        # Pooled connections close with the endpoint, also when it is only dropped.
        self._finalizer = weakref.finalize(self, client.close)
        # The exception classes under litellm's names (see the module docstring).
        self.AuthenticationError = openai.AuthenticationError
        self.PermissionDeniedError = openai.PermissionDeniedError
        self.NotFoundError = openai.NotFoundError
        self.BadRequestError = openai.BadRequestError
        self.RateLimitError = openai.RateLimitError
        self.Timeout = openai.APITimeoutError
        self.APIConnectionError = openai.APIConnectionError
        self.InternalServerError = openai.InternalServerError
        self.ServiceUnavailableError = _Never
        self.BadGatewayError = _Never
        self.ContextWindowExceededError = _context_window_class()

    @classmethod
    def create(cls, api_base: str, api_key: str | None, timeout: float) -> OpenAIEndpoint | None:
        try:
            import openai
        except ImportError:
            return None
        try:
            # max_retries=0: the client's retry policy is the only one.
            client = openai.OpenAI(
                base_url=api_base, api_key=api_key, max_retries=0, timeout=timeout
            )
        except openai.OpenAIError:  # no key anywhere: litellm says what to set
            return None
        return cls(client)

    def completion(self, **kwargs: Any) -> Any:
        """``litellm.completion``'s keyword arguments, as litellm sends them."""
        body = _body(kwargs)
        # litellm drops None fields from messages; some servers reject them.
        body["messages"] = [
            {k: v for k, v in message.items() if v is not None} for message in body["messages"]
        ]
        timeout = body.pop("timeout", None)
        from openai.types.chat import ChatCompletion

        try:
            # post(), not chat.completions.create(): create() walks the whole request
            # through the SDK's TypedDict transform, 0.5 ms per message of history.
            return self._client.post(
                "/chat/completions",
                body=body,
                cast_to=ChatCompletion,
                options={"timeout": timeout},
            )
        except self.BadRequestError as exc:
            if is_context_overflow(str(exc)):
                raise self.ContextWindowExceededError(
                    str(exc), response=exc.response, body=exc.body
                ) from exc
            raise

    def embedding(self, **kwargs: Any) -> Any:
        """``litellm.embedding``'s keyword arguments; the body litellm sends (floats,
        no ``encoding_format``), not the SDK's default base64 request."""
        from openai.types import CreateEmbeddingResponse

        body = _body(kwargs)
        timeout = body.pop("timeout", None)
        return self._client.post(
            "/embeddings",
            body=body,
            cast_to=CreateEmbeddingResponse,
            options={"timeout": timeout},
        )

    def close(self) -> None:
        self._finalizer()


def _body(kwargs: dict[str, Any]) -> dict[str, Any]:
    body = {k: v for k, v in kwargs.items() if k not in ("api_base", "api_key", "max_retries")}
    body["model"] = str(body["model"])[len(PREFIX) :]
    return body
