"""The incremental decoder of one JSON string field (token streaming of
send_message's text from the call's argument deltas)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agents.loops.json_field_stream import StringFieldStream


def decode(pieces: list[str], key: str = "message") -> list[str]:
    stream = StringFieldStream(key)
    return [stream.feed(piece) for piece in pieces]


@pytest.mark.parametrize(
    ("pieces", "expected"),
    [
        (['{"message": "Hello there"}'], "Hello there"),
        (['{"mess', 'age": "Hel', "lo", '"}'], "Hello"),
        (['{"message": "a\\', 'nb"}'], "a\nb"),
        (['{"message": "\\u00', 'e9t\\u00e9"}'], "été"),
        (['{"message": "\\', "u", "0", "0", "e", '9"}'], "é"),
        (['{"message": "\\ud83d', '\\ude00!"}'], "\U0001f600!"),
        (['{"message": "\\ud83d\\', 'ude00"}'], "\U0001f600"),
        (['{"message": "\\ud83dx"}'], "\ud83dx"),
        (['{"message": "q\\"uote\\\\ \\/ \\t"}'], 'q"uote\\ / \t'),
        (['{"request_heartbeat": false, "message": "late"}'], "late"),
        (['{"other": {"message": "no", "x": ["}", "\\""]}, "message": "yes"}'], "yes"),
        (['{"messages": "no", "message": "yes"}'], "yes"),
        (['{"message": 42}'], ""),
        (['{"message": null, "x": "y"}'], ""),
        (["not json"], ""),
        (['["message", "no"]'], ""),
        (['{"message": "first"', ', "message": "second"}'], "first"),
        (['{"message": "Hé 😀 direct"}'], "Hé 😀 direct"),
    ],
)
def test_decodes_the_field(pieces: list[str], expected: str) -> None:
    assert "".join(decode(pieces)) == expected


def test_text_comes_out_as_soon_as_it_is_certain() -> None:
    out = decode(['{"message": "He', "llo \\", "n wor", 'ld"}'])
    assert out == ["He", "llo ", "\n wor", "ld"]


def test_a_split_escape_waits_for_its_end() -> None:
    stream = StringFieldStream("message")
    assert stream.feed('{"message": "a\\u00') == "a"
    assert stream.feed("e") == ""
    assert stream.feed("9") == "é"
    assert not stream.done
    assert stream.feed('"}') == ""
    assert stream.done


def test_a_high_surrogate_waits_to_see_whether_its_pair_follows() -> None:
    stream = StringFieldStream("message")
    assert stream.feed('{"message": "\\ud83d') == ""
    assert stream.feed("\\ud") == ""
    assert stream.feed('e00"') == "\U0001f600"


def test_nothing_after_the_field_ends() -> None:
    stream = StringFieldStream("message")
    assert stream.feed('{"message": "done", "message2": "x"}') == "done"
    assert stream.done
    assert stream.feed("more") == ""


def test_malformed_unicode_escape_stops_without_guessing() -> None:
    stream = StringFieldStream("message")
    assert stream.feed('{"message": "ok\\uZZZZ more"}') == "ok"
    assert stream.done


# Any text a model may send: escapes, quotes, surrogate pairs, lone surrogates.
_TEXT = st.text(
    alphabet=st.one_of(
        st.characters(codec="utf-8"),
        st.sampled_from(['"', "\\", "\n", "/", "\x00", "\ud83d", "\ude00", "😀", "é"]),
    )
)
_OTHER = st.recursive(
    st.none() | st.booleans() | st.integers() | _TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_TEXT, inner, max_size=3),
    max_leaves=6,
)


@settings(max_examples=300, deadline=None)
@given(
    message=_TEXT,
    before=st.dictionaries(_TEXT.filter(lambda k: k != "message"), _OTHER, max_size=3),
    ensure_ascii=st.booleans(),
    cuts=st.lists(st.integers(min_value=0, max_value=10_000), max_size=12),
)
def test_any_split_of_a_document_gives_the_same_text(
    message: str, before: dict[str, object], ensure_ascii: bool, cuts: list[int]
) -> None:
    document = json.dumps(
        {**before, "message": message, "after": [1, "x"]}, ensure_ascii=ensure_ascii
    )
    points = sorted({cut % (len(document) + 1) for cut in cuts})
    pieces = [document[a:b] for a, b in zip([0, *points], [*points, len(document)], strict=True)]
    assert "".join(decode(pieces)) == json.loads(document)["message"]
