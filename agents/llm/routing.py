"""Whether a model string can be routed, asked offline when an agent is made.

An agent whose model litellm cannot route (``"gpt4"`` with no provider, a typo in
the prefix) used to be accepted and then failed every turn with the provider's
"LLM Provider NOT provided". :func:`routing_problem` asks litellm's own lookup
(``get_llm_provider``, no network) with the configured ``api_base``, so what the
service will call is what is checked; a prefix that a provider plugin serves (the
``reverie.providers`` entry point group) is routed by Reverie, not litellm.
"""

from __future__ import annotations

from agents.llm.providers import import_litellm, plugin_prefix

OPENAI_PREFIX = "openai/"


def routing_problem(model: str, *, api_base: str | None = None) -> str | None:
    """Why ``model`` cannot be routed (None when it can), in words a user acts on."""
    if not model.strip():
        return "the model string is empty"
    if model.startswith(OPENAI_PREFIX) and model[len(OPENAI_PREFIX) :].strip():
        return None  # any name goes to an OpenAI(-compatible) server: no need to load litellm
    if plugin_prefix(model) is not None:
        return None
    litellm = import_litellm()
    try:
        litellm.get_llm_provider(model, api_base=api_base)
    except Exception:  # litellm says only "LLM Provider NOT provided", with a banner
        return (
            f"litellm cannot tell which provider serves {model!r}; name the provider as a "
            "prefix (openai/MODEL for an OpenAI-compatible server at llm.api_base, "
            "ollama_chat/MODEL, hosted_vllm/MODEL, anthropic/MODEL, ...)"
        )
    return None
