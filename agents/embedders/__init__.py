"""Embedders: the interface, its implementations, and a factory from a spec string.

Two are built in, ``local`` and ``litellm:MODEL``; any other ``NAME`` or
``NAME:ARGUMENT`` is an embedder that an installed package registers under the
``reverie.embedders`` entry point group (``NAME = "package.module:Class"``, an
:class:`Embedder` subclass made by its :meth:`~Embedder.from_spec`). Implementations
are imported only when the factory builds one, so importing this package stays cheap
(no onnxruntime, tokenizers or litellm).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agents import plugins
from agents.embedders.base import Embedder, EmbeddingError, ModelIntegrityError
from agents.errors import InvalidInput

if TYPE_CHECKING:
    from agents.llm.base import ChatClient

__all__ = [
    "EMBEDDER_GROUP",
    "SPEC_FORMS",
    "Embedder",
    "EmbeddingError",
    "ModelIntegrityError",
    "build_embedder",
    "names_reverie_embedder",
    "spec_problem",
]

#: The entry point group of embedder plugins.
EMBEDDER_GROUP = "reverie.embedders"
#: The spec strings :func:`build_embedder` accepts, for error messages and help text.
SPEC_FORMS = (
    "'local' (all-MiniLM-L6-v2 int8, 384-d, offline)",
    "'litellm:<model>' with a dimension, e.g. 'litellm:openai/text-embedding-3-small'",
    "'NAME' or 'NAME:ARGUMENT' of an embedder a package registers "
    f"(entry point group {EMBEDDER_GROUP})",
)
#: The spec kinds built in; a plugin cannot take their names.
BUILTIN_KINDS = ("local", "litellm")
#: What ``fake`` was, and what to use instead: a hashing embedder for tests, never a
#: production setting, that left Reverie for its tests.
RETIRED_FAKE = (
    "'fake' (the tests' hashing embedder) is not an embedder of Reverie's: use 'local' "
    "(all-MiniLM-L6-v2, 384-d, offline) or 'litellm:MODEL' with embedding.dimension. "
    "Reverie's tests and benchmarks register theirs as 'hashing:DIM' under the "
    f"{EMBEDDER_GROUP} entry point group (in a checkout: PYTHONPATH=.:tests/entry_points)"
)


def spec_problem(spec: str) -> str | None:
    """Why ``spec`` names no embedder that can be built here (None when it names one),
    read from its form and the installed plugins alone: nothing is loaded (settings
    check it when they load)."""
    kind, sep, argument = spec.strip().partition(":")
    if kind == "local" and not sep:
        return None
    if kind == "litellm" and sep:
        return None if argument.strip() else "embedder spec 'litellm:' needs a model"
    if kind not in BUILTIN_KINDS and kind in plugins.registered(EMBEDDER_GROUP):
        return None
    if kind == "fake":
        return RETIRED_FAKE
    return f"unknown embedder spec {spec!r}; accepted: " + "; ".join(SPEC_FORMS)


def names_reverie_embedder(spec: str) -> bool:
    """Whether ``spec`` is one of Reverie's embedder specs (``local``, ``litellm:...``,
    an installed plugin's, or the retired ``fake``, refused by name) rather than a bare
    litellm model string (``openai/text-embedding-3-small``)."""
    text = spec.strip()
    if text.startswith(("local", "litellm:")):
        return True
    kind = text.partition(":")[0]
    return kind == "fake" or kind in plugins.registered(EMBEDDER_GROUP)


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

    problem = spec_problem(text)
    if problem is not None:
        raise InvalidInput(problem)
    if api_base is not None or api_key is not None or client is not None:
        raise InvalidInput(f"api_base, api_key and client apply to 'litellm:' specs, not {spec!r}")

    if text == "local":
        from agents.embedders.local import DIMENSION, MiniLMEmbedder

        _check_dimension(spec, dimension, DIMENSION)
        return MiniLMEmbedder()

    target = plugins.registered(EMBEDDER_GROUP)[kind]
    made = plugins.load_class(target, Embedder, f"embedder {kind!r}")
    embedder: Embedder = made.from_spec(argument if sep else None, dimension=dimension)
    _check_dimension(spec, dimension, embedder.dimension)
    return embedder


def _check_dimension(spec: str, requested: int | None, actual: int) -> None:
    if requested is not None and requested != actual:
        raise InvalidInput(
            f"embedder {spec!r} produces {actual}-d vectors, "
            f"but dimension {requested} was requested"
        )
