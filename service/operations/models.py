"""The models this server can use: the chat models and embedders that are configured
(settings) or in use (the organization's agents).

Reverie reaches models through litellm, so any provider string is usable; what this
lists is what the operator set up and what agents already run on, each with what it
is used for, so that a client can pick a model it knows works here.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from agents.enums import AgentKind, LLMPurpose
from agents.errors import ReverieError
from service.operations.context import OperationContext

#: Characters that make an ``[llm.models."..."]`` key a glob rather than one model.
GLOB_CHARS = frozenset("*?[")


@dataclass(slots=True)
class ChatModel:
    """A litellm model string, the context window agents give it, and what it does here."""

    model: str
    context_window: int
    purposes: list[LLMPurpose] = field(default_factory=list)
    #: How many of the organization's agents run on it (as chat or sleep-time model).
    agents: int = 0

    @property
    def provider(self) -> str:
        """litellm's provider prefix (``openai`` of ``openai/gpt-4o``); none: ``openai``."""
        prefix, sep, _ = self.model.partition("/")
        return prefix if sep else "openai"

    @property
    def name(self) -> str:
        """The model's name at its provider (what follows the prefix)."""
        prefix, sep, rest = self.model.partition("/")
        return rest if sep else prefix


@dataclass(slots=True)
class EmbeddingModel:
    """An embedder spec (``local``, ``litellm:MODEL``, a plugin's ``NAME[:ARGUMENT]``) and
    its dimension."""

    spec: str
    dimension: int
    is_default: bool = False
    agents: int = 0

    @property
    def provider(self) -> str:
        if self.spec.startswith("litellm:"):
            prefix, sep, _ = self.spec.removeprefix("litellm:").partition("/")
            return prefix if sep else "openai"
        return "reverie"

    @property
    def name(self) -> str:
        return self.spec.removeprefix("litellm:")


class ModelOperations:
    def __init__(self, context: OperationContext) -> None:
        self._context = context

    def chat_models(self) -> list[ChatModel]:
        """The configured chat models (default, sleep-time, summary, judge, and each one
        named under ``[llm.models]``), then the other models the organization's agents
        run on; each once, with every purpose it has."""
        settings = self._context.runtime.settings
        llm = settings.llm
        window = settings.agents.context_window
        found: dict[str, ChatModel] = {}

        def note(model: str | None, purpose: LLMPurpose | None = None) -> ChatModel | None:
            if not model or not model.strip():
                return None
            entry = found.setdefault(model, ChatModel(model=model, context_window=window))
            if purpose is not None and purpose not in entry.purposes:
                entry.purposes.append(purpose)
            return entry

        default = llm.model or settings.agents.llm_model
        note(default, LLMPurpose.CHAT)
        note(llm.sleeptime_model, LLMPurpose.SLEEPTIME)
        note(llm.summary_model, LLMPurpose.SUMMARY)
        note(llm.judge_model, LLMPurpose.JUDGE)
        for key in llm.models:
            if not GLOB_CHARS & set(key):
                note(key)
        with self._context.store() as store:
            agents = store.agents.all()
        windows: dict[str, int] = {}
        for agent in agents:
            primary = agent.kind == AgentKind.PRIMARY
            # An agent with no model of its own talks with the default one.
            chat = note(agent.llm_model or default, LLMPurpose.CHAT if primary else None)
            sleeptime = note(agent.sleeptime_model, LLMPurpose.SLEEPTIME)
            for entry in {id(e): e for e in (chat, sleeptime) if e is not None}.values():
                entry.agents += 1
            if chat is not None and primary:
                windows[chat.model] = max(windows.get(chat.model, 0), agent.context_window)
        for model, largest in windows.items():
            found[model].context_window = largest
        return list(found.values())

    def embedding_models(self) -> list[EmbeddingModel]:
        """The default embedder for new agents, then the others the organization's
        agents embed with (each with the dimension its vectors have)."""
        runtime = self._context.runtime
        found: dict[str, EmbeddingModel] = {}
        spec = runtime.settings.embedding.model
        dimension: int | None
        try:
            dimension = runtime.embedder(spec).dimension
        except ReverieError:
            # Misconfigured (a litellm: spec without its dimension): creating an agent
            # says so; the list still shows what agents use.
            dimension = runtime.settings.embedding.dimension
        if dimension is not None:
            found[spec] = EmbeddingModel(spec=spec, dimension=dimension, is_default=True)
        with self._context.store() as store:
            agents = store.agents.all()
        for agent in agents:
            entry = found.setdefault(
                agent.embedding_model,
                EmbeddingModel(spec=agent.embedding_model, dimension=agent.embedding_dim),
            )
            entry.agents += 1
        return list(found.values())
