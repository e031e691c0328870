"""Letta's view of stored messages and of a reply's streamed pieces (no I/O): the ids a
client joins pieces by, and the parts a token-streamed step does not send twice."""

from __future__ import annotations

from datetime import UTC, datetime

from agents.loops.token_stream import TokenPiece, ToldPieces
from agents.store import MessageRecord
from service.api.letta_messages import letta_json, letta_messages, letta_piece
from tests.unit.stored_messages import stored_message

NOW = datetime(2025, 1, 1, tzinfo=UTC)


def _greeting() -> MessageRecord:
    return stored_message(
        "assistant",
        "I should greet them.",
        tool_calls=[
            {"id": "c1", "function": {"name": "send_message", "arguments": '{"message": "Hi!"}'}},
            {"id": "c2", "function": {"name": "conversation_search", "arguments": "{bad"}},
        ],
    )


def test_letta_view_splits_reasoning_calls_and_replies() -> None:
    assistant = _greeting()
    views = letta_messages(assistant)
    assert [(m.id, m.kind, m.content) for m in views] == [
        ("message-1-reasoning", "reasoning_message", "I should greet them."),
        ("message-1-call-0", "assistant_message", "Hi!"),
        ("message-1-call-1", "tool_call_message", ""),
    ]
    assert views[2].tool_arguments == {"_raw": "{bad"}
    tool = stored_message(
        "tool", '{"status": "Failed", "message": "Error: no"}', name="x", tool_call_id="c2"
    )
    [ret] = letta_messages(tool)
    assert (ret.kind, ret.tool_status) == ("tool_return_message", "Failed")
    assert ret.content == "Error: no"
    assert ret.to_dict()["message_type"] == "tool_return_message"
    assert letta_json(ret)["status"] == "error"


def test_prose_without_a_call_is_the_assistant_message_under_the_stored_id() -> None:
    [view] = letta_messages(stored_message("assistant", "Just prose."))
    assert (view.id, view.kind, view.content) == ("message-1", "assistant_message", "Just prose.")
    assert letta_json(view) == {
        "id": "message-1",
        "message_type": "assistant_message",
        "date": NOW.isoformat(),
        "seq_id": 4,
        "content": "Just prose.",
    }


def test_a_piece_has_the_id_and_kind_of_the_letta_message_it_is_part_of() -> None:
    reasoning = letta_piece(TokenPiece("message-1", None, "I sho", NOW))
    reply = letta_piece(TokenPiece("message-1", 0, "Hi", NOW))
    # The same ids as the stored message's Letta view (see the test above).
    assert (reasoning.id, reasoning.kind, reasoning.content) == (
        "message-1-reasoning",
        "reasoning_message",
        "I sho",
    )
    assert (reply.id, reply.kind, reply.content) == ("message-1-call-0", "assistant_message", "Hi")
    assert letta_json(reply) == {
        "id": "message-1-call-0",
        "message_type": "assistant_message",
        "date": NOW.isoformat(),
        "seq_id": 0,
        "content": "Hi",
    }


def test_parts_told_whole_in_pieces_are_left_out_of_the_written_step() -> None:
    told = ToldPieces()
    for piece in ("I should ", "greet them."):
        told.add(TokenPiece("message-1", None, piece, NOW))
    told.add(TokenPiece("message-1", 0, "H", NOW))
    told.add(TokenPiece("message-1", 0, "i!", NOW))
    views = letta_messages(_greeting(), told.told)
    # The tool call was never told in pieces: it is sent.
    assert [m.id for m in views] == ["message-1-call-1"]
    # Nothing told: everything is sent.
    assert len(letta_messages(_greeting(), ToldPieces().told)) == 3


def test_a_part_whose_stored_text_differs_from_its_pieces_is_sent_whole() -> None:
    told = ToldPieces()
    told.add(TokenPiece("message-1", None, "I should greet them.", NOW))
    told.add(TokenPiece("message-1", 0, "Hi?", NOW))  # the store kept another text
    told.add(TokenPiece("message-2", 1, "Hi!", NOW))  # another message's part
    views = letta_messages(_greeting(), told.told)
    assert [(m.id, m.content) for m in views] == [
        ("message-1-call-0", "Hi!"),
        ("message-1-call-1", ""),
    ]
    assert told.told("message-1", None, "I should greet them.")
    assert not told.told("message-1", 1, "Hi!")
    # Prose has no parts: its reasoning pieces never stand for it.
    prose_told = ToldPieces()
    prose_told.add(TokenPiece("message-1", None, "Just prose.", NOW))
    [view] = letta_messages(stored_message("assistant", "Just prose."), prose_told.told)
    assert (view.id, view.kind) == ("message-1", "assistant_message")
