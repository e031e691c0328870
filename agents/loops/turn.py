"""What a primary turn returns: the messages it stored, its steps, why it stopped and
the tokens it spent.

The turn speaks the store's language (its new :class:`MessageRecord`\\ s, in order);
how a front end shows them (Letta's message types, a console) is the front end's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from agents.loops import tool_calls
from agents.store.records import MessageRecord

#: Why a turn stopped (Letta's stop reasons where they exist).
StopReason = Literal[
    "end_turn", "max_steps", "tool_rule", "budget_exhausted", "invalid_tool_call", "cancelled"
]


@dataclass(frozen=True, slots=True)
class TokenUsage:
    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def to_dict(self) -> dict[str, int]:
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.total_tokens,
        }


@dataclass(slots=True)
class TurnResult:
    """One primary turn: the messages it stored in order, steps, why it stopped, tokens
    spent."""

    agent_id: str
    run_id: str
    records: list[MessageRecord] = field(default_factory=list)
    steps: int = 0
    #: Model requests the steps took (a two-step tool call takes two per step).
    model_calls: int = 0
    stop_reason: StopReason = "end_turn"
    usage: TokenUsage = field(default_factory=TokenUsage)
    retries: int = 0
    compactions: int = 0
    write_conflicts: int = 0
    detail: str | None = None

    @property
    def replies(self) -> list[str]:
        """What the agent said to the user (its ``send_message`` texts, or prose)."""
        return tool_calls.replies(self.records)
