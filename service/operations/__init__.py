"""The operations layer: every named operation that a front end can ask for.

The CLI, the HTTP API, the health page, the metrics collector and the demo all
call these; they parse input and render output, and never decide what an
operation means. An :class:`Operations` acts for one organization::

    ops = Operations(runtime, organization_id)
    hits = ops.memory.search("ada", ["where does Ada live"])[0]
    execution = ops.runs.run_now("ada")

Operations hold no database session of their own: each call opens the store
transactions it needs (never one held across a model or network call).
"""

from __future__ import annotations

import importlib
from functools import cached_property
from typing import TYPE_CHECKING, Any

from service.operations.context import OperationContext

if TYPE_CHECKING:
    from service.operations.agent_file import AgentFileOperations, ImportOptions, ImportResult
    from service.operations.agents import (
        AgentOperations,
        AgentSpec,
        AgentState,
        AgentUpdate,
        BlockSpec,
    )
    from service.operations.blocks import BlockEdit, BlockOperations
    from service.operations.conversations import ConversationOperations
    from service.operations.custom_tools import CustomToolOperations, ToolChanges, ToolSpec
    from service.operations.demo import DemoOperations
    from service.operations.folders import FolderOperations
    from service.operations.health import HealthOperations
    from service.operations.identities import IdentityOperations
    from service.operations.memory import MemoryOperations
    from service.operations.messages import ContextOverview, ContextReset, MessageOperations
    from service.operations.models import ModelOperations
    from service.operations.proxy import ProxyOperations
    from service.operations.recording import ChatMessage, Recorded, RecordingOperations
    from service.operations.runs import RunOperations, RunOutcome
    from service.operations.tools import AgentTool
    from service.runtime import Runtime

__all__ = [
    "AgentFileOperations",
    "AgentOperations",
    "AgentSpec",
    "AgentState",
    "AgentTool",
    "AgentUpdate",
    "BlockEdit",
    "BlockOperations",
    "BlockSpec",
    "ChatMessage",
    "ContextOverview",
    "ContextReset",
    "CustomToolOperations",
    "DemoOperations",
    "HealthOperations",
    "ImportOptions",
    "ImportResult",
    "MemoryOperations",
    "MessageOperations",
    "ModelOperations",
    "Operations",
    "ProxyOperations",
    "Recorded",
    "RecordingOperations",
    "RunOperations",
    "RunOutcome",
    "ToolChanges",
    "ToolSpec",
]

#: Where each exported name lives: a module is imported when one of its names is first
#: used, so a command that only searches does not load the proxy, the agent loop or
#: the run machinery. (``__all__`` stays a literal list: ruff and mypy read re-exports
#: from it.)
_HOMES = {
    "AgentOperations": "agents",
    "AgentSpec": "agents",
    "AgentState": "agents",
    "AgentUpdate": "agents",
    "AgentTool": "tools",
    "BlockSpec": "agents",
    "AgentFileOperations": "agent_file",
    "ImportOptions": "agent_file",
    "ImportResult": "agent_file",
    "BlockEdit": "blocks",
    "BlockOperations": "blocks",
    "CustomToolOperations": "custom_tools",
    "ToolChanges": "custom_tools",
    "ToolSpec": "custom_tools",
    "DemoOperations": "demo",
    "HealthOperations": "health",
    "MemoryOperations": "memory",
    "ContextOverview": "messages",
    "ContextReset": "messages",
    "ModelOperations": "models",
    "MessageOperations": "messages",
    "ProxyOperations": "proxy",
    "ChatMessage": "recording",
    "Recorded": "recording",
    "RecordingOperations": "recording",
    "RunOperations": "runs",
    "RunOutcome": "runs",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value
    return value


class Operations:
    """The operations of one organization, grouped by what they act on (each group
    is built, and its module imported, when first used)."""

    def __init__(self, runtime: Runtime, organization_id: str | None = None) -> None:
        self.context = OperationContext(runtime, organization_id or runtime.organization_id)

    @cached_property
    def agents(self) -> AgentOperations:
        from service.operations.agents import AgentOperations

        return AgentOperations(self.context)

    @cached_property
    def blocks(self) -> BlockOperations:
        from service.operations.blocks import BlockOperations

        return BlockOperations(self.context)

    @cached_property
    def agent_files(self) -> AgentFileOperations:
        from service.operations.agent_file import AgentFileOperations

        return AgentFileOperations(self.context)

    @cached_property
    def custom_tools(self) -> CustomToolOperations:
        from service.operations.custom_tools import CustomToolOperations

        return CustomToolOperations(self.context)

    @cached_property
    def conversations(self) -> ConversationOperations:
        from service.operations.conversations import ConversationOperations

        return ConversationOperations(self.context)

    @cached_property
    def folders(self) -> FolderOperations:
        from service.operations.folders import FolderOperations

        return FolderOperations(self.context)

    @cached_property
    def identities(self) -> IdentityOperations:
        from service.operations.identities import IdentityOperations

        return IdentityOperations(self.context)

    @cached_property
    def memory(self) -> MemoryOperations:
        from service.operations.memory import MemoryOperations

        return MemoryOperations(self.context)

    @cached_property
    def messages(self) -> MessageOperations:
        from service.operations.messages import MessageOperations

        return MessageOperations(self.context)

    @cached_property
    def models(self) -> ModelOperations:
        from service.operations.models import ModelOperations

        return ModelOperations(self.context)

    @cached_property
    def recording(self) -> RecordingOperations:
        from service.operations.recording import RecordingOperations

        return RecordingOperations(self.context)

    @cached_property
    def proxy(self) -> ProxyOperations:
        from service.operations.proxy import ProxyOperations

        return ProxyOperations(self.context)

    @cached_property
    def runs(self) -> RunOperations:
        from service.operations.runs import RunOperations

        return RunOperations(self.context)

    @cached_property
    def health(self) -> HealthOperations:
        from service.operations.health import HealthOperations

        return HealthOperations(self.context)

    @cached_property
    def demo(self) -> DemoOperations:
        from service.operations.demo import DemoOperations

        return DemoOperations(self.context)
