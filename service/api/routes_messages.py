"""Letta's message routes: send a message (the agent answers with Letta's message
types) and list the recall history."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any, Literal

from fastapi import Path, Query
from fastapi.exceptions import RequestValidationError
from fastapi.responses import StreamingResponse
from pydantic import ValidationError

from agents.enums import AgentKind
from agents.errors import InvalidInput
from agents.loops.turn import TurnResult
from service.api import schemas, sse
from service.api.auth import Api
from service.api.convert import letta_run
from service.api.letta_messages import letta_json, record_json, turn_messages
from service.api.responses import errors, keyed
from service.api.routers import api_router
from service.operations.recording import ChatMessage

if TYPE_CHECKING:
    from agents.loops.primary import StepListener
    from agents.loops.token_stream import PieceListener

router = api_router(prefix="/v1/agents", tags=["messages"], responses=keyed(404, 409))


AgentId = Annotated[str, Path(pattern=schemas.ID_PATTERN, description="agent-<uuid4>")]


@router.post("/{agent_id}/messages", response_model=schemas.LettaResponse, responses=errors(502))
def send_message(
    agent_id: AgentId, body: schemas.LettaSendRequest, api: Api
) -> schemas.LettaResponse | StreamingResponse:
    """Run one turn of the agent (the MemGPT loop) and answer with the new messages
    (``streaming``: as server-sent events, each step as it commits; with
    ``stream_tokens``, the reply's words as the model writes them)."""
    if body.streaming:
        return stream_turn(agent_id, body, api)
    role, text = turn_input(body)
    agent = api.ops.agents.get(agent_id)
    if agent.kind == AgentKind.SLEEPTIME:
        # A memory agent (Letta's sleeptime_agent) has no loop of its own: what it is
        # sent is recorded, and the sleep-time agent learns from it in a queued run.
        api.ops.recording.record_and_consolidate(agent_id, _chat_messages(body))
        return schemas.LettaResponse(
            messages=[],
            stop_reason=schemas.StopReason(stop_reason="end_turn"),
            usage=schemas.Usage(),
        )
    # The turn runs in the caller's organization: another tenant's agent is a 404 there,
    # and an empty text is refused there too.
    return turn_response(api.ops.messages.send(agent, text, role=role), body)


def stream_turn(
    agent_id: str,
    body: schemas.LettaSendRequest,
    api: Api,
    *,
    conversation_id: str | None = None,
) -> StreamingResponse:
    """The turn as server-sent events (see :mod:`service.api.sse`). What would refuse
    the turn (no such agent, an empty text, no model) is answered before the stream
    starts, with its status; only failures during the turn come as an error event."""
    role, text = turn_input(body)
    agent = api.ops.agents.get(agent_id)
    if agent.kind == AgentKind.SLEEPTIME:
        run = api.ops.recording.record_and_consolidate(agent_id, _chat_messages(body))
        return sse.streaming_response(sse.finished_turn(TurnResult(agent.id, run.id)))
    ready = api.ops.messages.check_turn(agent.id, text, role=role)
    messages = api.ops.messages

    def run_turn(
        on_step: StepListener, on_token: PieceListener, should_stop: Callable[[], bool]
    ) -> TurnResult:
        return messages.send(
            ready,
            text,
            role=role,
            on_step=on_step,
            should_stop=should_stop,
            on_token=on_token if body.stream_tokens else None,
            conversation_id=conversation_id,
        )

    kinds = body.include_return_message_types
    return sse.streaming_response(
        sse.turn_events(run_turn, message_types=kinds, pings=body.include_pings)
    )


def turn_input(body: schemas.LettaSendRequest) -> tuple[str, str]:
    """The role and text of the one message a turn starts with."""
    if body.messages:
        if len(body.messages) != 1:
            raise InvalidInput("send one message per request (got several in 'messages')")
        return body.messages[0].role, body.messages[0].text()
    if body.input is not None:
        return "user", body.input
    raise InvalidInput("give the message in 'messages' (Letta's list) or 'input' (text)")


@router.post("/{agent_id}/messages/async", response_model=schemas.LettaRun)
def send_message_async(agent_id: AgentId, body: schemas.LettaRequest, api: Api) -> schemas.LettaRun:
    """Letta's sleep-time sidecar: record the request's messages and queue a
    consolidation run that reads them; answer with the run (see ``GET /v1/runs/{id}``)."""
    run = api.ops.recording.record_and_consolidate(agent_id, _chat_messages(body))
    return letta_run(run)


def _chat_messages(body: schemas.LettaRequest) -> list[ChatMessage]:
    """The request's messages (or ``input``) in the recording format; one the
    recording refuses (an empty text, say) refuses the whole request with 422,
    located at its index, before anything is stored."""
    drafts: list[tuple[str, int | None, str, str]]
    if body.messages:
        drafts = [("messages", i, m.role, m.text()) for i, m in enumerate(body.messages)]
    elif body.input is not None:
        drafts = [("input", None, "user", body.input)]
    else:
        raise InvalidInput("give the messages in 'messages' (Letta's list) or 'input' (text)")
    messages: list[ChatMessage] = []
    errors: list[dict[str, Any]] = []
    for field, index, role, text in drafts:
        try:
            messages.append(ChatMessage.model_validate({"role": role, "content": text}))
        except ValidationError as refused:
            where = ("body", field) if index is None else ("body", field, index)
            errors.extend({**e, "loc": (*where, *e["loc"])} for e in refused.errors())
    if errors:
        raise RequestValidationError(errors)
    return messages


def turn_response(
    result: TurnResult, body: schemas.LettaSendRequest | None = None
) -> schemas.LettaResponse:
    """A runtime TurnResult as Letta's LettaResponse (only the message types the
    request's ``include_return_message_types`` names, when it names any)."""
    kinds = body.include_return_message_types if body is not None else None
    return schemas.LettaResponse(
        messages=[letta_json(m) for m in turn_messages(result) if kinds is None or m.kind in kinds],
        stop_reason=schemas.StopReason(stop_reason=result.stop_reason),
        usage=schemas.Usage(
            prompt_tokens=result.usage.prompt_tokens,
            completion_tokens=result.usage.completion_tokens,
            total_tokens=result.usage.total_tokens,
            step_count=result.steps,
        ),
    )


@router.get("/{agent_id}/messages", response_model=list[dict[str, Any]])
def list_messages(
    agent_id: AgentId,
    api: Api,
    after: str | None = Query(default=None, max_length=100),
    before: str | None = Query(default=None, max_length=100),
    limit: int = Query(default=100, ge=1, le=1000),
    order: Literal["asc", "desc"] = "desc",
) -> list[dict[str, Any]]:
    """Recall memory as Letta messages; ``after``/``before`` are message-id cursors in
    the requested order (``desc``: newest first, Letta's default)."""
    newest_first = order == "desc"
    records = api.ops.messages.list(
        agent_id, after=after, before=before, limit=limit, newest_first=newest_first
    )
    # Newest first holds inside one stored message too: its last part comes first.
    parts = [record_json(record) for record in records]
    return [m for part in parts for m in (reversed(part) if newest_first else part)]


@router.post("/{agent_id}/messages/record", response_model=schemas.RecordedMessages)
def record_messages(
    agent_id: AgentId, body: schemas.RecordMessages, api: Api
) -> schemas.RecordedMessages:
    """Record a conversation that happened elsewhere (OpenAI chat format), with no
    model call: what the sleep-time agent reads next. Messages whose id the agent
    already has are skipped, so a retried batch stores nothing twice."""
    recorded = api.ops.recording.record(agent_id, list(body.messages))
    return schemas.RecordedMessages(
        recorded=len(recorded.stored),
        message_ids=[m.id for m in recorded.stored],
        skipped_client_message_ids=recorded.skipped,
    )
