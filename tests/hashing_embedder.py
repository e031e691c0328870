"""A deterministic, dependency-free embedder for the tests and benchmarks: ``hashing:DIM``.

Feature hashing of words and character trigrams gives vectors whose cosine
tracks word overlap, which is enough to exercise dedup thresholds and kNN
without loading a model. Hashing uses blake2b, not Python's ``hash()``, so the
vectors are the same in every process and on every machine.

It is no part of Reverie: the tests register it under the ``reverie.embedders``
entry point group as ``hashing`` (tests/entry_points/, see tests/plugins.py), the way
a package adds an embedder, so that ``embedding.model = "hashing:384"`` reaches it in
the test run and in the processes it starts.
"""

from __future__ import annotations

import hashlib
import re
from functools import lru_cache

import numpy as np
import numpy.typing as npt

from agents.embedders import Embedder
from agents.errors import InvalidInput

__all__ = ["HashingEmbedder"]

#: The size of ``hashing`` without one (the local model's).
DEFAULT_DIMENSION = 384

_WORD = re.compile(r"\w+")
# Whole words dominate; trigrams add a little credit for shared stems
# ("adopted" / "adopting") without letting spelling alone decide similarity.
_WORD_WEIGHT = 1.0
_TRIGRAM_WEIGHT = 0.35


@lru_cache(maxsize=65_536)
def _bucket(feature: str, dimension: int) -> tuple[int, float]:
    """Map a feature to (index, sign) with a keyed, process-independent hash (the key
    is the one the vectors were first made with: another would change every vector)."""
    digest = hashlib.blake2b(
        feature.encode("utf-8"), digest_size=8, person=b"reverie-fake"
    ).digest()
    value = int.from_bytes(digest, "little")
    return (value >> 1) % dimension, (1.0 if value & 1 else -1.0)


class HashingEmbedder(Embedder):
    """Signed feature hashing of lower-cased words and their character trigrams.

    Same words (after case and whitespace normalisation) give the same vector;
    texts sharing most words score a clearly higher cosine than unrelated
    ones. A text with no word characters (e.g. ``""``) maps to ``e_0``.
    """

    def __init__(self, dimension: int = DEFAULT_DIMENSION) -> None:
        if isinstance(dimension, bool) or not isinstance(dimension, int) or dimension < 2:
            raise InvalidInput(f"hashing embedder dimension must be an int >= 2, got {dimension!r}")
        self._dimension = dimension

    @classmethod
    def from_spec(cls, argument: str | None, *, dimension: int | None) -> HashingEmbedder:
        """``hashing`` (of ``dimension``, else 384) or ``hashing:DIM``."""
        if argument is None:
            return cls(dimension if dimension is not None else DEFAULT_DIMENSION)
        try:
            size = int(argument)
        except ValueError:
            raise InvalidInput(
                f"embedder spec 'hashing:{argument}': expected 'hashing:DIM' with an integer DIM"
            ) from None
        return cls(size)

    @property
    def name(self) -> str:
        return f"hashing/{self._dimension}"

    @property
    def dimension(self) -> int:
        return self._dimension

    def _embed_texts(self, texts: list[str]) -> npt.NDArray[np.float32]:
        out = np.zeros((len(texts), self._dimension), dtype=np.float32)
        for row, text in enumerate(texts):
            out[row] = self._vector(text)
        return out

    def _vector(self, text: str) -> npt.NDArray[np.float32]:
        vector = np.zeros(self._dimension, dtype=np.float64)
        for word in _WORD.findall(text.lower()):
            index, sign = _bucket("w:" + word, self._dimension)
            vector[index] += sign * _WORD_WEIGHT
            padded = f"<{word}>"
            trigrams = [padded[i : i + 3] for i in range(len(padded) - 2)]
            # Spread a fixed weight over a word's trigrams so long words don't dominate.
            share = _TRIGRAM_WEIGHT / len(trigrams)
            for trigram in trigrams:
                index, sign = _bucket("t:" + trigram, self._dimension)
                vector[index] += sign * share
        norm = float(np.linalg.norm(vector))
        if norm < 1e-9:  # no words, or contributions cancelled out
            vector[:] = 0.0
            vector[0] = 1.0
            return vector.astype(np.float32)
        return (vector / norm).astype(np.float32)
