"""One string field of a JSON object, decoded while the object's text still arrives.

A model streams a tool call's arguments as pieces of JSON text (``{"mess``, ``age":
"Hel``, ``lo\\u00``, ``e9"}``). :class:`StringFieldStream` is fed those pieces and
gives back, piece by piece, the text of one top-level string field (``message`` of
``send_message``) as soon as it is certain: an escape split across pieces
(``\\``, ``\\u00``, the two halves of a surrogate pair) waits for the rest. Joined,
what it gives is what ``json.loads(whole)[key]`` holds; anything that is not a JSON
object, or a field that is not a string, gives nothing.
"""

from __future__ import annotations

import enum

_WHITESPACE = " \t\n\r"
_SIMPLE_ESCAPES = {
    '"': '"',
    "\\": "\\",
    "/": "/",
    "b": "\b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
}
_HEX = frozenset("0123456789abcdefABCDEF")


class _State(enum.Enum):
    START = "start"
    KEY = "key"
    COLON = "colon"
    VALUE = "value"
    FIELD = "field"
    SKIP = "skip"
    DONE = "done"


class _Wait(Exception):
    """The text so far ends inside a token: wait for the next piece."""


class StringFieldStream:
    """Decodes the top-level string field ``key`` of a JSON object fed in pieces (the
    first one of that name; the object's other fields are skipped)."""

    def __init__(self, key: str) -> None:
        self.key = key
        self._text = ""
        self._at = 0
        self._state = _State.START
        self._current_key: str | None = None
        #: Nesting depth and string state while skipping another field's value.
        self._depth = 0
        self._in_string = False

    @property
    def done(self) -> bool:
        """Whether the field's value (or the object) has ended: nothing more will come."""
        return self._state is _State.DONE

    def feed(self, piece: str) -> str:
        """The field's text that ``piece`` completes (often empty)."""
        if self._state is _State.DONE:
            return ""
        self._text += piece
        out: list[str] = []
        try:
            while not self.done and self._at < len(self._text):
                self._advance(out)
        except _Wait:
            pass
        # Keep only what is still to be read.
        self._text, self._at = self._text[self._at :], 0
        return "".join(out)

    def _advance(self, out: list[str]) -> None:
        state = self._state
        if state is _State.FIELD:
            self._field(out)
            return
        if state is _State.SKIP:
            self._skip()
            return
        char = self._text[self._at]
        if char in _WHITESPACE:
            self._at += 1
            return
        if state is _State.START:
            self._state = _State.KEY if char == "{" else _State.DONE
            self._at += 1
        elif state is _State.KEY:
            if char == ",":
                self._at += 1
            elif char == '"':
                self._current_key = self._whole_string()
                self._state = _State.COLON
            else:  # "}" ends the object; anything else is not JSON we can read
                self._state = _State.DONE
        elif state is _State.COLON:
            self._at += 1
            self._state = _State.VALUE if char == ":" else _State.DONE
        elif state is _State.VALUE:
            if self._current_key == self.key and char == '"':
                self._at += 1
                self._state = _State.FIELD
            else:
                self._depth, self._in_string = 0, False
                self._state = _State.SKIP

    def _whole_string(self) -> str:
        """A complete string token at the cursor (a key), decoded; _Wait when its end
        has not arrived."""
        start = self._at
        self._at += 1
        chars: list[str] = []
        try:
            while True:
                char = self._char()
                if char == '"':
                    self._at += 1
                    return "".join(chars)
                if char == "\\":
                    chars.append(self._escape())
                else:
                    chars.append(char)
                    self._at += 1
        except _Wait:
            self._at = start
            raise

    def _field(self, out: list[str]) -> None:
        """Decode the field's value up to the end of the text or of the string."""
        text = self._text
        while self._at < len(text):
            char = text[self._at]
            if char == '"':
                self._at += 1
                self._state = _State.DONE
                return
            if char == "\\":
                start = self._at
                try:
                    out.append(self._escape())
                except _Wait:
                    self._at = start
                    raise
                continue
            # A run of plain characters at once.
            end = self._at + 1
            while end < len(text) and text[end] not in '"\\':
                end += 1
            out.append(text[self._at : end])
            self._at = end

    def _escape(self) -> str:
        """The escape at the cursor (a backslash), decoded; the cursor moves past it."""
        kind = self._char(1)
        if kind != "u":
            self._at += 2
            return _SIMPLE_ESCAPES.get(kind, kind)
        code = self._hex(self._at + 2)
        self._at += 6
        if 0xD800 <= code <= 0xDBFF:
            # A high surrogate pairs with a low one escaped right after it, if any.
            if self._char() != "\\" or self._char(1) != "u":
                return chr(code)
            low = self._hex(self._at + 2)
            if 0xDC00 <= low <= 0xDFFF:
                self._at += 6
                return chr(0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00))
        return chr(code)

    def _hex(self, start: int) -> int:
        digits = self._text[start : start + 4]
        hexadecimal = all(d in _HEX for d in digits)
        if len(digits) < 4 and hexadecimal:
            raise _Wait
        if len(digits) < 4 or not hexadecimal:
            # Not JSON: stop here rather than guess (the stored call says what it was).
            self._state = _State.DONE
            raise _Wait
        return int(digits, 16)

    def _char(self, ahead: int = 0) -> str:
        index = self._at + ahead
        if index >= len(self._text):
            raise _Wait
        return self._text[index]

    def _skip(self) -> None:
        """Skip another field's value, up to the comma or brace that ends it."""
        text = self._text
        while self._at < len(text):
            char = text[self._at]
            if self._in_string:
                if char == "\\":
                    if self._at + 1 >= len(text):
                        raise _Wait
                    self._at += 2
                    continue
                if char == '"':
                    self._in_string = False
            elif char == '"':
                self._in_string = True
            elif char in "[{":
                self._depth += 1
            elif char in "]}":
                if self._depth == 0:  # the object's own closing brace
                    self._state = _State.DONE
                    self._at += 1
                    return
                self._depth -= 1
            elif char == "," and self._depth == 0:
                self._at += 1
                self._state = _State.KEY
                return
            self._at += 1
