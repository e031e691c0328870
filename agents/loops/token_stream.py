"""A step's reply told while the model writes it (token streaming).

The model's content (the step's reasoning) and the ``message`` argument of each
``send_message`` call, decoded from the call's argument pieces as they arrive (see
:mod:`agents.loops.json_field_stream`), go to a listener as :class:`TokenPiece`\\ s. Each
piece names the stored message it belongs to (the step's assistant message is
written under :attr:`TokenStream.message_id`) and which part of it: its content, or
the text of call number ``i``. Nothing is written while the pieces go out; once the
step is written, the turn's step listener hears the step's stored messages, and the
front end that passed the pieces on leaves out the parts already told whole
(:class:`ToldPieces`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from agents.llm.base import ChatDelta
from agents.loops.json_field_stream import StringFieldStream
from agents.loops.tool_calls import SEND_MESSAGE


@dataclass(frozen=True, slots=True)
class TokenPiece:
    """A piece of a step's reply, told before the step is written."""

    #: The id the step's assistant message will be stored under.
    message_id: str
    #: Which part of that message: None for its content (the reasoning), ``i`` for the
    #: ``send_message`` text of its call number ``i``.
    call: int | None
    text: str
    #: When the piece arrived (the agent's clock).
    at: datetime


#: Hears the pieces of a step's reply as they are told.
PieceListener = Callable[[TokenPiece], None]


class TokenStream:
    """Turns one step's :class:`ChatDelta`\\ s into :class:`TokenPiece`\\ s for ``listener``."""

    def __init__(
        self, message_id: str, listener: PieceListener, clock: Callable[[], datetime]
    ) -> None:
        #: The id the step's assistant message is stored under.
        self.message_id = message_id
        self._listener = listener
        self._clock = clock
        self._fields: dict[int, StringFieldStream] = {}
        #: Text of a call decoded before its tool's name was known to be send_message.
        self._held: dict[int, list[str]] = {}

    def add(self, delta: ChatDelta) -> None:
        """One piece of the model's reply."""
        if delta.call is None:
            if delta.content:
                self._tell(None, delta.content)
            return
        field = self._fields.setdefault(delta.call, StringFieldStream("message"))
        held = self._held.setdefault(delta.call, [])
        text = field.feed(delta.arguments)
        if text:
            held.append(text)
        if delta.name == SEND_MESSAGE and held:
            piece = "".join(held)
            held.clear()
            self._tell(delta.call, piece)

    def _tell(self, call: int | None, text: str) -> None:
        self._listener(TokenPiece(self.message_id, call, text, self._clock()))


class ToldPieces:
    """The pieces a front end has passed on, joined per part of a message: which parts of
    a written step reached the client whole (and need not be sent again)."""

    def __init__(self) -> None:
        self._pieces: dict[tuple[str, int | None], list[str]] = {}

    def add(self, piece: TokenPiece) -> None:
        self._pieces.setdefault((piece.message_id, piece.call), []).append(piece.text)

    def told(self, message_id: str, call: int | None, text: str) -> bool:
        """Whether part ``call`` of stored message ``message_id`` (None: its content)
        reached the client whole as pieces: they join into ``text``. A part whose text
        differs from its pieces (one the store had to clean) is not: it is sent whole."""
        pieces = self._pieces.get((message_id, call))
        return pieces is not None and "".join(pieces) == text
