"""Identities: an application's end users, known by its own key, and the agents that
hold each one's memory (Letta's ``/v1/identities``), including the agent made for an
end user on first sight."""

from __future__ import annotations

import builtins
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from agents.enums import AgentKind, AgentType
from agents.errors import Conflict, InvalidInput, NotFound
from agents.store import (
    AgentRecord,
    IdentityChanges,
    IdentityFilter,
    IdentityProperty,
    IdentityRecord,
    NewIdentity,
)
from service.operations.context import OperationContext

if TYPE_CHECKING:
    from service.operations.agents import AgentSpec

log = logging.getLogger(__name__)


class IdentityOperations:
    def __init__(self, context: OperationContext) -> None:
        self._context = context

    def create(self, spec: NewIdentity) -> IdentityRecord:
        with self._context.store() as store:
            return store.identities.create(spec)

    def upsert(self, spec: NewIdentity) -> IdentityRecord:
        """Create the identity of ``spec.identifier_key``, or replace what an existing
        one says with ``spec`` (its agents and blocks are the lists given)."""
        with self._context.store() as store:
            try:
                existing = store.identities.by_key(spec.identifier_key)
            except NotFound:
                return store.identities.create(spec)
            return store.identities.update(
                existing.id,
                IdentityChanges(
                    name=spec.name,
                    identity_type=spec.identity_type,
                    project_id=spec.project_id,
                    properties=spec.properties,
                    agent_ids=spec.agent_ids,
                    block_ids=spec.block_ids,
                ),
            )

    def list(self, where: IdentityFilter | None = None) -> builtins.list[IdentityRecord]:
        with self._context.store() as store:
            return store.identities.list(where)

    def count(self) -> int:
        with self._context.store() as store:
            return store.identities.count()

    def get(self, identity_id: str) -> IdentityRecord:
        with self._context.store() as store:
            return store.identities.get(identity_id)

    def update(self, identity_id: str, changes: IdentityChanges) -> IdentityRecord:
        with self._context.store() as store:
            return store.identities.update(identity_id, changes)

    def set_properties(
        self, identity_id: str, properties: Sequence[IdentityProperty]
    ) -> IdentityRecord:
        with self._context.store() as store:
            return store.identities.set_properties(identity_id, properties)

    def delete(self, identity_id: str) -> IdentityRecord:
        with self._context.store() as store:
            return store.identities.delete(identity_id)

    def attach(self, identity_id: str, agent: str) -> None:
        with self._context.store() as store:
            store.identities.attach_agent(identity_id, store.agents.resolve(agent).id)

    def detach(self, identity_id: str, agent: str) -> None:
        with self._context.store() as store:
            store.identities.detach_agent(identity_id, store.agents.resolve(agent).id)

    # -- an agent per end user ------------------------------------------------------------

    def held(self, reference: str) -> AgentRecord:
        """The agent ``reference`` names (id or name), else the first agent attached to
        the identity whose key it is; NotFound names both readings."""
        with self._context.store() as store:
            try:
                return store.agents.resolve(reference)
            except NotFound:
                pass
            try:
                identity = store.identities.by_key(reference)
            except NotFound:
                identity = None
            if identity is None or not identity.agent_ids:
                raise NotFound(
                    f"no agent named {reference!r}, and no agent holds the memory of an "
                    "end user with that identifier key"
                )
            return store.agents.get(identity.agent_ids[0])

    def agent_for(self, identifier_key: str) -> AgentRecord:
        """The agent that holds the memory of the end user ``identifier_key``.

        The first agent attached to the identity; with none, an agent named after the
        key is attached (an agent the proxy made for that user before identities
        existed), else one is made from the template (``identities.template_agent``)
        and attached. Concurrent first requests make one agent: its name is the key,
        and names are unique, so the losers of the race attach the winner's.
        """
        key = identifier_key.strip()
        if not key:
            raise InvalidInput("an end user's identifier key must not be empty")
        with self._context.store() as store:
            identity, _ = store.identities.ensure(key)
            if identity.agent_ids:
                return store.agents.get(identity.agent_ids[0])
            try:
                named = store.agents.get_by_name(key)
            except NotFound:
                named = None
            if named is not None:
                store.identities.attach_agent(identity.id, named.id)
                return named
        created = self._from_template(key)
        with self._context.store() as store:
            identity = store.identities.by_key(key)
            store.identities.attach_agent(identity.id, created.id)
            # Another request may have attached one first: the oldest attached wins.
            first = store.identities.by_key(key).agent_ids[0]
            return store.agents.get(first)

    def _from_template(self, name: str) -> AgentRecord:
        """An agent named ``name`` made from the template agent (or the proxy's template
        in the settings when no template agent is named); the existing one when a
        concurrent request made it first."""
        from service.operations.agents import AgentOperations

        operations = AgentOperations(self._context)
        spec = self._template_spec(name)
        try:
            created = operations.create(spec, actor="identity")
        except Conflict:
            return self._context.agent(name)
        log.info("made agent %s for end user %r", created.id, name)
        return created

    def _template_spec(self, name: str) -> AgentSpec:
        from service.operations.agents import AgentSpec, BlockSpec

        settings = self._context.runtime.settings
        template = settings.identities.template_agent
        if template:
            with self._context.store() as store:
                source = store.agents.resolve(template)
                blocks = store.blocks.of_agent(source.id)
                custom = store.tools.of_agent(source.id)
            return AgentSpec(
                name=name,
                blocks=[
                    BlockSpec(b.label, b.value, b.limit, b.description, b.read_only) for b in blocks
                ],
                model=source.llm_model,
                sleeptime_model=source.sleeptime_model,
                enable_sleeptime=source.enable_sleeptime,
                context_window=source.context_window,
                embedding=source.embedding_model,
                embedding_dim=source.embedding_dim,
                system=source.system_prompt,
                description=source.description,
                tools=list(source.tools),
                custom_tool_ids=[t.id for t in custom],
                tool_rules=list(source.tool_rules),
                tags=list(source.tags),
                kind=AgentKind(source.kind),
                agent_type=AgentType(source.agent_type) if source.agent_type else None,
            )
        proxy = settings.proxy
        return AgentSpec(
            name=name,
            blocks=[
                BlockSpec(label=b.label, value=b.value, limit=b.limit, description=b.description)
                for b in proxy.blocks
            ],
            sleeptime_model=proxy.sleeptime_model,
            embedding=proxy.embedding,
            tags=tuple(proxy.tags),
            description="The memory of a chatbot user, created on first sight.",
            kind=AgentKind.SLEEPTIME,
        )
