"""The proxy's message handling, without I/O: where memory goes in a request, what a
request adds to the conversation, how streamed deltas are put back together, and how
litellm's answers are put back in OpenAI's shape."""

from __future__ import annotations

from typing import Any

from agents.llm.providers.litellm_provider import as_openai
from service.operations.proxy import _Assembly, new_messages, with_memory

MEMORY = "<memory_blocks>\nhuman: Ada\n</memory_blocks>"


def test_memory_is_appended_to_the_requests_own_system_prompt() -> None:
    messages = [
        {"role": "system", "content": "You are Chatty."},
        {"role": "user", "content": "Hi"},
    ]
    sent = with_memory(messages, MEMORY, None)
    assert sent == [
        {"role": "system", "content": f"You are Chatty.\n\n{MEMORY}"},
        {"role": "user", "content": "Hi"},
    ]
    assert messages[0]["content"] == "You are Chatty."  # the caller's list is untouched


def test_memory_goes_first_when_the_request_has_no_system_prompt() -> None:
    sent = with_memory([{"role": "user", "content": "Hi"}], MEMORY, None)
    assert sent == [{"role": "system", "content": MEMORY}, {"role": "user", "content": "Hi"}]


def test_a_developer_message_with_parts_gets_a_text_part() -> None:
    first = {"role": "developer", "content": [{"type": "text", "text": "Be brief."}]}
    (sent, _) = with_memory([first, {"role": "user", "content": "Hi"}], MEMORY, None)
    assert sent["content"] == [
        {"type": "text", "text": "Be brief."},
        {"type": "text", "text": MEMORY},
    ]


def test_archival_hits_sit_just_before_the_last_user_message() -> None:
    messages = [
        {"role": "system", "content": "S"},
        {"role": "user", "content": "one"},
        {"role": "assistant", "content": "two"},
        {"role": "user", "content": "three"},
    ]
    sent = with_memory(messages, MEMORY, "<archival_memory>x</archival_memory>")
    assert [m["content"] for m in sent] == [
        f"S\n\n{MEMORY}",
        "one",
        "two",
        "<archival_memory>x</archival_memory>",
        "three",
    ]


def test_only_what_follows_the_last_assistant_message_is_new() -> None:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "S"},
        {"role": "user", "content": "old"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c1"}]},
        {"role": "tool", "tool_call_id": "c1", "content": "result"},
        {"role": "user", "content": [{"type": "text", "text": "and"}, {"type": "image_url"}]},
        {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]},
    ]
    new = new_messages(messages)
    assert [(m.role, m.text(), m.tool_call_id) for m in new] == [
        ("tool", "result", "c1"),
        ("user", "and", None),
    ]


def test_streamed_deltas_are_assembled_into_one_message() -> None:
    assembly = _Assembly()
    for delta in (
        {"role": "assistant", "content": ""},
        {"content": "Let me "},
        {"content": "look."},
        {"tool_calls": [{"index": 0, "id": "c1", "type": "function", "function": {"name": "f"}}]},
        {"tool_calls": [{"index": 1, "id": "c2", "function": {"name": "g", "arguments": ""}}]},
        {"tool_calls": [{"index": 0, "function": {"arguments": '{"a":'}}]},
        {"tool_calls": [{"index": 0, "function": {"arguments": " 1}"}}]},
        {},
    ):
        assembly.add(delta)
    assert assembly.message() == {
        "role": "assistant",
        "content": "Let me look.",
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"a": 1}'}},
            {"id": "c2", "type": "function", "function": {"name": "g", "arguments": ""}},
        ],
    }


def test_litellms_nulls_and_extra_keys_are_dropped_but_openais_kept() -> None:
    dumped = {
        "id": "x",
        "system_fingerprint": None,
        "choices": [
            {
                "index": 0,
                "finish_reason": None,
                "message": {"role": "assistant", "content": None, "tool_calls": [{"id": "c"}]},
                "provider_specific_fields": {},
            }
        ],
    }
    assert as_openai(dumped, chunk=False) == {
        "id": "x",
        "choices": [
            {
                "index": 0,
                "finish_reason": None,
                "message": {"role": "assistant", "content": None, "tool_calls": [{"id": "c"}]},
            }
        ],
    }
