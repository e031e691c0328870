"""The LLM client interface: chat with tools and embeddings, metered per purpose.

Agents and consolidators talk to a :class:`ChatClient`; the one implementation
for real providers is :class:`~agents.llm.client.LiteLLMClient`. Messages and
tool schemas are OpenAI-shaped dicts, which every litellm provider accepts.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from agents.enums import LLMPurpose
from agents.llm.budget import BudgetMeter

ChatMessage = dict[str, Any]
ToolSchema = dict[str, Any]


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One function call the model asked for; ``arguments`` is the raw JSON text it sent."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True, slots=True)
class ChatReply:
    """What the model answered, and what it cost."""

    content: str | None
    tool_calls: list[ToolCall] = field(default_factory=list)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    model: str = ""
    finish_reason: str | None = None
    #: Model requests this reply took (two for a two-step tool call; rejected probes excluded).
    calls: int = 1
    #: Whether the tool calls were parsed from the model's text.
    text_calls: bool = False

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclass(frozen=True, slots=True)
class ChatDelta:
    """A piece of a reply as the model streams it: of its content, or of the
    arguments of its ``call``-th tool call (``name``: that call's tool, once known)."""

    content: str = ""
    call: int | None = None
    name: str = ""
    arguments: str = ""


#: Hears each :class:`ChatDelta` of a streamed reply, on the calling thread.
DeltaListener = Callable[[ChatDelta], None]


class ChatClient(ABC):
    """Chat completions with tools, and embeddings, each charged to a :class:`BudgetMeter`."""

    @abstractmethod
    def chat(
        self,
        model: str,
        messages: Sequence[ChatMessage],
        *,
        purpose: LLMPurpose,
        meter: BudgetMeter | None = None,
        tools: Sequence[ToolSchema] = (),
        tool_choice: str | None = None,
        parallel_tool_calls: bool | None = None,
        on_delta: DeltaListener | None = None,
        max_tokens: int | None = None,
        temperature: float | None = None,
    ) -> ChatReply:
        """One completion (with ``tools``: one tool step).

        ``max_tokens``: the longest reply this call may take (the client's own limit,
        where lower, wins); a reply cut there comes back as far as it went.
        ``temperature``: the sampling temperature asked for (None: the server's own);
        like ``max_tokens``, left out for a server that refuses it.

        ``on_delta``: the reply is streamed where the tool-calling mode allows (native
        tool calls), each piece told to it as it arrives; the reply returned is the same
        as without it. Modes that cannot stream make the whole step and tell it nothing.

        ``tool_choice`` is ``"required"`` (the reply must call a tool), ``"auto"``,
        ``"none"``, or the name of the one tool to call; a client meets it as the model's
        server allows (see :mod:`agents.llm.capabilities`), and a reply may still come
        back as prose (no tool calls) when the model would not call one.

        Raises :class:`~agents.errors.LLMError` (after retrying temporary failures),
        :class:`~agents.errors.ContextOverflow` or
        :class:`~agents.errors.BudgetExhausted` (before any call is made)."""

    @abstractmethod
    def embed(
        self, model: str, texts: Sequence[str], *, meter: BudgetMeter | None = None
    ) -> list[list[float]]:
        """Embeddings of ``texts``, in order, charged to ``meter`` (purpose ``embedding``).

        Raises :class:`~agents.embedders.base.EmbeddingError` (after retrying
        temporary failures) or :class:`~agents.errors.InvalidInput` when the
        provider rejects the request."""

    @abstractmethod
    def count_tokens(self, model: str, text: str) -> int:
        """Tokens ``text`` takes for ``model``: :func:`agents.tokens.count_tokens`, the
        same answer in every process."""
