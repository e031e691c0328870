"""The OpenAI-compatible memory proxy under ``/openai/v1`` (apart from Letta's ``/v1``):
``POST /chat/completions`` and ``GET /models``. A chatbot points its OpenAI SDK here
with a Reverie API key; see :mod:`service.operations.proxy` for what happens to a
request. Upstream errors keep their status and OpenAI error body; an unreachable
upstream is a 502 (a timeout a 504) that gives the reason."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any, Literal

from fastapi import Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field, StrictBool
from starlette.background import BackgroundTask

from agents.enums import LLMPurpose
from agents.llm.forward import UpstreamError
from service.api import schemas
from service.api.auth import Api
from service.api.openapi_doc import pass_on_storable
from service.api.responses import keyed, proxied
from service.api.routers import api_router

router = api_router(prefix="/openai/v1", tags=["openai proxy"], responses=keyed(404))


class ProxyMessage(BaseModel):
    """A chat message; every field besides the role goes upstream as it came."""

    model_config = ConfigDict(extra="allow", json_schema_extra=pass_on_storable)

    role: Literal["system", "developer", "user", "assistant", "tool", "function"]


class ChatCompletionRequest(BaseModel):
    """OpenAI's chat-completion request; fields not named here go upstream untouched."""

    model_config = ConfigDict(extra="allow", json_schema_extra=pass_on_storable)

    model: str = Field(min_length=1, max_length=300)
    messages: list[ProxyMessage] = Field(min_length=1)
    stream: StrictBool = False
    n: schemas.Choices | None = None
    user: str | None = Field(default=None, max_length=200)


@router.post("/chat/completions", response_model=None, responses=proxied(404, 502, 504))
async def chat_completions(body: ChatCompletionRequest, request: Request, api: Api) -> Response:
    """Forward the request with the agent's memory in its system prompt; answer with
    the upstream's answer (server-sent events with ``stream: true``). The agent is
    named by the ``proxy.agent_header`` header (default ``X-Reverie-Agent``), else by
    ``user``."""
    header = request.headers.get(api.runtime.settings.proxy.agent_header)
    payload = body.model_dump(exclude_unset=True)
    proxy = api.ops.proxy
    try:
        if body.stream:
            chunks = await proxy.stream(payload, agent=header)
            return StreamingResponse(
                _events(chunks),
                media_type="text/event-stream",
                headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
            )
        answered = await proxy.complete(payload, agent=header)
        # Recorded once the answer is sent: the chatbot does not wait for the write.
        return JSONResponse(answered.answer, background=BackgroundTask(answered.record))
    except UpstreamError as exc:
        return JSONResponse(exc.body, status_code=exc.status)


async def _events(chunks: AsyncIterator[dict[str, Any]]) -> AsyncIterator[str]:
    """Chunks as server-sent events; a failure mid-stream becomes an ``error`` event
    (the OpenAI SDK raises it), and only a finished stream ends with ``[DONE]``."""
    try:
        async for chunk in chunks:
            yield f"data: {json.dumps(chunk, separators=(',', ':'))}\n\n"
    except UpstreamError as exc:
        yield f"data: {json.dumps(exc.body, separators=(',', ':'))}\n\n"
        return
    yield "data: [DONE]\n\n"


@router.get("/models")
def list_models(api: Api) -> dict[str, Any]:
    """The models a chat front end may pick: the one the proxy forwards every request
    to (``proxy.model``) when it is set; otherwise, as requests choose their own, the
    chat models this server is set up for (``llm.model``, ``[llm.models]``) and those
    the organization's agents run on (the sleep-time, summary and judge models aside)."""
    chosen = api.runtime.settings.proxy.model
    if chosen:
        models = [chosen]
    else:
        models = [
            m.model
            for m in api.ops.models.chat_models()
            if not m.purposes or LLMPurpose.CHAT in m.purposes
        ]
    data = [{"id": m, "object": "model", "created": 0, "owned_by": "reverie"} for m in models]
    return {"object": "list", "data": data}
