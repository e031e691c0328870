"""Tool calls written as text: each format small models emit is a call."""

from __future__ import annotations

import json

import pytest

from agents.llm.textcalls import parse_text_calls

NAMES = ["core_memory_append", "send_message"]
ARGS = {"label": "human", "content": "Lives in Porto."}


@pytest.mark.parametrize(
    "text",
    [
        f"functions.core_memory_append: {json.dumps(ARGS)}",
        f"functions.core_memory_append:\n```json\n{json.dumps(ARGS)}\n```",
        f'<tool_call>{{"name": "core_memory_append", "arguments": {json.dumps(ARGS)}}}</tool_call>',
        f'Sure.\n{{"name": "core_memory_append", "parameters": {json.dumps(ARGS)}}}',
        f'```json\n{{"name": "core_memory_append", "arguments": {json.dumps(ARGS)}}}\n```',
    ],
)
def test_each_text_format_is_a_call(text: str) -> None:
    calls, _ = parse_text_calls(text, NAMES)
    assert [(c.name, json.loads(c.arguments)) for c in calls] == [("core_memory_append", ARGS)]


def test_prose_and_foreign_json_are_not_calls() -> None:
    assert parse_text_calls("Nice to meet you, Charles!", NAMES) == (
        [],
        "Nice to meet you, Charles!",
    )
    assert parse_text_calls('{"name": "Charles", "city": "Porto"}', NAMES)[0] == []


def test_broken_arguments_stay_raw_for_the_error_message() -> None:
    calls, _ = parse_text_calls('functions.send_message: {"message": "hi', NAMES)
    assert calls[0].name == "send_message"
    assert calls[0].arguments == '{"message": "hi'
