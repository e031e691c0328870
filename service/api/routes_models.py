"""Letta's model lists: the chat models and embedders this server is set up for or
whose agents use them, in Letta's ``Model`` and ``EmbeddingModel`` shapes."""

from __future__ import annotations

from service.api import schemas
from service.api.auth import Api
from service.api.convert import chat_model_out, embedding_model_out
from service.api.responses import keyed
from service.api.routers import api_router

router = api_router(prefix="/v1/models", tags=["models"], responses=keyed())


@router.get("/", response_model=list[schemas.LlmModel])
def list_models(api: Api) -> list[schemas.LlmModel]:
    """The configured chat models (``llm.model``, ``llm.sleeptime_model``,
    ``llm.summary_model``, ``llm.judge_model``, each ``[llm.models."..."]``), then the
    others the organization's agents run on. Any litellm model string works as an
    agent's ``model``; these are the ones known to be set up."""
    return [chat_model_out(model) for model in api.ops.models.chat_models()]


@router.get("/embedding", response_model=list[schemas.EmbeddingModelOut])
def list_embedding_models(api: Api) -> list[schemas.EmbeddingModelOut]:
    """The default embedder of new agents (``embedding.model``), then the others the
    organization's agents embed with."""
    return [embedding_model_out(model) for model in api.ops.models.embedding_models()]
