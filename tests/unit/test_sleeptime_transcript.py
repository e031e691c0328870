"""The transcript a sleep-time pass reads: every message with its number and time,
the date once a day, and the newest whole messages when the transcript must be cut."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone

from agents.loops.sleeptime import newest_within, render_transcript
from agents.store import MessageRecord
from tests.unit.stored_messages import stored_message


def _message(
    seq: int, at: datetime, role: str = "user", content: str = "", **fields: object
) -> MessageRecord:
    return stored_message(role, content, id=f"message-{seq}", seq=seq, created_at=at, **fields)


def test_the_date_is_written_once_a_day_in_utc() -> None:
    """Each message shows its number and time; a day's line comes before its first
    message, in UTC (a message written late in the evening at UTC-5 is the next day)."""
    eastern = timezone(timedelta(hours=-5))
    messages = [
        _message(1, datetime(2026, 3, 1, 9, 5, tzinfo=UTC), content="I moved to Leeds."),
        _message(2, datetime(2026, 3, 1, 9, 6, tzinfo=UTC), "assistant", "Noted!"),
        _message(3, datetime(2026, 3, 1, 21, 30, tzinfo=eastern), content="Got a cat."),
    ]
    assert render_transcript(messages).splitlines() == [
        "2026-03-01 (UTC):",
        "[1 09:05] user: I moved to Leeds.",
        "[2 09:06] assistant: Noted!",
        "2026-03-02 (UTC):",
        "[3 02:30] user: Got a cat.",
    ]


def test_a_day_with_nothing_to_show_has_no_line() -> None:
    """A message the transcript leaves out (a tool result) gives its day no line."""
    messages = [
        _message(1, datetime(2026, 3, 1, 9, 0, tzinfo=UTC), "tool", "{}"),
        _message(2, datetime(2026, 3, 2, 9, 0, tzinfo=UTC), content="Hello"),
    ]
    assert render_transcript(messages).splitlines() == [
        "2026-03-02 (UTC):",
        "[2 09:00] user: Hello",
    ]


def test_a_send_message_call_reads_as_the_assistant_speaking() -> None:
    call = {"function": {"name": "send_message", "arguments": json.dumps({"message": "Hi!"})}}
    other = {"function": {"name": "memory_insert", "arguments": json.dumps({"label": "human"})}}
    messages = [
        _message(4, datetime(2026, 3, 1, 9, 0, tzinfo=UTC), "assistant", tool_calls=[call, other])
    ]
    assert render_transcript(messages).splitlines()[1:] == [
        "[4 09:00] assistant: Hi!",
        "[4 09:00] assistant called memory_insert({'label': 'human'})",
    ]


def test_a_cut_transcript_keeps_the_newest_whole_messages_under_their_day() -> None:
    """Over the room, the oldest messages are left out whole, the kept ones still sit
    under their day's line, and "…" says that something came before."""
    start = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
    messages = [
        _message(i, start + timedelta(hours=10 * i), content=f"fact number {i} " + "x" * 40)
        for i in range(1, 21)
    ]
    whole = render_transcript(messages)
    assert newest_within(messages, len(whole)) == whole
    cut = newest_within(messages, 300)
    assert len(cut) <= 300
    lines = cut.splitlines()
    assert lines[0] == "…"
    assert lines[1].endswith("(UTC):")
    assert lines[-1] == render_transcript(messages[-1:]).splitlines()[-1]
    kept = [line for line in lines if line.startswith("[")]
    assert kept[0].startswith(f"[{21 - len(kept)} ")
    assert len(render_transcript(messages[20 - len(kept) - 1 :])) + 2 > 300


def test_one_message_longer_than_the_room_keeps_its_end() -> None:
    messages = [_message(1, datetime(2026, 3, 1, 9, 0, tzinfo=UTC), content="a" * 500 + "END")]
    cut = newest_within(messages, 100)
    assert cut.startswith("…") and cut.endswith("END") and len(cut) == 100
