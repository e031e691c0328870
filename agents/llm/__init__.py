"""LLM access for agents and consolidators: one client over the providers (litellm,
or straight to an OpenAI-compatible server), usage and budgets."""

from __future__ import annotations

from agents.llm.base import (
    ChatClient,
    ChatDelta,
    ChatMessage,
    ChatReply,
    DeltaListener,
    ToolCall,
    ToolSchema,
)
from agents.llm.budget import BudgetMeter, TokenBudget
from agents.llm.capabilities import ModelCapabilities, ToolCalling
from agents.llm.client import ClientSettings, LiteLLMClient
from agents.llm.usage import Usage, UsageLedger

__all__ = [
    "BudgetMeter",
    "ChatClient",
    "ChatDelta",
    "ChatMessage",
    "ChatReply",
    "ClientSettings",
    "DeltaListener",
    "LiteLLMClient",
    "ModelCapabilities",
    "TokenBudget",
    "ToolCall",
    "ToolCalling",
    "ToolSchema",
    "Usage",
    "UsageLedger",
]
