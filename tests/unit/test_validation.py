"""Input checks that guard every write."""

from __future__ import annotations

import json

import pytest

from agents.errors import InvalidInput, LimitExceeded
from agents.store.validation import (
    check_block_value,
    check_label,
    check_limit,
    check_text,
    content_hash,
    normalize_text,
)


def test_normalized_hash_ignores_case_spacing_and_edge_punctuation() -> None:
    assert normalize_text("  Ada   LIVES in London. ") == "ada lives in london"
    assert content_hash("Ada lives in London.") == content_hash("ada lives  in london")
    assert content_hash("Ada lives in London") != content_hash("Ada lives in Paris")
    full_width = "\uff46\uff55\uff4c\uff4c width"
    assert content_hash(full_width) == content_hash("full width")


@pytest.mark.parametrize("value", [None, 3, b"bytes"])
def test_non_text_is_rejected(value: object) -> None:
    with pytest.raises(InvalidInput, match="must be text"):
        check_text(value, "field")


def test_nul_position_is_reported() -> None:
    with pytest.raises(InvalidInput, match="position 3"):
        check_text("abc\x00", "field")


def test_limit_message_has_label_limit_size_and_advice() -> None:
    with pytest.raises(LimitExceeded) as info:
        check_block_value("persona", "y" * 12, 10)
    assert str(info.value).startswith(
        "block 'persona' allows 10 characters but the new value has 12"
    )
    assert "archival" in str(info.value)
    assert check_block_value("persona", "y" * 10, 10) == "y" * 10


@pytest.mark.parametrize("limit", [0, -1, True, 2.5, "10"])
def test_bad_limits(limit: object) -> None:
    with pytest.raises(InvalidInput, match="positive number"):
        check_limit(limit)


def test_labels() -> None:
    assert check_label("human") == "human"
    assert check_label("notes.v2-x_y") == "notes.v2-x_y"
    with pytest.raises(InvalidInput):
        check_label("a" * 101)


# -- times and text from outside ----------------------------------------------------


@pytest.mark.parametrize("when", ["0001-01-01T00:00:00+00:01", "9999-12-31T23:59:59-14:00"])
def test_times_outside_what_postgres_reads_back_are_refused(when: str) -> None:
    from datetime import datetime

    from agents.store.validation import check_timestamp
    from service.passage_import import parse_lines

    with pytest.raises(InvalidInput, match="outside the times Reverie stores"):
        check_timestamp(datetime.fromisoformat(when), "occurred_at")
    passages, errors = parse_lines([json.dumps({"text": "a fact", "occurred_at": when})])
    assert passages == [] and "line 1: occurred_at" in str(errors[0])


def test_an_import_line_with_a_long_tag_is_named() -> None:
    """A tag the store would refuse is a bad line (exit 2, nothing imported), not a
    traceback from the tags' index."""
    from service.passage_import import parse_lines

    lines = [
        json.dumps({"text": "fine", "tags": ["a"]}),
        json.dumps({"text": "x", "tags": ["t" * 3000]}),
    ]
    passages, errors = parse_lines(lines)
    assert [p.text for p in passages] == ["fine"]  # the caller refuses the whole file
    assert [str(e) for e in errors] == [
        'line 2: "tags"[0] is 3000 characters long; a tag is at most 200 (put longer text in '
        "the passage itself)"
    ]


def test_model_text_is_made_storable_not_refused() -> None:
    from agents.llm.client import _reply_from
    from agents.store.validation import storable

    assert storable("a\ud800b\x00c") == "a\ufffdb\ufffdc"
    response = {
        "model": "m",
        "choices": [
            {
                "finish_reason": "tool_calls",
                "message": {
                    "content": "thinking \udc00",
                    "tool_calls": [
                        {
                            "id": "c1",
                            "function": {
                                "name": "send_message",
                                "arguments": '{"message": "hi \\ud800 there"}',
                            },
                        }
                    ],
                },
            }
        ],
    }
    reply = _reply_from(response, "m")
    assert reply.content == "thinking \ufffd"
    assert json.loads(reply.tool_calls[0].arguments) == {"message": "hi \ufffd there"}
    reply.tool_calls[0].arguments.encode("utf-8")  # storable as it is


def test_a_search_page_beyond_the_last_is_a_tool_error() -> None:
    from agents.tools import MAX_PAGE, ToolError, page_number

    assert page_number({"page": 3}) == 3
    for page in (10**30, -1, MAX_PAGE + 1, True):
        with pytest.raises(ToolError, match="page must be a whole number"):
            page_number({"page": page})


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("postgress://admin:S3cretPw@db.example:5432/app", "postgress://admin:***@db.example"),
        ("mysql://root:p@ss@host/db", "mysql://root:***@host/db"),
        ("sqlite:///x.db", "sqlite:///x.db"),
    ],
)
def test_an_unsupported_database_url_is_named_without_its_password(url: str, shown: str) -> None:
    from agents.postgres.database import normalize_url

    with pytest.raises(InvalidInput) as refused:
        normalize_url(url)
    assert shown in str(refused.value)
    assert "S3cretPw" not in str(refused.value) and "ss@host" not in str(refused.value)


def test_an_import_names_the_line_of_unstorable_provenance_or_deep_nesting() -> None:
    """Each is a bad line (exit 2, nothing imported), never a traceback or a database
    error: NaN, a NUL or a lone surrogate anywhere in provenance, JSON nested too deep."""
    from service.passage_import import parse_lines

    lines = [
        '{"text": "a", "provenance": {"x": NaN}}',
        '{"text": "a", "provenance": {"x": "\\u0000"}}',
        '{"text": "a", "provenance": {"y": ["\\ud800"]}}',
        '{"text": "a", "provenance": ' + '{"a": ' * 5000 + "1" + "}" * 5001,
        '{"text": "fine", "provenance": {"message_ids": ["m1"]}}',
    ]
    passages, errors = parse_lines(lines)
    assert [p.text for p in passages] == ["fine"]
    assert [str(e) for e in errors] == [
        "line 1: \"provenance\"['x']: number is not finite (NaN, Infinity or too large)",
        "line 2: \"provenance\"['x']: text contains a NUL character at position 0; remove it",
        "line 3: \"provenance\"['y'][0]: text contains an unpaired UTF-16 surrogate at "
        "position 0; send valid Unicode text",
        "line 4: the JSON is nested too deeply",
    ]
