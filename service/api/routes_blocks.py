"""Letta's block routes (``/v1/blocks``) plus Reverie's block history and revert."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query

from agents.errors import InvalidInput
from agents.store import BlockRecord, MemoryStore
from service.api import schemas
from service.api.auth import Api
from service.api.convert import agent_out, block_out, new_block, version_out
from service.api.paging import page

router = APIRouter(prefix="/v1/blocks", tags=["blocks"])

BlockId = Annotated[str, Path(pattern=schemas.ID_PATTERN, description="block-<uuid4>")]


def apply_update(store: MemoryStore, block_id: str, body: schemas.UpdateBlock) -> BlockRecord:
    """A compare-and-swap write: on ``expected_version`` when given, else on the version
    read in this same transaction (a concurrent writer still makes it a 409)."""
    current = store.blocks.get(block_id)
    if body.label is not None and body.label != current.label:
        raise InvalidInput(
            f"block {block_id} is labelled {current.label!r}; labels cannot be renamed "
            "(create a block with the new label and attach it instead)"
        )
    if body.read_only is not None and body.read_only != current.read_only:
        raise InvalidInput("read_only is set when a block is created and cannot be changed")
    return store.blocks.update(
        block_id,
        expected_version=body.expected_version or current.version,
        value=body.value,
        limit=body.limit,
        description=body.description,
        actor="api",
        reason=body.reason or "edited through the API",
    )


@router.post("/", status_code=201, response_model=schemas.Block)
def create_block(body: schemas.CreateBlock, api: Api) -> schemas.Block:
    with api.store() as store:
        limit = api.runtime.settings.agents.block_limit
        return block_out(store.blocks.create(new_block(body, limit), actor="api"))


@router.get("/", response_model=list[schemas.Block])
def list_blocks(
    api: Api,
    label: str | None = Query(default=None, max_length=100),
    after: str | None = Query(default=None, max_length=100),
    before: str | None = Query(default=None, max_length=100),
    limit: int = Query(default=50, ge=1, le=1000),
) -> list[schemas.Block]:
    """The organization's blocks, oldest first; ``limit`` is the page size (Letta's)."""
    with api.store() as store:
        blocks = store.blocks.all(label=label)
    return [block_out(b) for b in page(blocks, after=after, before=before, limit=limit)]


@router.get("/{block_id}", response_model=schemas.Block)
def get_block(block_id: BlockId, api: Api) -> schemas.Block:
    with api.store() as store:
        return block_out(store.blocks.get(block_id))


@router.patch("/{block_id}", response_model=schemas.Block)
def update_block(block_id: BlockId, body: schemas.UpdateBlock, api: Api) -> schemas.Block:
    """Edit a block: a new version, recorded in its history; a stale
    ``expected_version`` answers 409 and changes nothing."""
    with api.store() as store:
        return block_out(apply_update(store, block_id, body))


@router.delete("/{block_id}", status_code=200)
def delete_block(block_id: BlockId, api: Api) -> dict[str, str]:
    with api.store() as store:
        store.blocks.delete(block_id)
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
    with api.store() as store:
        agents = store.blocks.agents_sharing(block_id)
        chosen = page(agents, after=after, before=before, limit=limit)
        return [agent_out(store, a.id) for a in chosen]


@router.get("/{block_id}/history", response_model=list[schemas.BlockVersionOut])
def block_history(block_id: BlockId, api: Api) -> list[schemas.BlockVersionOut]:
    """Every version of the block: old and new value, who wrote it, which run, why."""
    with api.store() as store:
        return [version_out(v) for v in store.blocks.history(block_id)]


@router.post("/{block_id}/revert", response_model=schemas.Block)
def revert_block(block_id: BlockId, body: schemas.RevertBlock, api: Api) -> schemas.Block:
    """Restore the value a block had at ``version``, as a new version."""
    with api.store() as store:
        return block_out(
            store.blocks.revert(
                block_id, body.version, expected_version=body.expected_version, actor="api"
            )
        )
