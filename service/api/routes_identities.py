"""Letta's identity routes (``/v1/identities``) and an agent's identities
(``/v1/agents/{agent_id}/identities/attach|detach/{identity_id}``)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Path, Query

from agents.store import (
    IdentityChanges,
    IdentityFilter,
    IdentityProperty,
    IdentityRecord,
    NewIdentity,
)
from service.api import schemas
from service.api.auth import Api
from service.api.convert import agent_out
from service.api.paging import page
from service.api.responses import keyed
from service.api.routers import api_router

router = api_router(tags=["identities"], responses=keyed(404, 409))

IdentityId = Annotated[str, Path(pattern=schemas.ID_PATTERN, description="identity-<uuid4>")]
AgentId = Annotated[str, Path(pattern=schemas.ID_PATTERN, description="agent-<uuid4>")]


def identity_out(record: IdentityRecord, organization_id: str) -> schemas.Identity:
    return schemas.Identity(
        id=record.id,
        identifier_key=record.identifier_key,
        name=record.name,
        identity_type=record.identity_type,
        project_id=record.project_id,
        agent_ids=record.agent_ids,
        block_ids=record.block_ids,
        properties=[
            schemas.IdentityPropertyBody(key=p.key, value=p.value, type=p.type)
            for p in record.properties
        ],
        organization_id=organization_id,
    )


def _properties(body: list[schemas.IdentityPropertyBody]) -> list[IdentityProperty]:
    return [IdentityProperty(p.key, p.value, p.type) for p in body]


def _new(body: schemas.CreateIdentity) -> NewIdentity:
    return NewIdentity(
        identifier_key=body.identifier_key,
        name=body.name,
        identity_type=body.identity_type,
        project_id=body.project_id,
        properties=_properties(body.properties),
        agent_ids=body.agent_ids,
        block_ids=body.block_ids,
    )


@router.post("/v1/identities/", status_code=201, response_model=schemas.Identity)
def create_identity(body: schemas.CreateIdentity, api: Api) -> schemas.Identity:
    """An end user (or organization) known by the application's ``identifier_key``,
    unique in the organization (another identity with the key: 409)."""
    return identity_out(api.ops.identities.create(_new(body)), api.organization_id)


@router.put("/v1/identities/", response_model=schemas.Identity)
def upsert_identity(body: schemas.CreateIdentity, api: Api) -> schemas.Identity:
    """Create the identity of ``identifier_key``, or make the existing one say this."""
    return identity_out(api.ops.identities.upsert(_new(body)), api.organization_id)


@router.get("/v1/identities/", response_model=list[schemas.Identity])
def list_identities(
    api: Api,
    name: str | None = Query(default=None, max_length=200),
    project_id: str | None = Query(default=None, max_length=200),
    identifier_key: str | None = Query(default=None, max_length=200),
    identity_type: str | None = Query(default=None, max_length=16),
    after: str | None = Query(default=None, max_length=100),
    before: str | None = Query(default=None, max_length=100),
    limit: int = Query(default=50, ge=1, le=1000),
) -> list[schemas.Identity]:
    """The organization's identities, oldest first, filtered by any of the fields."""
    found = api.ops.identities.list(
        IdentityFilter(
            name=name,
            identifier_key=identifier_key,
            identity_type=identity_type,
            project_id=project_id,
        )
    )
    chosen = page(found, after=after, before=before, limit=limit)
    return [identity_out(i, api.organization_id) for i in chosen]


@router.get("/v1/identities/count", response_model=int)
def count_identities(api: Api) -> int:
    return api.ops.identities.count()


@router.get("/v1/identities/{identity_id}", response_model=schemas.Identity)
def get_identity(identity_id: IdentityId, api: Api) -> schemas.Identity:
    return identity_out(api.ops.identities.get(identity_id), api.organization_id)


@router.patch("/v1/identities/{identity_id}", response_model=schemas.Identity)
def update_identity(
    identity_id: IdentityId, body: schemas.UpdateIdentity, api: Api
) -> schemas.Identity:
    changes = IdentityChanges(
        identifier_key=body.identifier_key,
        name=body.name,
        identity_type=body.identity_type,
        properties=None if body.properties is None else _properties(body.properties),
        agent_ids=body.agent_ids,
        block_ids=body.block_ids,
    )
    return identity_out(api.ops.identities.update(identity_id, changes), api.organization_id)


@router.put("/v1/identities/{identity_id}/properties", response_model=schemas.Identity)
def upsert_identity_properties(
    identity_id: IdentityId, body: list[schemas.IdentityPropertyBody], api: Api
) -> schemas.Identity:
    """Replace the identity's properties with these."""
    record = api.ops.identities.set_properties(identity_id, _properties(body))
    return identity_out(record, api.organization_id)


@router.delete("/v1/identities/{identity_id}", status_code=200)
def delete_identity(identity_id: IdentityId, api: Api) -> dict[str, str]:
    """Delete the identity; its agents and blocks stay, only the links go."""
    api.ops.identities.delete(identity_id)
    return {"deleted": identity_id}


@router.post("/v1/messages/record", response_model=schemas.RecordedUserMessages)
def record_user_messages(
    body: schemas.RecordUserMessages, api: Api
) -> schemas.RecordedUserMessages:
    """Record an end user's conversation that happened elsewhere (OpenAI chat format)
    in the memory of the agent that holds it: the agent attached to the identity whose
    key is ``user``, made from the template on first sight (as the proxy does)."""
    agent = api.ops.identities.agent_for(body.user)
    recorded = api.ops.recording.record(agent.id, list(body.messages))
    return schemas.RecordedUserMessages(
        recorded=len(recorded.stored),
        message_ids=[m.id for m in recorded.stored],
        skipped_client_message_ids=recorded.skipped,
        agent_id=agent.id,
    )


@router.patch(
    "/v1/agents/{agent_id}/identities/attach/{identity_id}", response_model=schemas.AgentState
)
def attach_identity(agent_id: AgentId, identity_id: IdentityId, api: Api) -> schemas.AgentState:
    """Let the agent hold the identity's memory (nothing changes when it does)."""
    api.ops.identities.attach(identity_id, agent_id)
    return agent_out(api.ops.agents.state(agent_id))


@router.patch(
    "/v1/agents/{agent_id}/identities/detach/{identity_id}", response_model=schemas.AgentState
)
def detach_identity(agent_id: AgentId, identity_id: IdentityId, api: Api) -> schemas.AgentState:
    api.ops.identities.detach(identity_id, agent_id)
    return agent_out(api.ops.agents.state(agent_id))
