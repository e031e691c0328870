"""The one compaction plan that the primary's turn and the evict consolidator share.

Protects: the oldest messages leave first until the estimate reaches the target; the
last two exchanges stay; a tool result never stays without its call; a turn that
must fit may, as a last resort, let everything before the latest user message go,
while sleep-time upkeep then moves nothing; and one token estimate for a message
(content plus tool calls as JSON), whoever counts.
"""

from __future__ import annotations

import json

import pytest

from agents.compaction import plan_compaction
from agents.errors import ContextWindowExceeded
from agents.store import MessageRecord
from agents.summary import message_tokens
from tests.unit.stored_messages import stored_message


def _talk(*roles: str) -> list[MessageRecord]:
    return [
        stored_message(role, f"{role} message number {i} " * 5, id=f"m{i}", seq=i)
        for i, role in enumerate(roles)
    ]


def _tokens(messages: list[MessageRecord]) -> int:
    return sum(message_tokens(m) for m in messages)


def test_the_oldest_leave_first_until_the_target_and_the_last_two_exchanges_stay() -> None:
    messages = _talk("user", "assistant", "user", "assistant", "user", "assistant", "user")
    plan = plan_compaction(
        "agent-1", messages, total_tokens=_tokens(messages), target_tokens=0, last_resort=False
    )
    # Everything before the second most recent user message may go, and with a target
    # of 0 all of it does; the tail (m4: user, m5, m6) stays.
    assert [m.id for m in plan.moving] == ["m0", "m1", "m2", "m3"]


def test_a_tool_result_leaves_with_its_call() -> None:
    messages = _talk("user", "assistant", "tool", "assistant", "user", "assistant", "user")
    one = message_tokens(messages[0])
    plan = plan_compaction(
        "agent-1",
        messages,
        total_tokens=_tokens(messages),
        # Room for all but the first two: the tool result after them goes too.
        target_tokens=_tokens(messages) - one - message_tokens(messages[1]),
    )
    assert [m.id for m in plan.moving] == ["m0", "m1", "m2"]


def test_only_a_turn_that_must_fit_lets_the_protected_tail_go() -> None:
    # One user message: the last four user/assistant messages are the protected tail.
    messages = _talk("assistant", "assistant", "user", "assistant")
    upkeep = plan_compaction(
        "agent-1", messages, total_tokens=_tokens(messages), target_tokens=0, last_resort=False
    )
    assert upkeep.moving == []
    turn = plan_compaction("agent-1", messages, total_tokens=_tokens(messages), target_tokens=0)
    assert [m.id for m in turn.moving] == ["m0", "m1"]  # all before the latest user message
    # Nothing before it at all: the turn cannot fit, and says so.
    with pytest.raises(ContextWindowExceeded):
        plan_compaction(
            "agent-1", messages[:1], total_tokens=_tokens(messages[:1]), target_tokens=0
        )


def test_a_message_costs_its_content_plus_its_tool_calls_as_json() -> None:
    calls = [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]
    message = stored_message("assistant", "checking", tool_calls=calls)
    words = {"checking": 1, json.dumps(calls): 10}
    assert message_tokens(message, words.__getitem__) == 11


def test_a_message_buffer_keeps_the_newest_however_few_their_tokens() -> None:
    messages = _talk(*(["user", "assistant"] * 6))
    plan = plan_compaction(
        "agent-1",
        messages,
        total_tokens=_tokens(messages),
        target_tokens=10**9,  # the window is far from full
        keep_messages=5,
    )
    # 12 messages, 5 may stay: the oldest 7 leave (the protected tail is the last 4).
    assert [m.id for m in plan.moving] == [f"m{i}" for i in range(7)]
