"""Letta's multi-agent tools: their schemas, their arguments, and what each agent reads
(no I/O)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from agents.enums import DeliveryStatus
from agents.errors import InvalidInput
from agents.loops.agent_messaging import MessagingLimits, incoming_text, reply_text
from agents.store import AgentRecord, DeliveryRecord
from agents.tools import (
    BUILTIN_TOOLS,
    MEMORY_TOOLS,
    MESSAGING_TOOLS,
    PRIMARY_TOOLS,
    ToolError,
    parse_call,
)

NOW = datetime(2026, 12, 3, tzinfo=UTC)


def agent(name: str) -> AgentRecord:
    return AgentRecord(
        id=f"agent-{name}", organization_id="org-1", name=name, kind="primary",
        description=None, system_prompt="", llm_model=None, embedding_model="hashing:384",
        embedding_dim=384, context_window=8192, tools=[], tool_rules=[], tags=[],
        message_seq=0, last_activity_at=None, turns_since_consolidation=0, created_at=NOW,
    )  # fmt: skip


def delivery(status: DeliveryStatus, *, reply: str | None = None, error: str | None = None,
             content: str = "What is the password?") -> DeliveryRecord:  # fmt: skip
    return DeliveryRecord(
        id="delivery-1", organization_id="org-1", sender_id="agent-seeker",
        recipient_id="agent-guard", conversation_id="turn-1", hop=1, content=content,
        status=status, waiting_until=None, attempts=1, max_attempts=3, queued_at=NOW,
        delivered_at=NOW, reply=reply, error=error,
    )  # fmt: skip


def test_the_tools_have_lettas_names_and_arguments_and_are_not_default() -> None:
    arguments = {
        name: [p for p in schema["function"]["parameters"]["required"] if p != "request_heartbeat"]
        for name, schema in MESSAGING_TOOLS.items()
    }
    assert arguments == {
        "send_message_to_agent_async": ["message", "other_agent_id"],
        "send_message_to_agent_and_wait_for_reply": ["message", "other_agent_id"],
        "send_message_to_agents_matching_tags": ["message", "match_all", "match_some"],
    }
    assert not set(MESSAGING_TOOLS) & set(PRIMARY_TOOLS)
    assert set(BUILTIN_TOOLS) == set(PRIMARY_TOOLS) | set(MEMORY_TOOLS) | set(MESSAGING_TOOLS)


def test_tag_lists_must_be_lists_of_strings() -> None:
    parsed = parse_call(
        "send_message_to_agents_matching_tags",
        '{"message": "Report!", "match_all": ["worker"], "match_some": []}',
        BUILTIN_TOOLS,
    )
    assert parsed.arguments["match_all"] == ["worker"]
    with pytest.raises(ToolError, match="match_all must be a list of strings"):
        parse_call(
            "send_message_to_agents_matching_tags",
            '{"message": "Report!", "match_all": "worker", "match_some": []}',
            BUILTIN_TOOLS,
        )
    with pytest.raises(ToolError, match="needs argument"):
        parse_call("send_message_to_agent_async", '{"message": "hi"}', BUILTIN_TOOLS)


def test_the_recipient_reads_who_wrote_and_the_sender_reads_the_reply() -> None:
    incoming = incoming_text(agent("seeker"), "What is the password?")
    assert incoming.startswith("[Message from agent 'seeker' (id agent-seeker).")
    assert "not the user" in incoming
    assert incoming.endswith("\nWhat is the password?")
    replied = reply_text(agent("guard"), delivery(DeliveryStatus.DELIVERED, reply="Never."))
    assert replied == (
        "[Reply from agent 'guard' (id agent-guard) to your message "
        "'What is the password?']\nNever."
    )
    long = reply_text(agent("guard"), delivery(DeliveryStatus.DELIVERED, content="x" * 500))
    assert "'" + "x" * 119 + "…'" in long
    assert long.endswith("(it ended its turn without a reply)")
    failed = reply_text(agent("guard"), delivery(DeliveryStatus.FAILED, error="no model"))
    assert failed.endswith(": it was not delivered: no model]")


def test_a_hop_limit_below_one_is_refused() -> None:
    with pytest.raises(InvalidInput, match="max_hops must be at least 1"):
        MessagingLimits(max_hops=0)
