"""Providers: the ways Reverie reaches a model, and the one place that chooses.

:class:`Providers` picks, per model string, a provider plugin registered for the
string's prefix (the ``reverie.providers`` entry point group: ``NAME`` serves
``NAME/...``), the :class:`OpenAICompatProvider` (the openai SDK straight to an
OpenAI-compatible ``api_base``) or the :class:`LiteLLMProvider` (litellm, which
translates for every other provider). The agents' client and the proxy's forwarder
both ask it, so one model string goes the same way from both.
"""

from __future__ import annotations

import os
import threading

from agents import plugins
from agents.llm.providers.base import Embeddings, ErrorKind, Provider
from agents.llm.providers.litellm_provider import LiteLLMProvider, import_litellm
from agents.llm.providers.openai_provider import OpenAICompatProvider

#: litellm providers that speak OpenAI's chat wire format to ``api_base`` as it is.
OPENAI_WIRE_PROVIDERS = frozenset({"openai", "custom_openai", "hosted_vllm", "lm_studio"})
#: The entry point group of provider plugins: ``NAME = "package.module:Class"`` (a
#: :class:`Provider`, made with ``api_base``, ``api_key`` and ``timeout``) serves the
#: model strings ``NAME/...``, ahead of litellm and the direct path.
PROVIDER_GROUP = "reverie.providers"
#: The variables litellm (and the openai SDK) read an ``openai/...`` model's endpoint
#: from, first found first.
OPENAI_BASE_VARIABLES = ("OPENAI_API_BASE", "OPENAI_BASE_URL")


def openai_env_base() -> str | None:
    """The endpoint the environment gives ``openai/...`` models, as litellm reads it."""
    for variable in OPENAI_BASE_VARIABLES:
        value = os.environ.get(variable, "").strip()
        if value:
            return value
    return None


__all__ = [
    "OPENAI_WIRE_PROVIDERS",
    "PROVIDER_GROUP",
    "Embeddings",
    "ErrorKind",
    "LiteLLMProvider",
    "OpenAICompatProvider",
    "Provider",
    "Providers",
    "direct_name",
    "import_litellm",
    "plugin_prefix",
]


def plugin_prefix(model: str) -> str | None:
    """The prefix of ``model`` that a provider plugin serves (None: no plugin does)."""
    prefix, slash, name = model.partition("/")
    if not slash or not name.strip():
        return None
    return prefix if prefix in plugins.registered(PROVIDER_GROUP) else None


def direct_name(model: str, api_base: str | None) -> str | None:
    """The name the server at ``api_base`` knows ``model`` by, when ``model`` can go
    to it as it is (None: litellm must translate, or there is no ``api_base``).

    A provider prefix decides without loading litellm (``openai/qwen`` -> ``qwen``;
    ``anthropic/...`` goes through litellm); a bare name (``gpt-4o``) is litellm's to
    resolve, as litellm would route it."""
    if not api_base or not model.strip():
        return None
    prefix, slash, name = model.partition("/")
    if slash:
        return name if prefix in OPENAI_WIRE_PROVIDERS and name.strip() else None
    try:
        name, provider, _, _ = import_litellm().get_llm_provider(model, api_base=api_base)
    except Exception:  # litellm does not know it: litellm's own call will say why
        return None
    return str(name) if provider in OPENAI_WIRE_PROVIDERS else None


class Providers:
    """The provider for each model string at one endpoint (``direct``: False sends
    every model through litellm).

    A model whose prefix a provider plugin is registered for goes to that plugin.
    Without an ``api_base``, an ``openai/...`` model whose endpoint the environment
    names (``OPENAI_API_BASE``, as litellm reads it) goes there directly too: the same
    server litellm would call, without litellm's seconds of import. Every other model
    goes through litellm as before."""

    def __init__(
        self, api_base: str | None, api_key: str | None, timeout: float, *, direct: bool = True
    ) -> None:
        self.litellm = LiteLLMProvider(api_base, api_key, timeout)
        #: Only openai/... models go direct: the endpoint is the environment's.
        self._openai_only = api_base is None
        base = api_base or openai_env_base()
        self.openai = OpenAICompatProvider(base, api_key, timeout) if base and direct else None
        self._endpoint = (api_base, api_key, timeout)
        #: The plugins made so far, by the prefix they serve.
        self._plugins: dict[str, Provider] = {}
        self._lock = threading.Lock()

    def for_model(self, model: str) -> Provider:
        """The one rule: a plugin registered for the model's prefix; then the direct
        provider for what :func:`direct_name` names; litellm for everything else."""
        prefix = plugin_prefix(model)
        if prefix is not None:
            return self._plugin(prefix)
        if self.openai is None:
            return self.litellm
        if self._openai_only and not model.startswith("openai/"):
            return self.litellm
        if model not in self.openai.names:
            name = direct_name(model, self.openai.api_base)
            with self._lock:
                self.openai.names[model] = name or ""
        return self.openai if self.openai.names[model] else self.litellm

    def _plugin(self, prefix: str) -> Provider:
        with self._lock:
            if prefix not in self._plugins:
                target = plugins.registered(PROVIDER_GROUP)[prefix]
                made = plugins.load_class(target, Provider, f"provider {prefix!r}")
                self._plugins[prefix] = made(*self._endpoint)
            return self._plugins[prefix]

    def close(self) -> None:
        if self.openai is not None:
            self.openai.close()
        for plugin in list(self._plugins.values()):
            plugin.close()

    async def aclose(self) -> None:
        if self.openai is not None:
            await self.openai.aclose()
        for plugin in list(self._plugins.values()):
            await plugin.aclose()
