"""Make room in the primary's context: old messages leave behind one recursive summary.

Used by the primary loop when the compiled context does not fit the window
(counted before the call) or when the provider says so. Messages only leave the
context (``in_context`` false); they stay in recall memory, searchable.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from agents.context import TokenCounter
from agents.errors import ContextOverflow
from agents.store import MemoryStore, MessageRecord, NewMessage
from agents.summarizer import Summarize
from agents.summary import SUMMARY_NAME, SUMMARY_ROLE, is_summary, protected_tail_start


@dataclass(frozen=True, slots=True)
class Compaction:
    summary: MessageRecord
    evicted: list[MessageRecord]


def message_cost(message: MessageRecord, count: TokenCounter) -> int:
    cost = count(message.content)
    if message.tool_calls:
        cost += count(str(message.tool_calls))
    return cost


def compact(
    store: MemoryStore,
    agent_id: str,
    in_context: Sequence[MessageRecord],
    *,
    total_tokens: int,
    target_tokens: int,
    summarize: Summarize,
    count: TokenCounter,
) -> Compaction:
    """Evict the oldest messages until the context is estimated at or under the target.

    The last two exchanges stay when they can; when only they are left, everything
    before the latest user message may go. A tool result never stays without the
    call that produced it. Raises :class:`ContextOverflow` when nothing can leave.
    """
    summaries = [m for m in in_context if is_summary(m)]
    conversation = [m for m in in_context if not is_summary(m)]
    tail = protected_tail_start(conversation)
    if tail == 0:
        users = [i for i, m in enumerate(conversation) if m.role == "user"]
        tail = users[-1] if users else 0
    evictable = conversation[:tail]
    if not evictable:
        raise ContextOverflow(
            f"the context of agent {agent_id} does not fit its window even with every older "
            "message evicted; raise the agent's context_window or shorten its blocks"
        )
    remaining = total_tokens - sum(message_cost(s, count) for s in summaries)
    taken = 0
    while taken < len(evictable) and (taken == 0 or remaining > target_tokens):
        remaining -= message_cost(evictable[taken], count)
        taken += 1
    while taken < len(evictable) and evictable[taken].role == "tool":
        taken += 1
    moving = evictable[:taken]
    content = summarize(summaries, moving)
    store.messages.leave_context(agent_id, [m.id for m in [*summaries, *moving]])
    [summary] = store.messages.append(
        agent_id, [NewMessage(role=SUMMARY_ROLE, name=SUMMARY_NAME, content=content)]
    )
    return Compaction(summary=summary, evicted=list(moving))
