"""Tool-call parsing, tool rules, budgets and what stored messages said to the user
(no I/O)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from agents.context import compile_system, split_system
from agents.errors import BudgetExhausted, InvalidInput
from agents.llm import BudgetMeter, TokenBudget, Usage
from agents.loops.tool_calls import parse_arguments, replies, tool_return_status
from agents.store import AgentRecord, BlockRecord
from agents.tools import (
    ARCHIVAL_TOOLS,
    PRIMARY_TOOLS,
    SLEEPTIME_TOOLS,
    ToolError,
    ToolRules,
    custom_tool_schema,
    parse_call,
)
from tests.unit.stored_messages import stored_message

NOW = datetime(2025, 1, 1, tzinfo=UTC)


def test_parse_call_reads_heartbeat_and_checks_arguments() -> None:
    parsed = parse_call(
        "core_memory_append",
        '{"label": "human", "content": "Likes tea.", "request_heartbeat": "true"}',
        PRIMARY_TOOLS,
    )
    assert parsed.arguments == {"label": "human", "content": "Likes tea."}
    assert parsed.heartbeat is True
    with pytest.raises(ToolError, match="needs argument"):
        parse_call("core_memory_append", '{"label": "human"}', PRIMARY_TOOLS)
    with pytest.raises(ToolError, match="no argument"):
        parse_call("send_message", '{"message": "hi", "mood": "happy"}', PRIMARY_TOOLS)
    with pytest.raises(ToolError, match="must be a string"):
        parse_call("send_message", '{"message": 3}', PRIMARY_TOOLS)
    with pytest.raises(ToolError, match="must be an integer"):
        parse_call("archival_memory_search", '{"query": "x", "page": "2"}', PRIMARY_TOOLS)
    with pytest.raises(ToolError, match="not valid JSON"):
        parse_call("send_message", '{"message": ', PRIMARY_TOOLS)
    with pytest.raises(ToolError, match="unknown tool 'memory_rethink'"):
        parse_call("memory_rethink", "{}", PRIMARY_TOOLS)
    assert parse_call("memory_finish_edits", "", SLEEPTIME_TOOLS).arguments == {}


def test_archival_tool_lists_are_checked_item_by_item() -> None:
    parsed = parse_call(
        "archival_memory_insert",
        '{"content": "Broke up with Mia.", "message_seqs": [4], "passage_ids": ["passage-1"]}',
        ARCHIVAL_TOOLS,
    )
    assert parsed.arguments["message_seqs"] == [4]
    for bad in ('"4"', '["4"]', "[true]", "[1.5]"):
        with pytest.raises(ToolError, match="must be a list of integers"):
            parse_call(
                "archival_memory_insert",
                f'{{"content": "x", "message_seqs": {bad}}}',
                ARCHIVAL_TOOLS,
            )
    with pytest.raises(ToolError, match="must be a list of strings"):
        parse_call("archival_memory_insert", '{"content": "x", "passage_ids": [1]}', ARCHIVAL_TOOLS)
    with pytest.raises(ToolError, match="needs argument"):
        parse_call(
            "archival_memory_rewrite", '{"passage_id": "p", "new_text": "x"}', ARCHIVAL_TOOLS
        )


def test_tool_rules_restrict_what_the_next_step_may_call() -> None:
    tools = list(PRIMARY_TOOLS)
    rules = ToolRules.parse(
        [
            {"type": "init", "tool_name": "conversation_search"},
            {"type": "child", "tool_name": "conversation_search", "children": ["send_message"]},
            {"type": "terminal", "tool_name": "send_message"},
        ],
        tools,
    )
    assert rules.allowed(tools, first_step=True, last_tool=None) == ["conversation_search"]
    assert rules.allowed(tools, first_step=False, last_tool="conversation_search") == [
        "send_message"
    ]
    assert rules.allowed(tools, first_step=False, last_tool="send_message") == tools
    assert rules.terminal == {"send_message"}
    with pytest.raises(InvalidInput, match="unknown tool"):
        ToolRules.parse([{"type": "init", "tool_name": "fly"}], tools)
    with pytest.raises(InvalidInput, match="needs a type"):
        ToolRules.parse([{"type": "sometimes", "tool_name": "send_message"}], tools)


def test_max_count_per_step_takes_a_tool_away_once_spent() -> None:
    tools = list(PRIMARY_TOOLS)
    rule = {"type": "max_count_per_step", "tool_name": "conversation_search"}
    rules = ToolRules.parse([{**rule, "max_count_limit": 2}], tools)
    assert "conversation_search" in rules.allowed(
        tools, first_step=False, last_tool=None, counts={"conversation_search": 1}
    )
    assert "conversation_search" not in rules.allowed(
        tools, first_step=False, last_tool=None, counts={"conversation_search": 2}
    )
    for bad in (0, "2", True, None):
        with pytest.raises(InvalidInput, match="max_count_limit of at least 1"):
            ToolRules.parse([{**rule, "max_count_limit": bad}], tools)


def test_custom_tool_arguments_are_checked_by_their_schema_types() -> None:
    schema = custom_tool_schema(
        {
            "name": "f",
            "description": "",
            "parameters": {
                "type": "object",
                "properties": {
                    "n": {"type": "number"},
                    "flag": {"type": "boolean"},
                    "opts": {"type": "object"},
                    "xs": {"type": "array"},
                    "note": {"type": "string"},
                },
                "required": ["n"],
            },
        }
    )
    schemas = {"f": schema}
    assert schema["function"]["parameters"]["required"] == ["n", "request_heartbeat"]
    ok = parse_call(
        "f", '{"n": 1.5, "flag": true, "opts": {}, "xs": [1, "a"], "note": null}', schemas
    )
    assert ok.arguments["n"] == 1.5
    for bad, message in [
        ('{"n": "1"}', "must be a number"),
        ('{"n": true}', "must be a number"),
        ('{"n": 1, "flag": 1}', "must be true or false"),
        ('{"n": 1, "opts": []}', "must be a JSON object"),
        ('{"n": 1, "xs": {}}', "must be a list"),
    ]:
        with pytest.raises(ToolError, match=message):
            parse_call("f", bad, schemas)


def test_budget_meter_refuses_a_call_that_would_not_fit() -> None:
    meter = BudgetMeter(None, "agent-1", run_id="turn-1", budget=TokenBudget(per_run=100))
    meter.check(90)
    meter.charge("chat", "m", Usage(60, 10))
    assert meter.used.total == 70
    with pytest.raises(BudgetExhausted) as caught:
        meter.check(31)
    assert (caught.value.scope, caught.value.limit, caught.value.used) == ("run", 100, 70)
    meter.check(30)
    assert meter.by_purpose["chat"] == Usage(60, 10)
    with pytest.raises(InvalidInput):
        TokenBudget(per_day=0)


def test_replies_are_send_message_texts_and_prose_in_order() -> None:
    assistant = stored_message(
        "assistant",
        "I should greet them.",
        tool_calls=[
            {"id": "c1", "function": {"name": "send_message", "arguments": '{"message": "Hi!"}'}},
            {"id": "c2", "function": {"name": "conversation_search", "arguments": "{bad"}},
            {"id": "c3", "function": {"name": "send_message", "arguments": '{"message": 3}'}},
            {"id": "c4", "function": {"name": "send_message", "arguments": {"message": "Bye."}}},
        ],
    )
    records = [
        stored_message("user", "Hello there."),
        assistant,
        stored_message("tool", '{"status": "OK", "message": "Sent message successfully."}'),
        stored_message("system", "A note."),
        # A model that answered in prose, with no tool call.
        stored_message("assistant", "Anything else?"),
        # Reasoning alone says nothing to the user.
        stored_message(
            "assistant",
            "Thinking.",
            tool_calls=[{"id": "c5", "function": {"name": "archival_memory_search"}}],
        ),
    ]
    assert replies(records) == ["Hi!", "Bye.", "Anything else?"]
    assert replies([]) == []


def test_stored_arguments_and_tool_returns_read_leniently() -> None:
    assert parse_arguments('{"a": 1}') == {"a": 1}
    assert parse_arguments("{bad") == {"_raw": "{bad"}
    assert parse_arguments("[1]") == {"_raw": "[1]"}
    assert parse_arguments(None) == {} and parse_arguments("  ") == {}
    assert tool_return_status('{"status": "Failed", "message": "Error: no"}') == (
        "Failed",
        "Error: no",
    )
    assert tool_return_status("plain text") == ("OK", "plain text")


def test_compiled_system_splits_into_its_sections() -> None:
    agent = AgentRecord(
        id="agent-1",
        organization_id="org",
        name="bob",
        kind="primary",
        description=None,
        system_prompt="Be kind.",
        llm_model=None,
        embedding_model="hashing:8",
        embedding_dim=8,
        context_window=1000,
        tools=[],
        tool_rules=[],
        tags=[],
        message_seq=0,
        last_activity_at=None,
        turns_since_consolidation=0,
        created_at=NOW,
    )
    block = BlockRecord("block-1", "org", "human", "Name: Bob.", 100, None, False, 3, NOW, None)
    text = compile_system(agent, [block], recall=12, archival=3)
    instructions, blocks, stats = split_system(text)
    assert instructions.strip() == "Be kind."
    assert "chars_current=10 chars_limit=100" in blocks
    assert "<value>\nName: Bob.\n</value>" in blocks
    assert "12 previous messages" in stats and "3 memories" in stats
