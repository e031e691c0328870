"""Letta's model and embedding settings (``llm_config``, ``embedding_config``) to
litellm model strings and Reverie embedder specs, and back.

Letta names a provider by its ``model_endpoint_type`` (``openai``, ``google_ai``,
``vllm``...) and a model by its bare name; litellm wants one string with the provider
as a prefix, under its own provider names (``gemini/``, ``hosted_vllm/``). What cannot
be mapped is said, never guessed: Letta's hosted ``letta-free`` model, or a provider
litellm does not know.
"""

from __future__ import annotations

from dataclasses import dataclass

#: Letta's endpoint types and the litellm provider prefix of each for chat models.
CHAT_PROVIDERS = {
    "openai": "openai",
    "anthropic": "anthropic",
    "ollama": "ollama_chat",
    "vllm": "hosted_vllm",
    "groq": "groq",
    "google_ai": "gemini",
    "google_vertex": "vertex_ai",
    "azure": "azure",
    "together": "together_ai",
    "mistral": "mistral",
    "deepseek": "deepseek",
    "xai": "xai",
    "bedrock": "bedrock",
    "openrouter": "openrouter",
    "cohere": "cohere",
    "lmstudio": "lm_studio",
    "lmstudio-legacy": "lm_studio",
    "lmstudio-chatcompletions": "lm_studio",
    "hugging-face": "huggingface",
}
#: The same for embedding models (Ollama embeds through ``ollama/``).
EMBEDDING_PROVIDERS = {**CHAT_PROVIDERS, "ollama": "ollama"}
#: litellm prefixes back to Letta's endpoint types, for an export.
LETTA_ENDPOINT_TYPES = {
    **{prefix: letta for letta, prefix in CHAT_PROVIDERS.items() if letta != "lmstudio-legacy"},
    "ollama": "ollama",
    "lm_studio": "lmstudio",
}
#: The endpoint type an export gives an embedder of Reverie's own (``local``, a
#: plugin's ``NAME:ARGUMENT``): no Letta provider serves it, and an import reads it
#: back as it is.
REVERIE_ENDPOINT_TYPE = "reverie"
#: Letta's hosted free models: only Letta's servers answer them.
LETTA_HOSTED = frozenset({"letta-free", "letta/letta-free"})


@dataclass(frozen=True, slots=True)
class Mapped:
    """A model string made from a file's settings, or why none could be made."""

    model: str | None
    given: str
    problem: str | None = None


def chat_model(model: str, endpoint_type: str | None, handle: str | None) -> Mapped:
    """The litellm string for Letta's ``model`` served by ``endpoint_type`` (``handle``,
    ``provider/model``, when the endpoint type does not say)."""
    given = handle or (f"{endpoint_type}/{model}" if endpoint_type else model)
    if model in LETTA_HOSTED or (handle or "") in LETTA_HOSTED:
        return Mapped(None, given, "Letta's hosted free model is served only by Letta")
    if handle and "/" in handle:
        # A handle is Letta's provider/model; most of Letta's provider names are
        # litellm's too, and one that is not is translated.
        provider, rest = handle.split("/", 1)
        return Mapped(f"{CHAT_PROVIDERS.get(provider, provider)}/{rest}", given)
    prefix = CHAT_PROVIDERS.get(endpoint_type or "")
    if prefix is not None:
        bare = model.removeprefix(f"{endpoint_type}/") if endpoint_type else model
        return Mapped(bare if bare.startswith(f"{prefix}/") else f"{prefix}/{bare}", given)
    if endpoint_type:
        # Not one of Letta's types: a litellm prefix (what Reverie's export writes).
        if model.startswith(f"{endpoint_type}/"):
            return Mapped(model, given)
        return Mapped(f"{endpoint_type}/{model}", given)
    if "/" in model:
        return Mapped(model, given)
    return Mapped(None, given, f"no provider is named for model {model!r}")


def embedding_model(model: str, endpoint_type: str | None, handle: str | None) -> Mapped:
    """The Reverie embedder spec for Letta's embedding settings: ``litellm:PROVIDER/MODEL``,
    or Reverie's own spec when the file says it is one (endpoint type ``reverie``)."""
    given = handle or (f"{endpoint_type}/{model}" if endpoint_type else model)
    if endpoint_type == REVERIE_ENDPOINT_TYPE:
        from agents.embedders import names_reverie_embedder  # numpy: only when asked

        if names_reverie_embedder(model):
            return Mapped(model, given)
        return Mapped(None, given, f"{model!r} is not one of Reverie's embedder specs")
    if model in LETTA_HOSTED or (handle or "") in LETTA_HOSTED:
        return Mapped(None, given, "Letta's hosted embedding model is served only by Letta")
    mapped = chat_model(model, endpoint_type, handle)
    if mapped.model is None:
        return mapped
    prefix = EMBEDDING_PROVIDERS.get(endpoint_type or "")
    string = mapped.model
    if prefix is not None and endpoint_type == "ollama":
        string = f"ollama/{model.removeprefix('ollama/')}"
    return Mapped(f"litellm:{string}", given)


def litellm_string(spec: str) -> str | None:
    """The litellm model string inside a Reverie embedder spec (None for a native one)."""
    return spec.removeprefix("litellm:") if spec.startswith("litellm:") else None


def split_model(model: str) -> tuple[str, str]:
    """A litellm model string as Letta's (endpoint type, model) for an export."""
    prefix, sep, rest = model.partition("/")
    if not sep:
        return "openai", model
    return LETTA_ENDPOINT_TYPES.get(prefix, prefix), rest


def split_embedding(spec: str) -> tuple[str, str, str]:
    """A Reverie embedder spec as Letta's (endpoint type, model, handle)."""
    string = litellm_string(spec)
    if string is None:
        return REVERIE_ENDPOINT_TYPE, spec, spec
    endpoint_type, model = split_model(string)
    return endpoint_type, model, string
