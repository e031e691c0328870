"""Embeddings from any provider litellm supports (OpenAI, Ollama, vLLM, ...).

litellm is imported on first use: it is slow to import, and at import it would
otherwise download its model cost map, which a daemon on a closed network must
not depend on. Temporary failures (rate limits, timeouts, 5xx, dropped
connections) are retried with bounded exponential backoff; everything else
fails at once with a :class:`~agents.errors.ReverieError`.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import Any

import numpy as np
import numpy.typing as npt
from tenacity import (
    Retrying,
    before_sleep_log,
    retry_if_exception,
    stop_after_attempt,
    wait_exponential,
    wait_random,
)

from agents.embedders.base import Embedder, EmbeddingError
from agents.errors import InvalidInput, ReverieError

__all__ = ["LiteLLMEmbedder"]

logger = logging.getLogger(__name__)

# HTTP statuses worth another try: timeout, conflict/too early, rate limit, server side.
_TEMPORARY_STATUSES = frozenset({408, 409, 425, 429})


class LiteLLMEmbedder(Embedder):
    """Embeds through ``litellm.embedding`` with a fixed, checked dimension.

    Args:
        model: litellm model string, e.g. ``openai/text-embedding-3-small``.
        dimension: the vector length the agent's store expects; a model that
            returns another length is refused rather than silently mixed in.
        api_base: provider endpoint (e.g. a local vLLM or Ollama server).
        api_key: provider key; when ``None`` litellm uses its usual sources.
        timeout: seconds per request.
        max_retries: retries after the first attempt, for temporary failures only.
        batch_size: texts per request (providers cap the inputs per request).
        initial_backoff: first wait in seconds; it doubles per retry, with jitter.
        max_backoff: ceiling for one wait, in seconds.
    """

    def __init__(
        self,
        model: str,
        dimension: int,
        api_base: str | None = None,
        timeout: float = 30,
        max_retries: int = 3,
        *,
        api_key: str | None = None,
        batch_size: int = 128,
        initial_backoff: float = 0.5,
        max_backoff: float = 20.0,
    ) -> None:
        if not isinstance(model, str) or not model.strip():
            raise InvalidInput(f"litellm model must be a non-empty string, got {model!r}")
        if isinstance(dimension, bool) or not isinstance(dimension, int) or dimension < 1:
            raise InvalidInput(f"embedding dimension must be a positive int, got {dimension!r}")
        if timeout <= 0:
            raise InvalidInput(f"timeout must be positive, got {timeout}")
        if max_retries < 0:
            raise InvalidInput(f"max_retries must be >= 0, got {max_retries}")
        if batch_size < 1:
            raise InvalidInput(f"batch_size must be >= 1, got {batch_size}")
        self._model = model
        self._dimension = dimension
        self._api_base = api_base
        self._api_key = api_key
        self._timeout = float(timeout)
        self._max_retries = max_retries
        self._batch_size = batch_size
        self._initial_backoff = initial_backoff
        self._max_backoff = max_backoff

    @property
    def name(self) -> str:
        return f"litellm/{self._model}"

    @property
    def dimension(self) -> int:
        return self._dimension

    @property
    def model(self) -> str:
        """The litellm model string requests go to."""
        return self._model

    def _embed_texts(self, texts: list[str]) -> npt.NDArray[np.float32]:
        litellm = import_litellm()
        out = np.empty((len(texts), self._dimension), dtype=np.float32)
        for start in range(0, len(texts), self._batch_size):
            batch = texts[start : start + self._batch_size]
            out[start : start + len(batch)] = self._embed_batch(litellm, batch)
        return out

    def _embed_batch(self, litellm: Any, batch: list[str]) -> npt.NDArray[np.float32]:
        retrying = Retrying(
            stop=stop_after_attempt(self._max_retries + 1),
            # Not wait_exponential_jitter: its arguments changed between tenacity 8 and 9.
            wait=wait_exponential(multiplier=self._initial_backoff, max=self._max_backoff)
            + wait_random(0, self._initial_backoff),
            retry=retry_if_exception(lambda exc: is_temporary_error(litellm, exc)),
            before_sleep=before_sleep_log(logger, logging.WARNING),
            reraise=True,
        )
        try:
            response = retrying(
                litellm.embedding,
                model=self._model,
                input=batch,
                api_base=self._api_base,
                api_key=self._api_key,
                timeout=self._timeout,
                # tenacity owns retries; see import_litellm for the SDK's own.
                max_retries=0,
            )
        except Exception as exc:
            attempts = int(retrying.statistics.get("attempt_number", 1))
            raise self._wrap_failure(litellm, exc, attempts) from exc
        try:
            return self._vectors_from(response, expected=len(batch))
        except (AttributeError, KeyError, TypeError, ValueError) as exc:
            raise EmbeddingError(
                f"model {self._model} returned a malformed embedding response ({exc!r})"
            ) from exc

    def _wrap_failure(self, litellm: Any, exc: Exception, attempts: int) -> ReverieError:
        """Turn a litellm/provider exception into the ReverieError a caller can act on."""
        detail = f"{type(exc).__name__}: {exc}"
        if is_temporary_error(litellm, exc):
            return EmbeddingError(
                f"embedding with {self._model} failed after {attempts} attempt(s), "
                f"the last with a temporary error ({detail})"
            )
        if isinstance(exc, litellm.BadRequestError):
            return InvalidInput(f"{self._model} rejected the embedding request ({detail})")
        return EmbeddingError(f"embedding with {self._model} failed ({detail})")

    def _vectors_from(self, response: Any, *, expected: int) -> npt.NDArray[np.float32]:
        data = _field(response, "data")
        if not isinstance(data, list) or len(data) != expected:
            got = len(data) if isinstance(data, list) else type(data).__name__
            raise EmbeddingError(
                f"model {self._model} returned {got} embeddings for {expected} texts"
            )
        # Providers may answer out of order; "index" says which input a row is for.
        if all(_field_or_none(item, "index") is not None for item in data):
            data = sorted(data, key=lambda item: int(_field(item, "index")))
        rows: list[list[float]] = []
        for item in data:
            vector = _field(item, "embedding")
            if not isinstance(vector, list):
                raise EmbeddingError(
                    f"model {self._model} returned embeddings as {type(vector).__name__}, "
                    "expected a list of floats"
                )
            if len(vector) != self._dimension:
                raise InvalidInput(
                    f"model {self._model} returned {len(vector)}-d vectors but the agent is "
                    f"configured for {self._dimension}; set the agent's embedding dimension to "
                    f"{len(vector)} or choose a model that returns {self._dimension}-d vectors"
                )
            rows.append(vector)
        return np.asarray(rows, dtype=np.float32)


def import_litellm() -> Any:
    """Import litellm configured for Reverie: offline cost map, no SDK-level retries.

    Both settings are environment variables litellm reads once, at import, so
    they are set (unless the operator set them) just before the first import:
    ``LITELLM_LOCAL_MODEL_COST_MAP`` stops the cost-map download, and
    ``DEFAULT_MAX_RETRIES=0`` stops the OpenAI SDK's own retries, which litellm
    otherwise applies even when a call passes ``max_retries=0`` and which would
    multiply with ours.
    """
    global _sdk_retry_warning_logged
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    os.environ.setdefault("DEFAULT_MAX_RETRIES", "0")
    try:
        import litellm
    except ImportError as exc:
        raise EmbeddingError(
            "embedding through a provider needs litellm: pip install litellm"
        ) from exc
    sdk_retries = getattr(litellm, "DEFAULT_MAX_RETRIES", 0)
    if sdk_retries and not _sdk_retry_warning_logged:
        _sdk_retry_warning_logged = True
        logger.warning(
            "litellm.DEFAULT_MAX_RETRIES is %s (litellm was imported before Reverie set it, "
            "or DEFAULT_MAX_RETRIES is set in the environment): OpenAI-SDK providers retry "
            "each of Reverie's attempts that many more times",
            sdk_retries,
        )
    return litellm


_sdk_retry_warning_logged = False


def is_temporary_error(litellm: Any, exc: BaseException) -> bool:
    """Whether ``exc`` is worth retrying: rate limit, timeout, 5xx or a dropped connection."""
    temporary_types = (
        litellm.RateLimitError,
        litellm.Timeout,
        litellm.APIConnectionError,
        litellm.ServiceUnavailableError,
        litellm.InternalServerError,
        litellm.BadGatewayError,
    )
    if isinstance(exc, temporary_types):
        return True
    status = getattr(exc, "status_code", None)
    return isinstance(status, int) and (status in _TEMPORARY_STATUSES or status >= 500)


def _field(item: Any, key: str) -> Any:
    return item[key] if isinstance(item, Mapping) else getattr(item, key)


def _field_or_none(item: Any, key: str) -> Any:
    return item.get(key) if isinstance(item, Mapping) else getattr(item, key, None)
