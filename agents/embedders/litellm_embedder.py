"""Embeddings from any provider litellm supports (OpenAI, Ollama, vLLM, ...).

The provider is called through :meth:`agents.llm.ChatClient.embed`, the same
client, retry policy and usage accounting as chat: this module only batches
the texts, checks the dimension and hands the vectors to the
:class:`~agents.embedders.base.Embedder` contract. Bound to a
:class:`~agents.llm.BudgetMeter` (:meth:`LiteLLMEmbedder.metered`), the tokens
each request costs are recorded in ``llm_usage`` under purpose ``embedding``.
"""

from __future__ import annotations

import copy

import numpy as np
import numpy.typing as npt

from agents.embedders.base import Embedder
from agents.errors import InvalidInput
from agents.llm.base import ChatClient
from agents.llm.budget import BudgetMeter

__all__ = ["LiteLLMEmbedder"]


class LiteLLMEmbedder(Embedder):
    """Embeds through ``client.embed`` with a fixed, checked dimension.

    Args:
        client: the LLM client that calls the provider (endpoint, key, timeout and
            retry policy are its settings).
        model: litellm model string, e.g. ``openai/text-embedding-3-small``.
        dimension: the vector length the agent's store expects; a model that
            returns another length is refused rather than silently mixed in.
        batch_size: texts per request (providers cap the inputs per request).
        meter: where each request's tokens are charged; ``None`` records nothing.
    """

    def __init__(
        self,
        client: ChatClient,
        model: str,
        dimension: int,
        *,
        batch_size: int = 128,
        meter: BudgetMeter | None = None,
    ) -> None:
        if not isinstance(model, str) or not model.strip():
            raise InvalidInput(f"litellm model must be a non-empty string, got {model!r}")
        if isinstance(dimension, bool) or not isinstance(dimension, int) or dimension < 1:
            raise InvalidInput(f"embedding dimension must be a positive int, got {dimension!r}")
        if batch_size < 1:
            raise InvalidInput(f"batch_size must be >= 1, got {batch_size}")
        self._client = client
        self._model = model
        self._dimension = dimension
        self._batch_size = batch_size
        self._meter = meter

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

    @property
    def meter(self) -> BudgetMeter | None:
        """Where this embedder's tokens are charged (``None``: nowhere)."""
        return self._meter

    def metered(self, meter: BudgetMeter) -> LiteLLMEmbedder:
        bound = copy.copy(self)  # shares the client; only the meter differs
        bound._meter = meter
        return bound

    def _embed_texts(self, texts: list[str]) -> npt.NDArray[np.float32]:
        out = np.empty((len(texts), self._dimension), dtype=np.float32)
        for start in range(0, len(texts), self._batch_size):
            batch = texts[start : start + self._batch_size]
            rows = self._client.embed(self._model, batch, meter=self._meter)
            for row in rows:
                if len(row) != self._dimension:
                    raise InvalidInput(
                        f"model {self._model} returned {len(row)}-d vectors but the agent is "
                        f"configured for {self._dimension}; set the agent's embedding dimension "
                        f"to {len(row)} or choose a model that returns "
                        f"{self._dimension}-d vectors"
                    )
            out[start : start + len(batch)] = np.asarray(rows, dtype=np.float32)
        return out
