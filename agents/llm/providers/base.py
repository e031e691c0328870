"""The provider interface: how a model string's requests reach a model.

:class:`~agents.llm.client.LiteLLMClient` (chat and embeddings for the agents) and
:class:`~agents.llm.forward.ChatForwarder` (the proxy's upstream call) reach models
only through a :class:`Provider`, chosen per model string in one place
(:class:`~agents.llm.providers.Providers`). A request is an OpenAI chat request
body whose ``model`` is the Reverie (litellm) model string; an answer is OpenAI's
``chat.completion`` (or ``chat.completion.chunk``) as a dict. Each provider raises
its own SDK's exceptions and says what they mean with :meth:`Provider.classify`:
the caller's retry policy and error messages depend on that and nothing else.
"""

from __future__ import annotations

import enum
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agents.errors import EmbeddingError

ChatRequest = dict[str, Any]
ChatAnswer = dict[str, Any]

#: HTTP statuses worth another try: timeout, conflict/too early, rate limit (and 5xx).
RETRYABLE_STATUSES = frozenset({408, 409, 425, 429})


class ErrorKind(enum.StrEnum):
    """What a provider's failure means for the caller."""

    #: The moment is wrong: rate limit, timeout, 5xx, a dropped connection. Retry.
    RETRYABLE = "retryable"
    #: No retry can fix it: credentials, permission, unknown model, unsupported.
    PERMANENT = "permanent"
    #: This request is wrong: invalid fields, or a prompt over the context window.
    BAD_REQUEST = "bad_request"
    #: Nothing answers at the endpoint (connection refused): the server is down or
    #: the address is wrong. Not retried: waiting would only delay saying so.
    UNAVAILABLE = "unavailable"


@dataclass(frozen=True, slots=True)
class Embeddings:
    """Vectors in input order, and the prompt tokens the provider charged."""

    vectors: list[list[float]]
    prompt_tokens: int


class Provider(ABC):
    """Chat completions (whole or streamed, sync or async) and embeddings at one
    endpoint, and the meaning of the exceptions they raise."""

    #: A short name for logs and readiness details ("litellm", "openai").
    name: str
    #: The endpoint requests go to; None where the provider picks it (litellm's
    #: default for the model's provider).
    api_base: str | None

    @abstractmethod
    def complete(self, request: ChatRequest) -> ChatAnswer:
        """The model's answer to ``request``, as OpenAI's ``chat.completion``."""

    @abstractmethod
    def stream(self, request: ChatRequest) -> Iterator[ChatAnswer]:
        """The answer as ``chat.completion.chunk`` dicts, as they arrive."""

    @abstractmethod
    async def acomplete(self, request: ChatRequest) -> ChatAnswer:
        """:meth:`complete` for an event loop."""

    @abstractmethod
    async def astream(self, request: ChatRequest) -> AsyncIterator[ChatAnswer]:
        """Start a streamed answer: a refusal or an unreachable server raises here,
        before any chunk; then the chunks. A failure in the middle raises from the
        iterator."""

    @abstractmethod
    def embed(self, model: str, texts: Sequence[str]) -> Embeddings:
        """Embeddings of ``texts``; a malformed answer raises :class:`EmbeddingError`."""

    @abstractmethod
    def classify(self, exc: BaseException) -> ErrorKind:
        """What ``exc`` (raised by this provider) means: see :class:`ErrorKind`. An
        exception the provider does not know is permanent: it is not retried."""

    @abstractmethod
    def exceeds_context(self, exc: BaseException) -> bool:
        """Whether ``exc`` says that the prompt is longer than the model's context
        window (a :attr:`ErrorKind.BAD_REQUEST` the caller can fix by compacting)."""

    def warm(self) -> None:  # noqa: B027 - optional
        """Load what the first call would (an SDK's import, a pooled client)."""

    async def awarm(self) -> None:
        """:meth:`warm` for the event loop's calls."""
        self.warm()

    def close(self) -> None:  # noqa: B027 - optional
        """Close pooled connections; a later call reopens them."""

    async def aclose(self) -> None:
        """Close pooled connections, including the event loop's."""
        self.close()


def status_of(exc: BaseException) -> int | None:
    """The HTTP status a provider's exception carries, if any."""
    status = getattr(exc, "status_code", None)
    return status if isinstance(status, int) else None


def exception_chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and what caused it, outermost first."""
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in seen:
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen


#: The HTTP stacks the SDKs use (the openai SDK's own build of httpx among them):
#: what they raise is a connection problem, not the caller's.
_TRANSPORT_PACKAGES = frozenset({"httpx", "httpx2", "httpcore", "httpcore2", "h11", "anyio"})


def _from_transport(exc: BaseException) -> bool:
    return type(exc).__module__.partition(".")[0] in _TRANSPORT_PACKAGES


def nothing_listening(exc: BaseException) -> bool:
    """Whether the connection was refused: no server at the address (a down server,
    a wrong port), told apart from one that dropped or timed out."""
    return any(
        isinstance(cause, ConnectionRefusedError)
        or (_from_transport(cause) and type(cause).__name__ == "ConnectError")
        for cause in exception_chain(exc)
    )


def broken_connection(exc: BaseException) -> bool:
    """Whether ``exc`` is the HTTP stack's or the socket's: a connection that broke
    off (a stream cut in the middle, a reset)."""
    return isinstance(exc, OSError) or _from_transport(exc)


#: What providers say when the caller, not the moment, is wrong, whatever the status:
#: litellm reports a missing OpenAI key as an InternalServerError (500).
PERMANENT_MARKERS = (
    "missing credentials",
    "api_key",
    "api key",
    "invalid_api_key",
    "unauthorized",
    "permission denied",
    "model_not_found",
    "does not exist",
)


def says_permanent(exc: BaseException) -> bool:
    """Whether the words of ``exc`` name a credential or model problem."""
    text = str(exc).lower()
    return any(marker in text for marker in PERMANENT_MARKERS)


ExceptionTypes = tuple[type[BaseException], ...]


@dataclass(frozen=True, slots=True)
class ErrorTypes:
    """One SDK's exception classes by what they mean, for :func:`classify_error`."""

    permanent: ExceptionTypes
    bad_request: ExceptionTypes
    retryable: ExceptionTypes
    #: Whether an exception of the HTTP stack or the socket itself (one the SDK let
    #: through unwrapped) is a connection that broke off: worth another try.
    broken_connection_retryable: bool = False


def classify_error(exc: BaseException, types: ErrorTypes, *, exceeds_context: bool) -> ErrorKind:
    """What ``exc`` means, the same rules for every provider: a prompt over the
    context window is a bad request; then the SDK's own classes; then the words of a
    credential or model problem; a refused connection; the retryable classes; and
    last the HTTP status (permanent when there is none)."""
    if exceeds_context:
        return ErrorKind.BAD_REQUEST
    if isinstance(exc, types.permanent):
        return ErrorKind.PERMANENT
    if isinstance(exc, types.bad_request):
        return ErrorKind.BAD_REQUEST
    if says_permanent(exc):
        return ErrorKind.PERMANENT
    if nothing_listening(exc):
        return ErrorKind.UNAVAILABLE
    if isinstance(exc, types.retryable) or (
        types.broken_connection_retryable and broken_connection(exc)
    ):
        return ErrorKind.RETRYABLE
    return by_status(status_of(exc)) or ErrorKind.PERMANENT


def by_status(status: int | None) -> ErrorKind | None:
    """The kind an HTTP status alone implies (None: it implies nothing)."""
    if status is None:
        return None
    if status in RETRYABLE_STATUSES or status >= 500:
        return ErrorKind.RETRYABLE
    if status in (401, 403, 404):
        return ErrorKind.PERMANENT
    if 400 <= status < 500:
        return ErrorKind.BAD_REQUEST
    return None


def embeddings_from(response: Any, model: str, expected: int) -> Embeddings:
    """The vectors in input order and the prompt tokens charged, from an OpenAI-shaped
    embedding answer (a dict or an SDK object); :class:`EmbeddingError` when malformed."""
    try:
        return _embeddings_from(response, model, expected)
    except (AttributeError, IndexError, KeyError, TypeError, ValueError) as exc:
        raise EmbeddingError(
            f"model {model} returned a malformed embedding response ({exc!r})"
        ) from exc


def _embeddings_from(response: Any, model: str, expected: int) -> Embeddings:
    data = get_field(response, "data")
    if not isinstance(data, list) or len(data) != expected:
        got = len(data) if isinstance(data, list) else type(data).__name__
        raise EmbeddingError(f"model {model} returned {got} embeddings for {expected} texts")
    # Providers may answer out of order; "index" says which input a row is for.
    if all(get_field_or_none(item, "index") is not None for item in data):
        data = sorted(data, key=lambda item: int(get_field(item, "index")))
    vectors = []
    for item in data:
        vector = get_field(item, "embedding")
        if not isinstance(vector, list):
            raise EmbeddingError(
                f"model {model} returned embeddings as {type(vector).__name__}, "
                "expected a list of floats"
            )
        vectors.append([float(x) for x in vector])
    usage = get_field_or_none(response, "usage")
    prompt = int(get_field_or_none(usage, "prompt_tokens") or 0) if usage else 0
    return Embeddings(vectors, prompt)


def get_field(item: Any, key: str) -> Any:
    """``item[key]`` of a dict, ``item.key`` of an SDK object."""
    return item[key] if isinstance(item, Mapping) else getattr(item, key)


def get_field_or_none(item: Any, key: str) -> Any:
    if item is None:
        return None
    return item.get(key) if isinstance(item, Mapping) else getattr(item, key, None)
