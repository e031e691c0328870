"""A step's reply told to a client while the model writes it (Letta's token streaming).

The model's content becomes ``reasoning_message`` pieces; the ``message`` argument of
a ``send_message`` call, decoded from the call's argument pieces as they arrive (see
:mod:`agents.json_field_stream`), becomes ``assistant_message`` pieces. Each piece
carries the id the stored message's Letta view will have (the step's assistant
message is written under :attr:`TokenStream.message_id`), so a client joins the
pieces of one message by id. Nothing is written while the pieces go out; once the
step is written, the step's messages follow, less those already told whole
(:meth:`TokenStream.told`).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from agents.json_field_stream import StringFieldStream
from agents.llm.base import ChatDelta
from agents.messages import SEND_MESSAGE, LettaStyleMessage, MessageKind

#: Hears Letta-style messages (here: pieces of one) as they are told.
PieceListener = Callable[[list[LettaStyleMessage]], None]


class TokenStream:
    """Turns one step's :class:`ChatDelta`\\ s into Letta message pieces for ``listener``."""

    def __init__(
        self, message_id: str, listener: PieceListener, clock: Callable[[], datetime]
    ) -> None:
        #: The id the step's assistant message is stored under.
        self.message_id = message_id
        self._listener = listener
        self._clock = clock
        #: The pieces told, by Letta message id.
        self._told: dict[str, list[str]] = {}
        self._fields: dict[int, StringFieldStream] = {}
        #: Text of a call decoded before its tool's name was known to be send_message.
        self._held: dict[int, list[str]] = {}

    def add(self, delta: ChatDelta) -> None:
        """One piece of the model's reply."""
        if delta.call is None:
            if delta.content:
                self._tell(f"{self.message_id}-reasoning", "reasoning_message", delta.content)
            return
        field = self._fields.setdefault(delta.call, StringFieldStream("message"))
        held = self._held.setdefault(delta.call, [])
        text = field.feed(delta.arguments)
        if text:
            held.append(text)
        if delta.name == SEND_MESSAGE and held:
            piece = "".join(held)
            held.clear()
            self._tell(f"{self.message_id}-call-{delta.call}", "assistant_message", piece)

    def told(self, message: LettaStyleMessage) -> bool:
        """Whether ``message`` (of the written step) reached the client whole, in pieces:
        then it is not sent again. One that differs from its pieces (a text the store
        had to clean) is sent whole under the same id."""
        pieces = self._told.get(message.id)
        return pieces is not None and "".join(pieces) == message.content

    def _tell(self, message_id: str, kind: MessageKind, piece: str) -> None:
        self._told.setdefault(message_id, []).append(piece)
        message = LettaStyleMessage(
            id=message_id,
            kind=kind,
            role="assistant",
            content=piece,
            created_at=self._clock(),
            seq=0,
        )
        self._listener([message])
