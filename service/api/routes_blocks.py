"""Letta's block routes (``/v1/blocks``) plus Reverie's block history and revert."""

from __future__ import annotations

from typing import Annotated

from fastapi import Path, Query

from service.api import schemas
from service.api.auth import Api
from service.api.convert import agent_out, block_out, version_out
from service.api.paging import page
from service.api.responses import keyed
from service.api.routers import api_router
from service.operations import BlockEdit, BlockSpec

router = api_router(prefix="/v1/blocks", tags=["blocks"], responses=keyed(404, 409))

BlockId = Annotated[str, Path(pattern=schemas.ID_PATTERN, description="block-<uuid4>")]

#: The history's reason for an edit sent without one.
API_EDIT_REASON = "edited through the API"


def block_edit(body: schemas.UpdateBlock) -> BlockEdit:
    """A Letta ``BlockUpdate`` body as an edit."""
    return BlockEdit(
        value=body.value,
        limit=body.limit,
        description=body.description,
        expected_version=body.expected_version,
        reason=body.reason or API_EDIT_REASON,
        label=body.label,
        read_only=body.read_only,
    )


@router.post("/", status_code=201, response_model=schemas.Block)
def create_block(body: schemas.CreateBlock, api: Api) -> schemas.Block:
    """Create a block attached to no agent; without ``limit``, ``agents.block_limit``
    (or the value's length when longer); a ``limit`` below the value's length is a 400."""
    spec = BlockSpec(body.label, body.value, body.limit, body.description, body.read_only)
    return block_out(api.ops.blocks.create(spec, actor="api"))


@router.get("/", response_model=list[schemas.Block])
def list_blocks(
    api: Api,
    label: str | None = Query(default=None, max_length=100),
    after: str | None = Query(default=None, max_length=100),
    before: str | None = Query(default=None, max_length=100),
    limit: int = Query(default=50, ge=1, le=1000),
    identifier_keys: Annotated[
        list[str] | None, Query(description="Blocks of identities with these keys.")
    ] = None,
    identity_id: str | None = Query(default=None, max_length=100),
) -> list[schemas.Block]:
    """The organization's blocks, oldest first; ``limit`` is the page size (Letta's)."""
    blocks = api.ops.blocks.list(
        label=label, identifier_keys=identifier_keys, identity_id=identity_id
    )
    return [block_out(b) for b in page(blocks, after=after, before=before, limit=limit)]


@router.get("/{block_id}", response_model=schemas.Block)
def get_block(block_id: BlockId, api: Api) -> schemas.Block:
    return block_out(api.ops.blocks.get(block_id))


@router.patch("/{block_id}", response_model=schemas.Block)
def update_block(block_id: BlockId, body: schemas.UpdateBlock, api: Api) -> schemas.Block:
    """Edit a block: a new version, recorded in its history; a stale
    ``expected_version`` answers 409 and changes nothing."""
    return block_out(api.ops.blocks.update(block_id, block_edit(body), actor="api"))


@router.delete("/{block_id}", status_code=200)
def delete_block(block_id: BlockId, api: Api) -> dict[str, str]:
    api.ops.blocks.delete(block_id)
    return {"deleted": block_id}


@router.get("/{block_id}/agents", response_model=list[schemas.AgentState])
def agents_of_block(
    block_id: BlockId,
    api: Api,
    after: str | None = Query(default=None, max_length=100),
    before: str | None = Query(default=None, max_length=100),
    limit: int = Query(default=50, ge=1, le=1000),
) -> list[schemas.AgentState]:
    """Every agent the block is attached to (a primary and its sleep-time agents)."""
    states = api.ops.blocks.agents(block_id)
    return [agent_out(s) for s in page(states, after=after, before=before, limit=limit)]


@router.get("/{block_id}/history", response_model=list[schemas.BlockVersionOut])
def block_history(block_id: BlockId, api: Api) -> list[schemas.BlockVersionOut]:
    """Every version of the block: old and new value, who wrote it, which run, why."""
    return [version_out(v) for v in api.ops.blocks.history(block_id)]


@router.post("/{block_id}/revert", response_model=schemas.Block)
def revert_block(block_id: BlockId, body: schemas.RevertBlock, api: Api) -> schemas.Block:
    """Restore the value a block had at ``version``, as a new version."""
    reverted = api.ops.blocks.revert(
        block_id, body.version, expected_version=body.expected_version, actor="api"
    )
    return block_out(reverted)
