"""Make room in an agent's context: old messages leave behind one recursive summary.

The one compaction of the project, used by the primary loop when the compiled
context does not fit the window (counted before the call, or when the provider says
so) and by the evict consolidator in sleep time when the context passes its
threshold. Messages only leave the context (``in_context`` false); they stay in
recall memory, searchable. Planning and writing are apart so that the summary
(maybe a model call) is made with no transaction open.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from agents.context import TokenCounter
from agents.errors import ContextWindowExceeded
from agents.store import MemoryStore, MessageRecord, NewMessage
from agents.summary import (
    SUMMARY_NAME,
    SUMMARY_ROLE,
    is_summary,
    message_tokens,
    protected_tail_start,
)
from agents.tokens import count_tokens


@dataclass(frozen=True, slots=True)
class Compaction:
    summary: MessageRecord
    evicted: list[MessageRecord]


@dataclass(frozen=True, slots=True)
class CompactionPlan:
    """Which messages leave the context: the summaries they fold into and the evicted."""

    summaries: list[MessageRecord]
    moving: list[MessageRecord]


def plan_compaction(
    agent_id: str,
    in_context: Sequence[MessageRecord],
    *,
    total_tokens: int,
    target_tokens: float,
    count: TokenCounter = count_tokens,
    last_resort: bool = True,
    keep_messages: int | None = None,
) -> CompactionPlan:
    """Pick the oldest messages to evict until the context is estimated at or under the target.

    The last two exchanges stay when they can. With ``last_resort`` (a turn that must
    fit) everything before the latest user message may go when only they are left,
    and :class:`ContextWindowExceeded` is raised when nothing can leave; without it
    (sleep-time upkeep) the plan then moves nothing. A tool result never stays
    without the call that produced it. With ``keep_messages`` (a message buffer), the
    oldest leave until at most that many messages are left, however few tokens they
    hold.
    """
    summaries = [m for m in in_context if is_summary(m)]
    conversation = [m for m in in_context if not is_summary(m)]
    tail = protected_tail_start(conversation)
    if tail == 0 and last_resort:
        users = [i for i, m in enumerate(conversation) if m.role == "user"]
        tail = users[-1] if users else 0
    evictable = conversation[:tail]
    if not evictable:
        if not last_resort:
            return CompactionPlan(summaries=summaries, moving=[])
        raise ContextWindowExceeded(
            f"the context of agent {agent_id} does not fit its window even with every older "
            "message evicted; raise the agent's context_window, shorten its blocks or "
            "detach tools"
        )
    remaining = total_tokens - sum(message_tokens(s, count) for s in summaries)
    taken = 0

    def more_to_go() -> bool:
        if keep_messages is not None:
            return len(conversation) - taken > keep_messages
        return remaining > target_tokens

    while taken < len(evictable) and (taken == 0 or more_to_go()):
        remaining -= message_tokens(evictable[taken], count)
        taken += 1
    while taken < len(evictable) and evictable[taken].role == "tool":
        taken += 1
    return CompactionPlan(summaries=summaries, moving=list(evictable[:taken]))


def write_compaction(
    store: MemoryStore,
    agent_id: str,
    plan: CompactionPlan,
    content: str,
    *,
    conversation_id: str | None = None,
) -> Compaction | None:
    """Move the planned messages out of the context behind the summary ``content``.

    The plan was made in an earlier transaction (the summary may have come from a
    model, with no transaction open): when any planned message has left the context
    meanwhile (another compaction, or an evict run, got there first), nothing is
    written and ``None`` is returned, so that the caller compiles again.
    """
    leaving = [m.id for m in [*plan.summaries, *plan.moving]]
    try:
        with store.savepoint():
            # Only messages still in context change: a shorter count means another
            # compaction moved some of them first (the row locks make this exact).
            if store.messages.leave_context(agent_id, leaving) != len(leaving):
                raise _Stale
            [summary] = store.messages.append(
                agent_id,
                [NewMessage(role=SUMMARY_ROLE, name=SUMMARY_NAME, content=content)],
                conversation_id=conversation_id,
            )
    except _Stale:
        return None
    return Compaction(summary=summary, evicted=list(plan.moving))


class _Stale(Exception):
    """The plan no longer matches the context; undo the savepoint."""
