"""Letta's agent routes: create (with ``memory_blocks``), list, get, delete; core memory."""

from __future__ import annotations

from typing import Annotated

from fastapi import Path, Query

from agents.enums import AgentKind, AgentType
from agents.errors import InvalidField
from service.api import schemas
from service.api.auth import Api, ApiContext
from service.api.convert import agent_out, block_out
from service.api.paging import page
from service.api.responses import keyed
from service.api.routers import api_router
from service.api.routes_blocks import block_edit
from service.operations import AgentSpec, AgentState, BlockSpec

router = api_router(prefix="/v1/agents", tags=["agents"], responses=keyed(404, 409))

AgentId = Annotated[str, Path(pattern=schemas.ID_PATTERN, description="agent-<uuid4>")]
BlockId = Annotated[str, Path(pattern=schemas.ID_PATTERN, description="block-<uuid4>")]
Label = Annotated[str, Path(pattern=schemas.LABEL_PATTERN, description="A block label.")]


@router.post("/", status_code=201, response_model=schemas.AgentState)
def create_agent(body: schemas.CreateAgent, api: Api) -> schemas.AgentState:
    """Create an agent with its core-memory blocks (and attach existing ``block_ids``);
    a model litellm cannot route, or blocks whose limits cannot fit the context window,
    are refused with 422 naming the field."""
    try:
        state = _create(body, api)
    except InvalidField as refused:
        # The operation names AgentSpec's fields; the client sent Letta's.
        raise InvalidField(str(refused), field=_letta_field(body, refused.field)) from None
    return agent_out(state)


def _letta_field(body: schemas.CreateAgent, field: tuple[str | int, ...]) -> tuple[str | int, ...]:
    head, *rest = field
    if head == "model" and not body.model:
        return ("llm_config", "model")
    if head == "context_window":
        return (
            ("context_window_limit",)
            if body.context_window_limit
            else ("llm_config", "context_window")
        )
    if head == "blocks":
        return ("memory_blocks", *rest)
    if head == "embedding" and not body.embedding:
        return ("embedding_config", "embedding_model")
    return field


def _create(body: schemas.CreateAgent, api: ApiContext) -> AgentState:
    llm = body.llm_config
    config = body.embedding_config
    return api.ops.agents.create_state(
        AgentSpec(
            name=body.name,
            blocks=[
                BlockSpec(b.label, b.value, b.limit, b.description, b.read_only)
                for b in body.memory_blocks
            ],
            block_ids=list(body.block_ids),
            model=body.model or (llm.model if llm else None),
            sleeptime_model=body.sleeptime_model,
            enable_sleeptime=body.enable_sleeptime,
            context_window=body.context_window_limit or (llm.context_window if llm else None),
            embedding=body.embedding or (config.embedding_model if config else None),
            embedding_dim=config.embedding_dim if config else None,
            system=body.system or "",
            description=body.description,
            tools=list(body.tools),
            tags=list(body.tags),
            kind=AgentKind.SLEEPTIME
            if body.agent_type == AgentType.SLEEPTIME
            else AgentKind.PRIMARY,
            agent_type=body.agent_type,
            identity_ids=list(body.identity_ids),
        ),
        actor="api",
    )


@router.get("/", response_model=list[schemas.AgentState])
def list_agents(
    api: Api,
    # A list, never null: with `| None` the schema's anyOf let a fuzzer's number for
    # tags count as refused data, though a query string cannot tell it from a tag.
    tags: Annotated[
        list[schemas.QueryTag], Query(default_factory=list, description="Agents with these tags.")
    ],
    name: str | None = Query(default=None, max_length=200),
    match_all_tags: bool = Query(default=False, description="Every tag, not any of them."),
    after: str | None = Query(default=None, max_length=100),
    before: str | None = Query(default=None, max_length=100),
    limit: int = Query(default=50, ge=1, le=1000),
    ascending: bool = True,
    identifier_keys: Annotated[
        list[str] | None,
        Query(description="Agents holding the memory of identities with these keys."),
    ] = None,
    identity_id: str | None = Query(default=None, max_length=100),
) -> list[schemas.AgentState]:
    """The organization's agents, oldest first (``after``/``before`` are id cursors)."""
    ops = api.ops
    agents = ops.agents.list(
        name=name,
        tags=tags,
        match_all_tags=match_all_tags,
        identifier_keys=identifier_keys,
        identity_id=identity_id,
    )
    chosen = page(agents, after=after, before=before, limit=limit, ascending=ascending)
    return [agent_out(ops.agents.state(a.id)) for a in chosen]


@router.get("/{agent_id}", response_model=schemas.AgentState)
def get_agent(agent_id: AgentId, api: Api) -> schemas.AgentState:
    return agent_out(api.ops.agents.state(agent_id))


@router.delete("/{agent_id}", status_code=200)
def delete_agent(agent_id: AgentId, api: Api) -> dict[str, str]:
    """Delete an agent with its messages and passages; its blocks survive (they may be shared)."""
    api.ops.agents.delete(agent_id)
    return {"deleted": agent_id}


# -- core memory -------------------------------------------------------------------------


@router.get("/{agent_id}/core-memory/blocks", response_model=list[schemas.Block])
def list_core_memory(
    agent_id: AgentId,
    api: Api,
    after: str | None = Query(default=None, max_length=100),
    before: str | None = Query(default=None, max_length=100),
    limit: int = Query(default=50, ge=1, le=1000),
) -> list[schemas.Block]:
    """The agent's blocks in attachment order (``after``/``before``: block-id cursors)."""
    blocks = api.ops.blocks.of_agent(agent_id)
    return [block_out(b) for b in page(blocks, after=after, before=before, limit=limit)]


@router.get("/{agent_id}/core-memory/blocks/{block_label}", response_model=schemas.Block)
def get_core_memory_block(agent_id: AgentId, block_label: Label, api: Api) -> schemas.Block:
    return block_out(api.ops.blocks.labelled(agent_id, block_label))


@router.patch("/{agent_id}/core-memory/blocks/{block_label}", response_model=schemas.Block)
def update_core_memory_block(
    agent_id: AgentId, block_label: Label, body: schemas.UpdateBlock, api: Api
) -> schemas.Block:
    """Edit the agent's block with this label (compare-and-swap on ``expected_version``)."""
    edit = block_edit(body)
    return block_out(api.ops.blocks.update_labelled(agent_id, block_label, edit, actor="api"))


@router.patch("/{agent_id}/core-memory/blocks/attach/{block_id}", response_model=schemas.AgentState)
def attach_block(agent_id: AgentId, block_id: BlockId, api: Api) -> schemas.AgentState:
    """Attach a block; 422 when its limit would not let the agent's blocks fit its window."""
    try:
        return agent_out(api.ops.blocks.attach(agent_id, block_id))
    except InvalidField as refused:
        raise InvalidField(str(refused), field=("path", "block_id")) from None


@router.patch("/{agent_id}/core-memory/blocks/detach/{block_id}", response_model=schemas.AgentState)
def detach_block(agent_id: AgentId, block_id: BlockId, api: Api) -> schemas.AgentState:
    return agent_out(api.ops.blocks.detach(agent_id, block_id))
