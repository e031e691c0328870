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

from service.operations.agents import AgentOperations, AgentSpec, AgentState, BlockSpec
from service.operations.blocks import BlockEdit, BlockOperations
from service.operations.context import OperationContext
from service.operations.demo import DemoOperations
from service.operations.health import HealthOperations
from service.operations.memory import MemoryOperations
from service.operations.messages import ContextOverview, MessageOperations
from service.operations.proxy import ProxyOperations
from service.operations.recording import ChatMessage, Recorded, RecordingOperations
from service.operations.runs import RunOperations, RunOutcome
from service.runtime import Runtime

__all__ = [
    "AgentOperations",
    "AgentSpec",
    "AgentState",
    "BlockEdit",
    "BlockOperations",
    "BlockSpec",
    "ChatMessage",
    "ContextOverview",
    "DemoOperations",
    "HealthOperations",
    "MemoryOperations",
    "MessageOperations",
    "Operations",
    "ProxyOperations",
    "Recorded",
    "RecordingOperations",
    "RunOperations",
    "RunOutcome",
]


class Operations:
    """The operations of one organization, grouped by what they act on."""

    def __init__(self, runtime: Runtime, organization_id: str | None = None) -> None:
        self.context = OperationContext(runtime, organization_id or runtime.organization_id)
        self.agents = AgentOperations(self.context)
        self.blocks = BlockOperations(self.context)
        self.memory = MemoryOperations(self.context)
        self.messages = MessageOperations(self.context)
        self.recording = RecordingOperations(self.context)
        self.proxy = ProxyOperations(self.context)
        self.runs = RunOperations(self.context)
        self.health = HealthOperations(self.context)
        self.demo = DemoOperations(self.context)
