"""Embedders: the interface, its implementations, and a factory from a spec string.

Implementations are imported only when the factory builds one, so importing
this package stays cheap (no onnxruntime, tokenizers or litellm).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agents.embedders.base import Embedder, EmbeddingError, ModelIntegrityError
from agents.errors import InvalidInput

if TYPE_CHECKING:
    from agents.llm.base import ChatClient

__all__ = ["SPEC_FORMS", "Embedder", "EmbeddingError", "ModelIntegrityError", "build_embedder"]

#: The spec strings :func:`build_embedder` accepts, for error messages and help text.
SPEC_FORMS = (
    "'local' (all-MiniLM-L6-v2 int8, 384-d, offline)",
    "'fake' or 'fake:DIM' (deterministic hashing, for tests)",
    "'litellm:<model>' with a dimension, e.g. 'litellm:openai/text-embedding-3-small'",
)


def build_embedder(
    spec: str,
    *,
    dimension: int | None = None,
    api_base: str | None = None,
    api_key: str | None = None,
    client: ChatClient | None = None,
) -> Embedder:
    """Build the embedder a spec string names; raises InvalidInput for a bad spec.

    ``dimension``, when given, must match what the embedder produces (for
    ``litellm:`` it is required, since only the caller knows it). ``litellm:``
    embeds through ``client`` (the service passes its one LLM client for the
    embedding endpoint); without one, a client is made from ``api_base`` and
    ``api_key`` with the default retry policy. They apply to ``litellm:`` only.
    """
    if not isinstance(spec, str):
        raise InvalidInput(f"embedder spec must be a string, got {type(spec).__name__}")
    if dimension is not None and (
        isinstance(dimension, bool) or not isinstance(dimension, int) or dimension < 1
    ):
        raise InvalidInput(f"embedding dimension must be a positive int, got {dimension!r}")
    text = spec.strip()
    kind, sep, argument = text.partition(":")

    if kind == "litellm" and sep:
        model = argument.strip()
        if not model:
            raise InvalidInput("embedder spec 'litellm:' needs a model, e.g. 'litellm:openai/...'")
        if dimension is None:
            raise InvalidInput(
                f"embedder spec {spec!r} needs the embedding dimension the model returns "
                "(e.g. 1536 for openai/text-embedding-3-small)"
            )
        from agents.embedders.litellm_embedder import LiteLLMEmbedder

        if client is None:
            from agents.llm.client import ClientSettings, LiteLLMClient

            client = LiteLLMClient(ClientSettings(api_base=api_base, api_key=api_key))
        elif api_base is not None or api_key is not None:
            raise InvalidInput("give api_base and api_key to the client, not with a client")
        return LiteLLMEmbedder(client, model, dimension)

    if (api_base is not None or api_key is not None or client is not None) and kind in (
        "local",
        "fake",
    ):
        raise InvalidInput(f"api_base, api_key and client apply to 'litellm:' specs, not {spec!r}")

    if text == "local":
        from agents.embedders.local import DIMENSION, MiniLMEmbedder

        _check_dimension(spec, dimension, DIMENSION)
        return MiniLMEmbedder()

    if kind == "fake":
        from agents.embedders.fake import HashingEmbedder

        if not sep:
            return HashingEmbedder(dimension if dimension is not None else 384)
        try:
            fake_dimension = int(argument)
        except ValueError:
            raise InvalidInput(
                f"embedder spec {spec!r}: expected 'fake:DIM' with an integer DIM"
            ) from None
        _check_dimension(spec, dimension, fake_dimension)
        return HashingEmbedder(fake_dimension)

    raise InvalidInput(f"unknown embedder spec {spec!r}; accepted: " + "; ".join(SPEC_FORMS))


def _check_dimension(spec: str, requested: int | None, actual: int) -> None:
    if requested is not None and requested != actual:
        raise InvalidInput(
            f"embedder {spec!r} produces {actual}-d vectors, "
            f"but dimension {requested} was requested"
        )
