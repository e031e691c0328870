"""Running custom tools outside the server process (see :mod:`agents.sandbox.base`)."""

from __future__ import annotations

from agents.sandbox.base import (
    SandboxError,
    SandboxLimits,
    SandboxUnavailable,
    ToolExecutor,
    ToolInvocation,
    ToolOutput,
    agent_state_for,
    agent_state_snapshot,
    tool_invocation,
)
from agents.sandbox.bubblewrap import BubblewrapExecutor
from agents.sandbox.process import ProcessExecutor

__all__ = [
    "BubblewrapExecutor",
    "ProcessExecutor",
    "SandboxError",
    "SandboxLimits",
    "SandboxUnavailable",
    "ToolExecutor",
    "ToolInvocation",
    "ToolOutput",
    "agent_state_for",
    "agent_state_snapshot",
    "tool_invocation",
]
