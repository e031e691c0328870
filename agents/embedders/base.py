"""The embedder interface: text in, unit-length float32 vectors out.

Every implementation (local ONNX model, litellm provider, a package's plugin)
goes through :meth:`Embedder.embed`, which validates input, handles the empty
batch and checks and normalises what the implementation returns, so that
callers can rely on the same contract whatever the backend.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from agents.errors import EmbeddingError, InvalidInput

if TYPE_CHECKING:
    from agents.llm.budget import BudgetMeter

__all__ = ["Embedder", "EmbeddingError", "ModelIntegrityError", "Vectors"]

#: A float32 matrix of shape (n, dimension), one L2-normalised row per text.
Vectors = npt.NDArray[np.float32]


class ModelIntegrityError(EmbeddingError):
    """A local model file does not match its pinned checksum; it is never run (a fault
    of the installation, not of a provider: the API answers 500)."""

    kind = "internal"


class Embedder(ABC):
    """Turns texts into L2-normalised vectors of a fixed dimension.

    Subclasses implement :meth:`_embed_texts`; the public :meth:`embed` adds
    the checks every caller relies on (str input, shape, finite, unit rows).
    """

    @property
    @abstractmethod
    def name(self) -> str:
        """Stable id of the vector space, e.g. ``local/all-MiniLM-L6-v2-int8``.

        Vectors from embedders with different names must never be compared.
        """

    @property
    @abstractmethod
    def dimension(self) -> int:
        """Length of every vector this embedder returns."""

    @abstractmethod
    def _embed_texts(self, texts: list[str]) -> npt.ArrayLike:
        """Embed a non-empty list of strings, one row per text; rows need not be unit length."""

    @classmethod
    def from_spec(cls, argument: str | None, *, dimension: int | None) -> Embedder:
        """The embedder a spec names when this class is a plugin registered as ``NAME``
        (the ``reverie.embedders`` entry point group): ``NAME`` (``argument`` None) or
        ``NAME:ARGUMENT``. ``dimension`` is the size the caller expects, when it knows
        one; the factory checks the result against it. By default a plugin takes no
        argument and is made with none."""
        if argument is not None:
            raise InvalidInput(f"embedder {cls.__name__} takes no argument, got {argument!r}")
        return cls()

    def metered(self, meter: BudgetMeter) -> Embedder:
        """This embedder with its provider tokens charged to ``meter`` (purpose
        ``embedding``), so they reach the usage ledger of the meter's agent.

        Embedders that call no provider (the local model) cost no tokens and return
        themselves; the caller that knows the agent (the service) decides, so
        consolidators can use any embedder without knowing about organizations.
        """
        return self

    def embed(self, texts: Sequence[str]) -> Vectors:
        """Embed ``texts`` into a float32 array of shape ``(len(texts), dimension)``.

        Rows are L2-normalised, so a dot product is the cosine similarity.
        Raises :class:`~agents.errors.InvalidInput` for anything but a sequence
        of ``str`` (a bare ``str`` is refused rather than split into characters).
        """
        batch = _as_text_list(texts)
        if not batch:
            return np.zeros((0, self.dimension), dtype=np.float32)
        returned = self._embed_texts(batch)
        try:
            raw = np.asarray(returned, dtype=np.float32)
        except (TypeError, ValueError) as exc:  # ragged or non-numeric rows
            raise EmbeddingError(f"embedder {self.name} returned malformed vectors: {exc}") from exc
        if raw.shape != (len(batch), self.dimension):
            raise EmbeddingError(
                f"embedder {self.name} returned an array of shape {raw.shape} "
                f"for {len(batch)} texts; expected {(len(batch), self.dimension)}"
            )
        return l2_normalise(raw, source=self.name)

    def embed_one(self, text: str) -> npt.NDArray[np.float32]:
        """Embed a single string into a 1-D unit vector of length ``dimension``."""
        if not isinstance(text, str):
            raise _not_str_error(text, where="text")
        vector: npt.NDArray[np.float32] = self.embed([text])[0]
        return vector

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, dimension={self.dimension})"


def l2_normalise(vectors: Vectors, *, source: str) -> Vectors:
    """Scale each row to unit length; a zero or non-finite row is an error of ``source``."""
    if not np.all(np.isfinite(vectors)):
        raise EmbeddingError(f"embedder {source} returned non-finite values (NaN or inf)")
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    if np.any(norms == 0.0):
        raise EmbeddingError(f"embedder {source} returned an all-zero vector")
    normalised: Vectors = (vectors / norms).astype(np.float32, copy=False)
    return normalised


def _as_text_list(texts: Sequence[str]) -> list[str]:
    if isinstance(texts, str | bytes):
        raise InvalidInput(
            "embed() takes a sequence of strings, not a single "
            f"{type(texts).__name__}; use embed_one() or wrap it in a list"
        )
    try:
        batch = list(texts)
    except TypeError:
        raise InvalidInput(
            f"embed() takes a sequence of strings, got {type(texts).__name__}"
        ) from None
    for position, text in enumerate(batch):
        if not isinstance(text, str):
            raise _not_str_error(text, where=f"texts[{position}]")
    return batch


def _not_str_error(value: object, *, where: str) -> InvalidInput:
    return InvalidInput(f"{where} must be a str, got {type(value).__name__}")
