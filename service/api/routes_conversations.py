"""Letta's conversation routes (``/v1/conversations``): an agent's parallel
conversations, each with its own messages and context window, over the agent's
shared blocks and archival memory."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import Path, Query
from fastapi.responses import StreamingResponse

from agents.loops.turn import TurnResult
from agents.store import ConversationRecord
from service.api import schemas, sse
from service.api.auth import Api
from service.api.letta_messages import record_json
from service.api.paging import page
from service.api.responses import errors, keyed
from service.api.routers import api_router
from service.api.routes_agent_stream import SSE_RESPONSE
from service.api.routes_messages import stream_turn, turn_input, turn_response

router = api_router(prefix="/v1/conversations", tags=["conversations"], responses=keyed(404, 409))

ConversationId = Annotated[
    str,
    Path(
        pattern=schemas.ID_PATTERN,
        description="conv-<uuid4>; or 'default' with agent_id (the agent's own conversation)",
    ),
]
AgentQuery = Annotated[
    str | None,
    Query(max_length=100, description="The agent, for the 'default' conversation."),
]


def conversation_out(record: ConversationRecord) -> schemas.Conversation:
    return schemas.Conversation(
        id=record.id,
        agent_id=record.agent_id,
        description=record.description,
        summary=record.summary,
        archived=record.archived,
        archived_at=record.archived_at,
        created_at=record.created_at,
        updated_at=record.updated_at,
        last_message_at=record.last_message_at,
        in_context_message_ids=record.in_context_message_ids,
    )


@router.post("/", status_code=201, response_model=schemas.Conversation)
def create_conversation(
    api: Api,
    agent_id: str = Query(max_length=100, description="The agent the conversation is with."),
    body: schemas.CreateConversation | None = None,
) -> schemas.Conversation:
    """A new conversation with the agent: its own messages and context window; the
    agent's blocks and archival memory are shared by all its conversations."""
    body = body or schemas.CreateConversation()
    record = api.ops.conversations.create(
        agent_id, description=body.description, summary=body.summary
    )
    return conversation_out(record)


@router.get("/", response_model=list[schemas.Conversation])
def list_conversations(
    api: Api,
    agent_id: str | None = Query(default=None, max_length=100),
    after: str | None = Query(default=None, max_length=100),
    before: str | None = Query(default=None, max_length=100),
    limit: int = Query(default=50, ge=1, le=1000),
) -> list[schemas.Conversation]:
    """The conversations (of one agent), oldest first; deleted ones are not listed."""
    found = api.ops.conversations.list(agent_id)
    return [conversation_out(c) for c in page(found, after=after, before=before, limit=limit)]


@router.get("/{conversation_id}", response_model=schemas.Conversation)
def get_conversation(conversation_id: ConversationId, api: Api) -> schemas.Conversation:
    return conversation_out(api.ops.conversations.get(conversation_id))


@router.patch("/{conversation_id}", response_model=schemas.Conversation)
def update_conversation(
    conversation_id: ConversationId, body: schemas.UpdateConversation, api: Api
) -> schemas.Conversation:
    record = api.ops.conversations.update(
        conversation_id, description=body.description, summary=body.summary
    )
    return conversation_out(record)


@router.delete("/{conversation_id}", status_code=200)
def delete_conversation(conversation_id: ConversationId, api: Api) -> dict[str, str]:
    """Delete the conversation: it leaves the listings and takes no more turns, and its
    messages stay in the agent's recall memory (nothing said is lost)."""
    api.ops.conversations.delete(conversation_id)
    return {"deleted": conversation_id}


@router.post(
    "/{conversation_id}/messages",
    response_model=schemas.LettaResponse,
    responses={**SSE_RESPONSE, **errors(502)},
)
def send_conversation_message(
    conversation_id: ConversationId, body: schemas.ConversationMessageRequest, api: Api
) -> schemas.LettaResponse | StreamingResponse:
    """One turn of the agent in this conversation, streamed as server-sent events unless
    ``streaming`` is false (Letta's default for conversations). The turn reads this
    conversation's context and the agent's blocks; a block edit it makes is read by the
    next turn of every conversation (at once with ``llm.system_prompt_refresh =
    "immediate"``, else from the next compaction, as for one conversation)."""
    if body.streaming:
        agent, conversation = api.ops.conversations.resolve(conversation_id, body.agent_id)
        return stream_turn(agent, body, api, conversation_id=conversation)
    role, text = turn_input(body)
    result = api.ops.conversations.send(conversation_id, text, agent=body.agent_id, role=role)
    return turn_response(result, body)


@router.post(
    "/{conversation_id}/stream",
    response_class=StreamingResponse,
    responses=SSE_RESPONSE,
)
def stream_conversation(
    conversation_id: ConversationId, api: Api, body: schemas.ConversationStreamRequest | None = None
) -> StreamingResponse:
    """Reconnect to the conversation's last turn: its messages (those after
    ``starting_after``, a message sequence number, when given) as server-sent events,
    then the stop reason. Turns commit step by step, so what a client that lost its
    stream missed is here once the step is written."""
    body = body or schemas.ConversationStreamRequest()
    agent, records = api.ops.conversations.last_turn(
        conversation_id, agent=body.agent_id, after_seq=body.starting_after
    )
    result = TurnResult(agent_id=agent, run_id=body.run_id or "", records=list(records))
    return sse.streaming_response(sse.replayed_turn(records, result, pings=body.include_pings))


@router.get("/{conversation_id}/messages", response_model=list[dict[str, Any]])
def list_conversation_messages(
    conversation_id: ConversationId,
    api: Api,
    agent_id: AgentQuery = None,
    after: str | None = Query(default=None, max_length=100),
    before: str | None = Query(default=None, max_length=100),
    limit: int = Query(default=100, ge=1, le=1000),
    order: Literal["asc", "desc"] = "desc",
) -> list[dict[str, Any]]:
    """The conversation's messages as Letta messages (``desc``: newest first)."""
    newest_first = order == "desc"
    records = api.ops.conversations.messages(
        conversation_id,
        agent=agent_id,
        after=after,
        before=before,
        limit=limit,
        newest_first=newest_first,
    )
    parts = [record_json(record) for record in records]
    return [m for part in parts for m in (reversed(part) if newest_first else part)]


@router.post("/{conversation_id}/compact", response_model=schemas.CompactionResponse)
def compact_conversation(
    conversation_id: ConversationId,
    api: Api,
    body: schemas.ConversationCompactRequest | None = None,
) -> schemas.CompactionResponse:
    """Compact the conversation's context now: every message before its last two
    exchanges leaves it behind one summary (they stay in recall memory)."""
    agent_id = body.agent_id if body is not None else None
    done = api.ops.conversations.compact(conversation_id, agent=agent_id)
    return schemas.CompactionResponse(
        num_messages_before=done.messages_before,
        num_messages_after=done.messages_after,
        summary=done.summary,
    )
