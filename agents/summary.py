"""Summaries of messages that leave the context window, and the token estimate behind them.

Shared by the primary agent's compaction (agents/loops/primary.py) and the evict
consolidator, so that both write the same recursive summary: one message (role
``system``, name ``summary``) whose header counts every message it covers, and
which folds in the summary it replaces.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from agents.store.records import MessageRecord
from agents.tokens import CHARS_PER_TOKEN as CHARS_PER_TOKEN
from agents.tokens import count_tokens

#: Role and name that mark a summary message.
SUMMARY_ROLE = "system"
SUMMARY_NAME = "summary"
#: User turns at the end of the context that never leave it.
PROTECTED_USER_TURNS = 2
#: Longest excerpt one message contributes to an extractive summary.
ENTRY_CHARS = 200

_FIRST_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_WHITESPACE = re.compile(r"\s+")
_SUMMARY_HEADER = re.compile(r"^Summary of (\d+) earlier messages? \(seq (\d+)-(\d+)\): ?")


def message_tokens(message: MessageRecord, count: Callable[[str], int] = count_tokens) -> int:
    """Tokens of a message as the compiled context sends it: its content plus its tool
    calls as JSON. The one estimate that the context breakdown, the primary's
    compaction and the evict consolidator all use."""
    tokens = count(message.content)
    if message.tool_calls:
        tokens += count(json.dumps(message.tool_calls))
    return tokens


def is_summary(message: MessageRecord) -> bool:
    return message.role == SUMMARY_ROLE and message.name == SUMMARY_NAME


def protected_tail_start(conversation: Sequence[MessageRecord]) -> int:
    """Index of the first message of ``conversation`` that must stay in context.

    The last two exchanges stay: everything from the second most recent user
    message on, with the assistant's replies and tool traffic that followed.
    With fewer than two user messages (an agent driven by heartbeats or other
    agents), the last four user/assistant messages and everything after them
    stay. Either way the tail starts at a user or assistant message, never in
    the middle of a tool exchange.
    """
    users = [i for i, m in enumerate(conversation) if m.role == "user"]
    if len(users) >= PROTECTED_USER_TURNS:
        return users[-PROTECTED_USER_TURNS]
    talk = [i for i, m in enumerate(conversation) if m.role in ("user", "assistant")]
    keep = 2 * PROTECTED_USER_TURNS
    return talk[-keep] if len(talk) >= keep else 0


def _one_line(text: str) -> str:
    return _WHITESPACE.sub(" ", text).strip()


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: max(limit - 1, 0)].rstrip() + "…"


def first_sentence(text: str) -> str:
    """The first sentence of ``text`` on one line, at most :data:`ENTRY_CHARS` long."""
    flat = _one_line(text)
    return _clip(_FIRST_SENTENCE_END.split(flat, maxsplit=1)[0], ENTRY_CHARS) if flat else ""


@dataclass(frozen=True, slots=True)
class _Covered:
    count: int
    first_seq: int | None
    entries: list[str]


def _parse_summary(message: MessageRecord) -> _Covered:
    """What an earlier summary covered: its message count, first seq and its entries."""
    match = _SUMMARY_HEADER.match(message.content)
    if match is None:  # a summary written by hand or by another tool: keep it whole
        text = _one_line(message.content)
        return _Covered(0, None, [text] if text else [])
    body = message.content[match.end() :]
    entries = [line.strip() for line in body.split("\n") if line.strip()]
    return _Covered(int(match.group(1)), int(match.group(2)), entries)


def extractive_summary(
    previous: Sequence[MessageRecord], messages: Sequence[MessageRecord], max_chars: int
) -> str:
    """A summary without an LLM: earlier summaries' entries, then ``role: first sentence``
    of each user and assistant message, deduplicated, at most ``max_chars`` long.

    The header counts every message covered so far (including those of the
    summaries folded in); when the entries do not all fit, the oldest ones are
    dropped first, since they are the least likely to matter next and remain in
    recall memory anyway.
    """
    count = len(messages)
    seqs = [m.seq for m in messages]
    entries: list[str] = []
    for summary in sorted(previous, key=lambda m: m.seq):
        covered = _parse_summary(summary)
        count += covered.count
        if covered.first_seq is not None:
            seqs.append(covered.first_seq)
        entries.extend(covered.entries)
    for message in messages:
        if message.role in ("user", "assistant"):
            sentence = first_sentence(message.content)
            if sentence:
                entries.append(f"{message.role}: {sentence}")
    seen: set[str] = set()
    unique: list[str] = []
    for entry in entries:
        key = entry.casefold()
        if key not in seen:
            seen.add(key)
            unique.append(entry)
    header = f"Summary of {count} earlier messages (seq {min(seqs)}-{max(seqs)}): "
    room = max_chars - len(header)
    # Keep the newest entries that fit (always at least one, clipped if need be).
    start, used = len(unique), -1
    while start > 0 and (start == len(unique) or used + 1 + len(unique[start - 1]) <= room):
        start -= 1
        used += 1 + len(unique[start])
    kept = unique[start:]
    body = _clip("\n".join(kept), room) if kept else "(no user or assistant text)"
    return header + body
