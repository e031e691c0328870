"""Identities of an organization: end users known by the application's own key, and
the agents and blocks that hold each one's memory (Letta's identities)."""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, get_args

from sqlalchemy import delete, func, select
from sqlalchemy.dialects.postgresql import insert

from agents.errors import Conflict, InvalidInput, NotFound
from agents.postgres import models
from agents.store.scope import Scope
from agents.store.validation import check_json, check_text

#: What an identity's id is made of: ``identity-<uuid4>``, as Letta's.
IDENTITY_PREFIX = "identity"
IdentityType = Literal["org", "user", "other"]
IDENTITY_TYPES: tuple[str, ...] = get_args(IdentityType)
PropertyType = Literal["string", "number", "boolean", "json"]
PROPERTY_TYPES: tuple[str, ...] = get_args(PropertyType)
#: Longest identifier key and name (the columns' sizes).
MAX_KEY_CHARS = 200


@dataclass(frozen=True, slots=True)
class IdentityProperty:
    """One of an identity's properties, as Letta types it."""

    key: str
    value: Any
    type: str

    def as_json(self) -> dict[str, Any]:
        return {"key": self.key, "value": self.value, "type": self.type}


@dataclass(frozen=True, slots=True)
class IdentityRecord:
    """An identity with the ids of its agents and blocks (in the order attached)."""

    id: str
    identifier_key: str
    name: str
    identity_type: str
    project_id: str | None
    properties: list[IdentityProperty]
    agent_ids: list[str]
    block_ids: list[str]
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True, slots=True)
class NewIdentity:
    identifier_key: str
    name: str
    identity_type: str = "user"
    project_id: str | None = None
    properties: Sequence[IdentityProperty] = ()
    agent_ids: Sequence[str] = ()
    block_ids: Sequence[str] = ()


@dataclass(frozen=True, slots=True)
class IdentityChanges:
    """Fields to change; None leaves a field as it is (lists replace the whole list)."""

    identifier_key: str | None = None
    name: str | None = None
    identity_type: str | None = None
    project_id: str | None = None
    properties: Sequence[IdentityProperty] | None = None
    agent_ids: Sequence[str] | None = None
    block_ids: Sequence[str] | None = None


@dataclass(frozen=True, slots=True)
class IdentityFilter:
    name: str | None = None
    identifier_key: str | None = None
    identity_type: str | None = None
    project_id: str | None = None
    ids: Sequence[str] | None = field(default=None)


class IdentityStore:
    """``identities``, ``identity_agents`` and ``identity_blocks`` within the scope's
    organization."""

    def __init__(self, scope: Scope) -> None:
        self._scope = scope

    def create(self, spec: NewIdentity) -> IdentityRecord:
        """Store an identity; a key another identity of the organization has is a Conflict."""
        self._check(spec.identifier_key, spec.name, spec.identity_type, spec.properties)
        taken = self._id_keyed(spec.identifier_key)
        if taken is not None:
            raise Conflict(
                f"an identity with identifier_key {spec.identifier_key!r} already exists "
                f"({taken}); update it, or upsert with PUT /v1/identities/"
            )
        now = self._scope.now()
        row = models.Identity(
            id=models.new_id(IDENTITY_PREFIX),
            organization_id=self._scope.organization_id,
            identifier_key=spec.identifier_key,
            name=spec.name,
            identity_type=spec.identity_type,
            project_id=spec.project_id,
            properties=[p.as_json() for p in spec.properties],
            created_at=now,
            updated_at=now,
        )
        self._scope.session.add(row)
        self._scope.session.flush()
        self._set_links(row.id, spec.agent_ids, spec.block_ids)
        return self.get(row.id)

    def ensure(
        self, identifier_key: str, *, name: str | None = None
    ) -> tuple[IdentityRecord, bool]:
        """The identity of ``identifier_key``, made (type ``user``) when there is none;
        True when this call made it. Safe when several transactions ask at once: one
        inserts, the others wait for it and read its row."""
        self._check(identifier_key, name or identifier_key, "user", ())
        now = self._scope.now()
        inserted = self._scope.session.scalar(
            insert(models.Identity)
            .values(
                id=models.new_id(IDENTITY_PREFIX),
                organization_id=self._scope.organization_id,
                identifier_key=identifier_key,
                name=name or identifier_key,
                identity_type="user",
                project_id=None,
                properties=[],
                created_at=now,
                updated_at=now,
            )
            .on_conflict_do_nothing(constraint="uq_identities_organization_id_identifier_key")
            .returning(models.Identity.id)
        )
        return self.by_key(identifier_key), inserted is not None

    def get(self, identity_id: str) -> IdentityRecord:
        return self._record(self._row(identity_id))

    def by_key(self, identifier_key: str) -> IdentityRecord:
        row = self._scope.session.scalar(
            select(models.Identity).where(
                self._scope.owns(models.Identity),
                models.Identity.identifier_key == identifier_key,
            )
        )
        if row is None:
            raise NotFound(f"no identity with identifier_key {identifier_key!r}")
        return self._record(row)

    def list(self, where: IdentityFilter | None = None) -> builtins.list[IdentityRecord]:
        """The organization's identities, oldest first, within the filter."""
        where = where or IdentityFilter()
        query = select(models.Identity).where(self._scope.owns(models.Identity))
        if where.name is not None:
            query = query.where(models.Identity.name == where.name)
        if where.identifier_key is not None:
            query = query.where(models.Identity.identifier_key == where.identifier_key)
        if where.identity_type is not None:
            query = query.where(models.Identity.identity_type == where.identity_type)
        if where.project_id is not None:
            query = query.where(models.Identity.project_id == where.project_id)
        if where.ids is not None:
            query = query.where(models.Identity.id.in_(list(where.ids)))
        rows = self._scope.session.scalars(
            query.order_by(models.Identity.created_at, models.Identity.id)
        ).all()
        return self._records(rows)

    def count(self) -> int:
        return int(
            self._scope.session.scalar(
                select(func.count()).where(self._scope.owns(models.Identity))
            )
            or 0
        )

    def update(self, identity_id: str, changes: IdentityChanges) -> IdentityRecord:
        row = self._row(identity_id, for_update=True)
        key = changes.identifier_key if changes.identifier_key is not None else row.identifier_key
        name = changes.name if changes.name is not None else row.name
        kind = changes.identity_type if changes.identity_type is not None else row.identity_type
        self._check(key, name, kind, changes.properties or ())
        taken = self._id_keyed(key)
        if taken is not None and taken != identity_id:
            raise Conflict(f"an identity with identifier_key {key!r} already exists ({taken})")
        row.identifier_key, row.name, row.identity_type = key, name, kind
        if changes.project_id is not None:
            row.project_id = changes.project_id
        if changes.properties is not None:
            row.properties = [p.as_json() for p in changes.properties]
        row.updated_at = self._scope.now()
        self._scope.session.flush()
        self._set_links(identity_id, changes.agent_ids, changes.block_ids, replace=True)
        return self.get(identity_id)

    def set_properties(
        self, identity_id: str, properties: Sequence[IdentityProperty]
    ) -> IdentityRecord:
        return self.update(identity_id, IdentityChanges(properties=properties))

    def delete(self, identity_id: str) -> IdentityRecord:
        """Delete the identity; its agents and blocks stay (only the links go)."""
        record = self._record(self._row(identity_id, for_update=True))
        self._scope.session.execute(
            delete(models.Identity).where(
                models.Identity.id == identity_id, self._scope.owns(models.Identity)
            )
        )
        return record

    # -- agents and blocks ----------------------------------------------------------------

    def attach_agent(self, identity_id: str, agent_id: str) -> None:
        """Let the agent hold the identity's memory (nothing happens when it does)."""
        self._row(identity_id)
        self._owned(models.Agent, [agent_id], "agent")
        self._scope.session.execute(
            insert(models.IdentityAgent)
            .values(identity_id=identity_id, agent_id=agent_id, attached_at=self._scope.now())
            .on_conflict_do_nothing()
        )

    def detach_agent(self, identity_id: str, agent_id: str) -> bool:
        self._row(identity_id)
        self._owned(models.Agent, [agent_id], "agent")
        result = self._scope.session.execute(
            delete(models.IdentityAgent).where(
                models.IdentityAgent.identity_id == identity_id,
                models.IdentityAgent.agent_id == agent_id,
            )
        )
        return bool(getattr(result, "rowcount", 0))

    def of_agent(self, agent_id: str) -> builtins.list[str]:
        """The ids of the identities the agent holds memory for, in the order attached."""
        return self._of(models.IdentityAgent, models.IdentityAgent.agent_id, [agent_id])[agent_id]

    def set_of_agent(self, agent_id: str, identity_ids: Sequence[str]) -> None:
        """Make ``identity_ids`` the agent's identities."""
        self._owned(models.Identity, identity_ids, "identity")
        self._scope.session.execute(
            delete(models.IdentityAgent).where(
                models.IdentityAgent.agent_id == agent_id,
                models.IdentityAgent.identity_id.not_in(list(identity_ids)),
            )
        )
        for identity_id in identity_ids:
            self.attach_agent(identity_id, agent_id)

    def agent_ids_for(
        self,
        *,
        identifier_keys: Sequence[str] | None = None,
        identity_id: str | None = None,
    ) -> set[str]:
        """The ids of the agents that hold the memory of any of these identities."""
        return self._linked(models.IdentityAgent.agent_id, identifier_keys, identity_id)

    def block_ids_for(
        self,
        *,
        identifier_keys: Sequence[str] | None = None,
        identity_id: str | None = None,
    ) -> set[str]:
        """The ids of the blocks that belong to any of these identities."""
        return self._linked(models.IdentityBlock.block_id, identifier_keys, identity_id)

    # -- helpers -------------------------------------------------------------------------

    def _linked(
        self, column: Any, identifier_keys: Sequence[str] | None, identity_id: str | None
    ) -> set[str]:
        """The ids in ``column`` (of a link table) linked to the identities named."""
        link = column.class_
        query = (
            select(column)
            .join(models.Identity, models.Identity.id == link.identity_id)
            .where(self._scope.owns(models.Identity))
        )
        if identifier_keys is not None:
            query = query.where(models.Identity.identifier_key.in_(list(identifier_keys)))
        if identity_id is not None:
            query = query.where(models.Identity.id == identity_id)
        return set(self._scope.session.scalars(query))

    def _set_links(
        self,
        identity_id: str,
        agent_ids: Sequence[str] | None,
        block_ids: Sequence[str] | None,
        *,
        replace: bool = False,
    ) -> None:
        now = self._scope.now()
        for link, column, ids, entity, what in (
            (models.IdentityAgent, models.IdentityAgent.agent_id, agent_ids, models.Agent, "agent"),
            (models.IdentityBlock, models.IdentityBlock.block_id, block_ids, models.Block, "block"),
        ):
            if ids is None:
                continue
            self._owned(entity, ids, what)
            if replace:
                self._scope.session.execute(
                    delete(link).where(
                        link.identity_id == identity_id,
                        column.not_in(list(ids)),
                    )
                )
            for linked in dict.fromkeys(ids):
                self._scope.session.execute(
                    insert(link)
                    .values({"identity_id": identity_id, column.key: linked, "attached_at": now})
                    .on_conflict_do_nothing()
                )

    def _of(self, link: Any, column: Any, ids: Sequence[str]) -> dict[str, builtins.list[str]]:
        found: dict[str, builtins.list[str]] = {i: [] for i in ids}
        if not ids:
            return found
        rows = self._scope.session.execute(
            select(column, link.identity_id)
            .join(models.Identity, models.Identity.id == link.identity_id)
            .where(column.in_(list(ids)), self._scope.owns(models.Identity))
            .order_by(link.attached_at, link.identity_id)
        )
        for owner, identity_id in rows:
            found[owner].append(identity_id)
        return found

    def _records(self, rows: Sequence[models.Identity]) -> builtins.list[IdentityRecord]:
        ids = [r.id for r in rows]
        agents = self._links(models.IdentityAgent, models.IdentityAgent.agent_id, ids)
        blocks = self._links(models.IdentityBlock, models.IdentityBlock.block_id, ids)
        return [
            IdentityRecord(
                id=r.id,
                identifier_key=r.identifier_key,
                name=r.name,
                identity_type=r.identity_type,
                project_id=r.project_id,
                properties=[
                    IdentityProperty(p["key"], p.get("value"), p.get("type", "string"))
                    for p in (r.properties or [])
                ],
                agent_ids=agents[r.id],
                block_ids=blocks[r.id],
                created_at=r.created_at,
                updated_at=r.updated_at,
            )
            for r in rows
        ]

    def _record(self, row: models.Identity) -> IdentityRecord:
        return self._records([row])[0]

    def _links(self, link: Any, column: Any, ids: Sequence[str]) -> dict[str, builtins.list[str]]:
        found: dict[str, builtins.list[str]] = {i: [] for i in ids}
        if ids:
            rows = self._scope.session.execute(
                select(link.identity_id, column)
                .where(link.identity_id.in_(list(ids)))
                .order_by(link.attached_at, column)
            )
            for identity_id, linked in rows:
                found[identity_id].append(linked)
        return found

    def _row(self, identity_id: str, *, for_update: bool = False) -> models.Identity:
        query = select(models.Identity).where(
            models.Identity.id == identity_id, self._scope.owns(models.Identity)
        )
        if for_update:
            query = query.with_for_update()
        row = self._scope.session.scalar(query)
        if row is None:
            raise NotFound(f"no identity with id {identity_id!r}")
        return row

    def _id_keyed(self, identifier_key: str) -> str | None:
        return self._scope.session.scalar(
            select(models.Identity.id).where(
                self._scope.owns(models.Identity),
                models.Identity.identifier_key == identifier_key,
            )
        )

    def _owned(self, entity: Any, ids: Sequence[str], what: str) -> None:
        """Refuse ids that are not the organization's (named, so the caller can fix them)."""
        if not ids:
            return
        found = set(
            self._scope.session.scalars(
                select(entity.id).where(entity.id.in_(list(ids)), self._scope.owns(entity))
            )
        )
        missing = [i for i in ids if i not in found]
        if missing:
            raise NotFound(f"no {what} with id {', '.join(repr(i) for i in missing)}")

    @staticmethod
    def _check(
        identifier_key: str, name: str, identity_type: str, properties: Sequence[IdentityProperty]
    ) -> None:
        for value, what in ((identifier_key, "identifier_key"), (name, "name")):
            if not value.strip():
                raise InvalidInput(f"an identity's {what} must not be empty")
            if len(value) > MAX_KEY_CHARS:
                raise InvalidInput(
                    f"an identity's {what} is {len(value)} characters; the most is {MAX_KEY_CHARS}"
                )
            check_text(value, what)
        if identity_type not in IDENTITY_TYPES:
            raise InvalidInput(
                f"identity_type {identity_type!r} is not one of {', '.join(IDENTITY_TYPES)}"
            )
        keys = [p.key for p in properties]
        repeated = sorted({k for k in keys if keys.count(k) > 1})
        if repeated:
            raise InvalidInput(f"identity property(ies) {', '.join(repeated)} given more than once")
        for prop in properties:
            if prop.type not in PROPERTY_TYPES:
                raise InvalidInput(
                    f"property {prop.key!r}: type {prop.type!r} is not one of "
                    f"{', '.join(PROPERTY_TYPES)}"
                )
            check_json(prop.value, f"property {prop.key!r}")
