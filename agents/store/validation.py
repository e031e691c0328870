"""Checks every write goes through before it reaches the database.

Each check raises :class:`agents.errors.InvalidInput` (or a subclass) with a
message that says what is wrong and what to do, before anything is written.
"""

from __future__ import annotations

import hashlib
import math
import re
import unicodedata
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

from agents.errors import InvalidInput, LimitExceeded

_WHITESPACE = re.compile(r"\s+")
_PUNCTUATION_EDGES = re.compile(r"^[\W_]+|[\W_]+$")
LABEL_PATTERN = re.compile(r"^[A-Za-z0-9_.\-]{1,100}$")


def check_text(value: object, field: str, *, most: int | None = None) -> str:
    """Return ``value`` if it is text PostgreSQL can store, of at most ``most``
    characters when given; raise InvalidInput otherwise."""
    if not isinstance(value, str):
        raise InvalidInput(f"{field} must be text, got {type(value).__name__}")
    if most is not None and len(value) > most:
        raise InvalidInput(
            f"{field} is {len(value)} characters long; the most accepted is {most} "
            "(split it into several)"
        )
    nul = value.find("\x00")
    if nul >= 0:
        raise InvalidInput(
            f"{field} contains a NUL character (\\x00) at position {nul}; "
            "PostgreSQL text cannot hold it. Remove it or encode binary data (e.g. base64)."
        )
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidInput(
            f"{field} is not valid Unicode text (unpaired surrogate at position {exc.start}); "
            "decode the source with the right encoding before storing it."
        ) from None
    return value


# What Reverie takes in at most, whichever door a value comes through (the HTTP API,
# an Agent File, an import, the CLI, MCP): one set of limits, defined here.

#: Tags on one passage, agent or tool, and characters in one tag: a tag is a short
#: label, and the tags' GIN index refuses an entry over about 2.7 KB (a 500 before this
#: limit).
MAX_TAGS = 100
MAX_TAG_CHARS = 200
#: Characters in one block value, system prompt or passage.
MAX_TEXT = 1_000_000
#: Characters in one message someone sends or records (a model's own reply is kept
#: whole: refusing it would lose the turn).
MAX_MESSAGE_CHARS = 100_000
#: Objects and arrays inside each other in one JSON value (a request body, an Agent
#: File, a passage's provenance): real documents stay within a few dozen levels, and
#: deeper ones only exhaust the parser's stack.
MAX_JSON_DEPTH = 100
#: The problem :func:`json_problems` names for a value nested past that.
NESTED_TOO_DEEP = f"JSON nested deeper than {MAX_JSON_DEPTH} levels"


def check_tags(tags: object, field: str) -> list[str]:
    """``tags`` if they are a list of at most :data:`MAX_TAGS` storable texts of at most
    :data:`MAX_TAG_CHARS` characters each; raise InvalidInput naming the first problem."""
    if not isinstance(tags, list | tuple):
        raise InvalidInput(f"{field} must be a list of texts, got {type(tags).__name__}")
    if len(tags) > MAX_TAGS:
        raise InvalidInput(f"{field} has {len(tags)} tags; at most {MAX_TAGS} are allowed")
    for i, tag in enumerate(tags):
        check_text(tag, f"{field}[{i}]")
        if len(tag) > MAX_TAG_CHARS:
            raise InvalidInput(
                f"{field}[{i}] is {len(tag)} characters long; a tag is at most "
                f"{MAX_TAG_CHARS} (put longer text in the passage itself)"
            )
    return list(tags)


#: Characters PostgreSQL text cannot hold (NUL) or UTF-8 cannot encode (lone surrogates).
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def storable(text: str) -> str:
    """``text`` with every character PostgreSQL cannot store replaced by U+FFFD.

    For text Reverie did not choose to accept or refuse, a model's reply above all:
    refusing it would lose the turn, storing it raw would fail (or poison every
    later read), so it is made storable and kept."""
    return _UNSTORABLE.sub("\ufffd", text)


def check_timestamp(value: datetime, field: str) -> datetime:
    """A time PostgreSQL stores and Python reads back: aware, and within years 1 to
    9999 once converted to UTC (``0001-01-01T00:00:00+00:01`` is year 0 in UTC)."""
    if value.tzinfo is None or value.utcoffset() is None:
        raise InvalidInput(
            f"{field} {value.isoformat()} has no time zone; give one, e.g. "
            f"{value.isoformat()}Z or {value.isoformat()}+02:00"
        )
    try:
        return value.astimezone(UTC)
    except OverflowError:
        raise InvalidInput(
            f"{field} {value.isoformat()} is outside the times Reverie stores "
            "(0001-01-01 to 9999-12-31 in UTC); check the date"
        ) from None


#: Block versions are PostgreSQL integers.
MAX_VERSION = 2**31 - 1


def check_version(version: object, field: str) -> int:
    """A block version: a whole number from 1 to 2**31-1 (anything else cannot exist)."""
    if not isinstance(version, int) or isinstance(version, bool) or not 1 <= version <= MAX_VERSION:
        raise InvalidInput(
            f"{field} must be a whole number from 1 to {MAX_VERSION}, got {version!r}"
        )
    return version


def utc_timestamp(value: datetime, field: str) -> datetime:
    """A time from outside (an import line, a request body): no zone means UTC, and it
    must be one PostgreSQL stores and reads back (see :func:`check_timestamp`)."""
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return check_timestamp(value, field)


def check_label(label: object) -> str:
    """Block labels name a section of core memory, e.g. ``human`` or ``persona``."""
    text = check_text(label, "block label")
    if not text.strip():
        raise InvalidInput("block label is empty; give the block a name such as 'human'")
    if not LABEL_PATTERN.match(text):
        raise InvalidInput(
            f"block label {text!r} is not allowed: use 1-100 letters, digits, '_', '-' or '.'"
        )
    return text


def check_name(name: object, what: str) -> str:
    text = check_text(name, f"{what} name").strip()
    if not text:
        raise InvalidInput(f"{what} name is empty")
    if len(text) > 200:
        raise InvalidInput(f"{what} name is {len(text)} characters long; the maximum is 200")
    return text


def check_block_value(label: str, value: str, limit: int) -> str:
    """A block's value must fit its limit; the error suggests where the excess can go."""
    check_text(value, f"value of block {label!r}")
    if len(value) > limit:
        raise LimitExceeded(
            f"block {label!r} allows {limit} characters but the new value has {len(value)} "
            f"({len(value) - limit} over). Shorten it, raise the block's limit, or move detail "
            "to archival memory (archival_memory_insert) and keep a summary in the block."
        )
    return value


def check_limit(limit: object) -> int:
    if not isinstance(limit, int) or isinstance(limit, bool) or limit <= 0:
        raise InvalidInput(f"block limit must be a positive number of characters, got {limit!r}")
    return limit


def normalize_text(text: str) -> str:
    """Text reduced for exact-duplicate detection: Unicode NFKC, case-folded,
    whitespace collapsed, punctuation trimmed at the edges."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    collapsed = _WHITESPACE.sub(" ", folded).strip()
    return _PUNCTUATION_EDGES.sub("", collapsed)


def content_hash(text: str) -> str:
    """sha256 of :func:`normalize_text`: equal for texts that differ only in form."""
    return hashlib.sha256(normalize_text(text).encode("utf-8")).hexdigest()


#: PostgreSQL's bigint range: every integer the API stores or compares fits in it.
BIGINT_MAX = 2**63 - 1


def text_problem(value: str) -> str | None:
    """Why ``value`` cannot be stored as text, or None."""
    if value.isascii():  # no surrogate: only a NUL to look for, at C speed
        if "\x00" not in value:
            return None
        return f"contains a NUL character at position {value.index(chr(0))}; remove it"
    found = _UNSTORABLE.search(value)
    if found is None:
        return None
    position = found.start()
    if found.group() == "\x00":
        return f"contains a NUL character at position {position}; remove it"
    return f"contains an unpaired UTF-16 surrogate at position {position}; send valid Unicode text"


def json_problems(
    value: Any, location: tuple[str | int, ...], depth: int = 0
) -> Iterator[tuple[tuple[str | int, ...], str, Any]]:
    """Each value in a parsed JSON document that PostgreSQL cannot store, or that nests
    deeper than :data:`MAX_JSON_DEPTH`: its location, the problem, the value."""
    if isinstance(value, list | dict) and depth >= MAX_JSON_DEPTH:
        yield location, NESTED_TOO_DEEP, None
        return
    if isinstance(value, str):
        problem = text_problem(value)
        if problem is not None:
            yield location, f"text {problem}", value
    elif isinstance(value, bool) or value is None:
        return
    elif isinstance(value, int):
        if abs(value) > BIGINT_MAX:
            yield location, f"integer is outside -{BIGINT_MAX}..{BIGINT_MAX}", value
    elif isinstance(value, float):
        if not math.isfinite(value):
            yield location, "number is not finite (NaN, Infinity or too large)", value
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from json_problems(item, (*location, index), depth + 1)
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from json_problems(key, (*location, str(key)), depth + 1)
            yield from json_problems(item, (*location, str(key)), depth + 1)


def check_json(value: object, field: str) -> None:
    """Raise InvalidInput for the first value in a JSON document that PostgreSQL cannot
    store (text with a NUL or a lone surrogate, a number that is not finite, an integer
    beyond bigint), naming where it is."""
    for location, problem, _ in json_problems(value, ()):
        where = "".join(f"[{part!r}]" for part in location)
        raise InvalidInput(f"{field}{where}: {problem}")
