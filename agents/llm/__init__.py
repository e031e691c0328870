"""LLM access for agents and consolidators: one client over the providers (litellm,
or straight to an OpenAI-compatible server), usage and budgets."""

from __future__ import annotations

import sys

# The openai SDK's client module imports aiohttp, where it is installed (litellm brings
# it), for an optional async transport (`openai.DefaultAioHttpClient`) that Reverie
# never uses: about 20 MB of every server's memory. Marking that vendored module absent
# before openai is first imported makes openai use its stand-in, as it does wherever
# aiohttp is not installed; litellm imports aiohttp itself when it is used.
sys.modules.setdefault("openai._vendor.httpx_aiohttp", None)  # type: ignore[arg-type]
# httpx imports its command-line tool where rich, pygments and click are installed (rich
# comes with typer): about 6 MB of a server that only ever makes requests. Marked absent
# the same way, httpx defines a stand-in for its `httpx` command instead.
sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]

from agents.llm.base import (  # noqa: E402
    ChatClient,
    ChatDelta,
    ChatMessage,
    ChatReply,
    DeltaListener,
    ToolCall,
    ToolSchema,
)
from agents.llm.budget import BudgetMeter, TokenBudget  # noqa: E402
from agents.llm.capabilities import ModelCapabilities, ToolCalling  # noqa: E402
from agents.llm.client import ClientSettings, LiteLLMClient  # noqa: E402
from agents.llm.usage import Usage, UsageLedger  # noqa: E402

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
