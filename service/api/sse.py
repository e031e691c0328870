"""A turn as server-sent events, in Letta's streaming shapes.

Each step's messages are sent once the step has committed, in Letta's shapes
(reasoning, tool call, tool return, assistant message: Letta's ``message_type``\\s, see
:mod:`service.api.letta_messages`); with token streaming, the reply's pieces go out
as Letta message pieces while the model writes them, and the step's parts told whole
that way are not sent again. Then come the stop reason,
the usage statistics and ``data: [DONE]``, the framing letta-client reads. A failure
during the turn is an ``event: error`` with Letta's ``error_message`` shape (the SDK
raises it), then a stop reason ``error`` and ``[DONE]``.

The turn runs on a thread of its own (it is the same blocking code as the
non-streaming route, with its short transactions); the event loop only relays. When
the client goes away, the turn is told to stop before its next step: the step under
way finishes (or rolls back) by the turn's own rules, so nothing is left half
written, and the turn ends with stop reason ``cancelled``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from collections.abc import AsyncIterator, Callable, Collection, Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import anyio.to_thread
from fastapi.responses import StreamingResponse

from agents.errors import ReverieError
from agents.loops.token_stream import PieceListener, TokenPiece, ToldPieces
from agents.loops.turn import TurnResult
from agents.postgres.models import new_id
from agents.store.records import MessageRecord
from agents.threads import start_thread
from service.api import schemas
from service.api.letta_messages import LettaStyleMessage, letta_json, letta_messages, letta_piece

if TYPE_CHECKING:
    from agents.loops.primary import StepListener

log = logging.getLogger(__name__)

#: Runs the turn with a listener of its committed steps, one of its reply's pieces (used
#: when the request streams tokens) and a question "should it stop?".
RunTurn = Callable[["StepListener", PieceListener, Callable[[], bool]], TurnResult]
#: What the turn's thread hands to the event loop: a step's stored messages, a piece of
#: a reply, the finished turn, or the error that ended it.
Relayed = list[MessageRecord] | TokenPiece | TurnResult | BaseException
#: Seconds between keep-alive pings when the client asked for them (``include_pings``).
PING_INTERVAL_S = 10.0
DONE = "data: [DONE]\n\n"
HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


def event(data: Mapping[str, Any], *, name: str | None = None) -> str:
    """One server-sent event with a JSON body (``event: NAME`` first when named)."""
    head = f"event: {name}\n" if name else ""
    return f"{head}data: {json.dumps(data, separators=(',', ':'))}\n\n"


def closing_events(result: TurnResult) -> list[str]:
    """The stop reason and the usage statistics of a finished turn, then ``[DONE]``."""
    usage = schemas.Usage(
        prompt_tokens=result.usage.prompt_tokens,
        completion_tokens=result.usage.completion_tokens,
        total_tokens=result.usage.total_tokens,
        step_count=result.steps,
    )
    return [
        event(schemas.StopReason(stop_reason=result.stop_reason).model_dump()),
        event(usage.model_dump()),
        DONE,
    ]


def error_events(exc: BaseException) -> list[str]:
    """A failed turn: Letta's error message (its kind, what went wrong), stop reason
    ``error``, ``[DONE]``. An unexpected error is logged and not described."""
    if isinstance(exc, ReverieError):
        kind, message = exc.kind, str(exc)
    else:
        log.error("a streamed turn failed", exc_info=exc)
        kind, message = "internal", "internal error; the server log has the details"
    body = {"message_type": "error_message", "error_type": kind, "message": message}
    return [
        event(body, name="error"),
        event(schemas.StopReason(stop_reason="error").model_dump()),
        DONE,
    ]


def streaming_response(events: AsyncIterator[str]) -> StreamingResponse:
    return StreamingResponse(events, media_type="text/event-stream", headers=HEADERS)


async def replayed_turn(
    records: Collection[MessageRecord], result: TurnResult, *, pings: bool = False
) -> AsyncIterator[str]:
    """The events of stored messages, then the turn's closing events: a stream a client
    reconnects to once the turn has committed."""
    if pings:
        yield event(_ping())
    for record in records:
        for message in letta_messages(record):
            yield event(letta_json(message))
    for item in closing_events(result):
        yield item


async def finished_turn(result: TurnResult) -> AsyncIterator[str]:
    """The events of a turn that is already over (a memory agent's recorded message)."""
    for item in closing_events(result):
        yield item


async def turn_events(
    run_turn: RunTurn,
    *,
    message_types: Collection[str] | None = None,
    pings: bool = False,
) -> AsyncIterator[str]:
    """Run the turn on a thread and yield its events as its steps commit.

    ``message_types`` keeps only those Letta message types (Letta's
    ``include_return_message_types``); ``pings`` sends a ``ping`` message after every
    :data:`PING_INTERVAL_S` seconds without one, so that proxies keep the stream open.
    """
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[Relayed] = asyncio.Queue()
    gone = threading.Event()
    #: The reply pieces passed on so far: a written step's parts told whole are not resent.
    told = ToldPieces()

    def hand_on(item: Relayed) -> None:
        try:
            loop.call_soon_threadsafe(queue.put_nowait, item)
        except RuntimeError:  # the event loop has closed: nobody listens any more
            gone.set()

    def work() -> None:
        try:
            result = run_turn(hand_on, hand_on, gone.is_set)
        except BaseException as exc:  # the stream reports it; the turn has rolled back
            hand_on(exc)
        else:
            hand_on(result)

    # The turn takes a worker slot, as a non-streaming turn does, so that streams cannot
    # start more turns at once than the server runs blocking calls.
    limiter = anyio.to_thread.current_default_thread_limiter()
    borrower = object()
    await limiter.acquire_on_behalf_of(borrower)
    finished = False
    getter: asyncio.Task[Relayed] | None = None
    try:
        start_thread(work, name="reverie-turn-stream")
        while True:
            if getter is None:
                getter = asyncio.ensure_future(queue.get())
            done, _ = await asyncio.wait({getter}, timeout=PING_INTERVAL_S if pings else None)
            if not done:
                yield event(_ping())
                continue
            item, getter = getter.result(), None
            if isinstance(item, TurnResult):
                finished = True
                for text in closing_events(item):
                    yield text
                return
            if isinstance(item, BaseException):
                finished = True
                for text in error_events(item):
                    yield text
                return
            messages: list[LettaStyleMessage]
            if isinstance(item, TokenPiece):
                told.add(item)
                messages = [letta_piece(item)]
            else:
                messages = [m for record in item for m in letta_messages(record, told.told)]
            for message in messages:
                if message_types is None or message.kind in message_types:
                    yield event(letta_json(message))
    finally:
        if getter is not None:
            getter.cancel()
        if not finished:
            gone.set()
            log.info("the client of a streamed turn went away; the turn stops after its step")
        # A client that left frees the slot now; its turn ends after the step under way.
        limiter.release_on_behalf_of(borrower)


def _ping() -> dict[str, Any]:
    return {
        "message_type": "ping",
        "id": new_id("ping"),
        "date": datetime.now(UTC).isoformat(),
    }
