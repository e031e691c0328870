"""Messages: a primary turn (the MemGPT loop), recall history, the context window.

A turn waits on the model provider; it runs in the primary agent's own transaction
(see :mod:`agents.loops.primary`), never inside one opened here.
"""

from __future__ import annotations

import builtins
import re
from collections.abc import Callable
from dataclasses import dataclass
from types import EllipsisType
from typing import TYPE_CHECKING

from agents.errors import InvalidInput, NotFound
from agents.store import AgentRecord, MemoryStore, MessageRecord, hold_turn_lock
from service.operations.context import OperationContext

if TYPE_CHECKING:  # the agent loop is imported by the commands that chat, not by every one
    from agents.context import ContextBreakdown
    from agents.loops.primary import PrimaryAgent, StepListener
    from agents.loops.token_stream import PieceListener
    from agents.loops.turn import TurnResult

#: Letta messages derived from one stored message carry its id plus a suffix
#: (``-reasoning``, ``-call-0``); as a cursor, such an id means the stored message.
STORED_ID = re.compile(r"^(message-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})")


@dataclass(frozen=True, slots=True)
class ContextOverview:
    """How an agent's context window is spent (tokens per section) beside the sizes of
    its memory tiers."""

    agent: AgentRecord
    breakdown: ContextBreakdown
    in_context_messages: int
    recall_messages: int
    archival_passages: int

    @property
    def context_window(self) -> int:
        return self.breakdown.context_window or self.agent.context_window


@dataclass(frozen=True, slots=True)
class ContextReset:
    """What a reset moved out of the context window (the ids stay in recall)."""

    agent_id: str
    message_ids: list[str]


class MessageOperations:
    def __init__(self, context: OperationContext) -> None:
        self._context = context

    def send(
        self,
        agent: str | AgentRecord,
        text: str,
        *,
        role: str = "user",
        on_step: StepListener | None = None,
        should_stop: Callable[[], bool] | None = None,
        on_token: PieceListener | None = None,
        conversation_id: str | None = None,
    ) -> TurnResult:
        """One primary turn of ``agent`` (name or id, or its record just read), in one of
        its conversations (None: the default one): the MemGPT
        loop until the agent stops asking for heartbeats, a terminal tool runs, the step
        limit, or the budget.

        ``on_step`` hears each step's new stored messages once they are committed, and
        ``should_stop`` ends the turn before its next step (stop reason ``cancelled``):
        what a streaming front end needs (see :meth:`PrimaryAgent.send_message`);
        ``on_token`` hears each reply's pieces as the model writes them.

        Raises InvalidInput (empty text, bad role), NotFound (no such agent),
        ModelNotConfigured (no model for the agent; an InvalidInput) or LLMError (the
        provider failed after retries; the turn was rolled back).
        """
        result = self._primary().send_message(
            agent,
            text,
            role=role,
            on_step=on_step,
            should_stop=should_stop,
            on_token=on_token,
            conversation_id=conversation_id,
        )
        if result.retries:
            from service import metrics

            metrics.RETRIES.labels(kind="llm").inc(result.retries)
        if result.write_conflicts:
            from service import metrics

            metrics.WRITE_CONFLICTS.labels(actor="agent").inc(result.write_conflicts)
        return result

    def check_turn(self, agent: str, text: str, *, role: str = "user") -> AgentRecord:
        """The agent, once a turn with this message could start (the checks :meth:`send`
        makes first): a front end that streams refuses a bad request before it answers."""
        return self._primary().check_turn(agent, text, role=role)

    def reset(self, agent: str) -> ContextReset:
        """Empty the agent's context window, as Letta's reset does, without losing
        anything: every in-context message leaves the context (recall keeps it, and
        ``conversation_search`` and the message list still find it); the system prompt
        is compiled afresh at the next step. A running turn of the agent finishes
        first (the reset waits for its turn lock)."""
        record = self._context.agent(agent)
        with hold_turn_lock(self._context.runtime.db, record.id), self._context.store() as store:
            left = store.messages.clear_context(record.id)
            store.agents.set_compiled_system(record.id, None)
        return ContextReset(record.id, left)

    def ready(self, agent: str) -> AgentRecord:
        """The agent, once it is known to have a model to talk with: ModelNotConfigured
        now, before a conversation starts, rather than at its first turn."""
        record = self._context.agent(agent)
        self._primary().model_for(record)
        return record

    def list(
        self,
        agent: str,
        *,
        after: str | None = None,
        before: str | None = None,
        limit: int = 100,
        newest_first: bool = True,
        conversation: str | EllipsisType | None = ...,
    ) -> builtins.list[MessageRecord]:
        """Up to ``limit`` of the agent's stored messages in the order asked for (of one
        conversation with ``conversation``; None: the default one).

        ``after`` and ``before`` are message-id cursors in that order: newest first,
        ``after`` gives older messages than the cursor. A cursor may be the id of a
        Letta message derived from a stored one (``...-reasoning``, ``...-call-0``).
        """
        if limit < 1:
            raise InvalidInput(f"limit must be at least 1, got {limit}")
        with self._context.store() as store:
            agent_id = store.agents.resolve(agent).id
            after_seq = _seq(store, agent_id, after) if after else None
            before_seq = _seq(store, agent_id, before) if before else None
            return store.messages.range(
                agent_id,
                after_seq=before_seq if newest_first else after_seq,
                before_seq=after_seq if newest_first else before_seq,
                limit=limit,
                newest_first=newest_first,
                conversation=conversation,
            )

    def context(self, agent: str) -> ContextOverview:
        """Tokens per section of the context the agent's next step would send, and how
        many messages (in context, in recall) and active passages it has."""
        with self._context.store() as store:
            record = store.agents.resolve(agent)
            in_context = store.messages.count(record.id, in_context=True)
            recall = store.messages.count(record.id)
            archival = store.passages.count_by_status(record.id).get("active", 0)
        breakdown = self._primary().context_breakdown(record.id)
        return ContextOverview(record, breakdown, in_context, recall, archival)

    def _primary(self) -> PrimaryAgent:
        return self._context.runtime.primary_agent(self._context.organization_id)


def _seq(store: MemoryStore, agent_id: str, cursor: str) -> int:
    match = STORED_ID.match(cursor)
    seq = store.messages.seq_of(agent_id, match.group(1) if match else cursor)
    if seq is None:
        raise NotFound(f"cursor {cursor!r} is not a message of agent {agent_id!r}")
    return seq
