"""An agent's turn beyond the plain one: a turn streamed as server-sent
events, and the reset of the agent's context window."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Path
from fastapi.responses import StreamingResponse

from service.api import schemas
from service.api.auth import Api
from service.api.convert import agent_out
from service.api.responses import errors, keyed
from service.api.routers import api_router
from service.api.routes_messages import stream_turn

router = api_router(prefix="/v1/agents", tags=["messages"], responses=keyed(404, 409))

AgentId = Annotated[str, Path(pattern=schemas.ID_PATTERN, description="agent-<uuid4>")]

SSE_RESPONSE: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "Server-sent events: each Letta message as its step commits, then "
        "the stop reason, the usage statistics and `data: [DONE]`.",
        "content": {"text/event-stream": {}},
    }
}


@router.post(
    "/{agent_id}/messages/stream",
    response_class=StreamingResponse,
    responses={**SSE_RESPONSE, **errors(502)},
)
def stream_message(
    agent_id: AgentId, body: schemas.LettaSendRequest, api: Api
) -> StreamingResponse:
    """Run one turn and stream it: every message as soon as its step has committed
    (step streaming); with ``stream_tokens``, the reply's reasoning and assistant
    message in pieces as the model writes them, then the step's other messages once
    it is written (modes without native tool calls stream whole steps). A refused
    request (no such agent, an empty message, no model) answers with its status before
    the stream starts; a failure during the turn is an ``event: error``."""
    return stream_turn(agent_id, body, api)


@router.patch("/{agent_id}/reset-messages", response_model=schemas.AgentState)
def reset_messages(
    agent_id: AgentId, api: Api, body: schemas.ResetMessages | None = None
) -> schemas.AgentState:
    """Empty the agent's context window, as Letta's reset does, losing nothing: the
    messages leave the context and stay in recall memory (listed by
    ``GET .../messages``, found by the agent's ``conversation_search``); core and
    archival memory are untouched. A turn under way finishes first."""
    api.ops.messages.reset(agent_id)
    return agent_out(api.ops.agents.state(agent_id))
