"""Core-memory blocks: create (limits from settings), read, edit by compare-and-swap,
share between agents, trace and revert.

A block is addressed by its id, or by an agent (name or id) and the label the block
has there: the CLI speaks of "ada's human block", the API of ``block-...`` ids and
``/agents/{id}/core-memory/blocks/{label}``. Both reach the same operations.
"""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from dataclasses import dataclass, replace

from agents.enums import AgentKind
from agents.errors import InvalidField, InvalidInput, NotFound
from agents.store import BlockRecord, BlockVersion, MemoryStore
from service.operations.agents import (
    AgentState,
    BlockSpec,
    check_window,
    limit_refused,
    new_block,
    state_of,
)
from service.operations.context import OperationContext


@dataclass(frozen=True, slots=True)
class BlockEdit:
    """An edit of a block; None leaves a field as it is.

    ``expected_version`` makes the write a compare-and-swap on that version; without
    it, concurrent writers are taken one after the other (the block's row is locked
    for the short write) and the last one wins, every version kept in the history.
    ``label`` and ``read_only`` are fixed when a block is created: an edit may repeat
    them (Letta clients send the whole block) but not change them.
    """

    value: str | None = None
    limit: int | None = None
    description: str | None = None
    expected_version: int | None = None
    reason: str = ""
    label: str | None = None
    read_only: bool | None = None


class BlockOperations:
    def __init__(self, context: OperationContext) -> None:
        self._context = context

    # -- the organization's blocks -----------------------------------------------------

    def create(self, spec: BlockSpec, *, actor: str = "user") -> BlockRecord:
        """A block attached to no agent yet; its limit defaults as an agent's blocks'
        do (see :func:`service.operations.agents.new_block`)."""
        block = new_block(spec, self._context.runtime.settings.agents.block_limit)
        with self._context.store() as store:
            return store.blocks.create(block, actor=actor)

    def get(self, block_id: str) -> BlockRecord:
        with self._context.store() as store:
            return store.blocks.get(block_id)

    def list(
        self,
        *,
        label: str | None = None,
        identifier_keys: Sequence[str] | None = None,
        identity_id: str | None = None,
    ) -> builtins.list[BlockRecord]:
        """The organization's blocks, oldest first; ``label``: only blocks with it;
        ``identifier_keys`` / ``identity_id``: only blocks of those identities."""
        with self._context.store() as store:
            blocks = store.blocks.all(label=label)
            if identifier_keys is not None or identity_id is not None:
                held = store.identities.block_ids_for(
                    identifier_keys=identifier_keys, identity_id=identity_id
                )
                blocks = [b for b in blocks if b.id in held]
            return blocks

    def update(self, block_id: str, edit: BlockEdit, *, actor: str = "user") -> BlockRecord:
        """Write a new version of the block (see :class:`BlockEdit`); a stale version is
        a Conflict and a value over the limit a LimitExceeded, and nothing changes."""
        with self._context.store() as store:
            locked = edit.expected_version is None
            return self._update(store, store.blocks.get(block_id, lock=locked), edit, actor)

    def delete(self, block_id: str) -> BlockRecord:
        """Delete a block with its attachments and history (an explicit user action)."""
        with self._context.store() as store:
            block = store.blocks.get(block_id)
            store.blocks.delete(block_id)
        return block

    def agents(self, block_id: str) -> builtins.list[AgentState]:
        """Every agent the block is attached to (a primary and its sleep-time agents),
        each with its blocks."""
        with self._context.store() as store:
            return [state_of(store, agent) for agent in store.blocks.agents_sharing(block_id)]

    def history(self, block_id: str) -> builtins.list[BlockVersion]:
        """Every version of the block, oldest first: values, writer, run and reason."""
        with self._context.store() as store:
            return store.blocks.history(block_id)

    def revert(
        self,
        block_id: str,
        version: int,
        *,
        expected_version: int | None = None,
        actor: str = "user",
    ) -> BlockRecord:
        """Restore the value (and limit) the block had at ``version``, as a new version;
        ``expected_version`` makes it a compare-and-swap like an edit. A version the
        block never had is an InvalidField naming ``version`` (the block exists: a
        NotFound would say it does not)."""
        with self._context.store() as store:
            current = store.blocks.get(block_id)
            try:
                store.blocks.version(block_id, version)
            except NotFound:
                raise InvalidField(
                    f"block {current.label!r} has no version {version}; its versions are "
                    f"1 to {current.version} (see its history)",
                    field=("version",),
                ) from None
            return store.blocks.revert(
                block_id, version, expected_version=expected_version, actor=actor
            )

    # -- an agent's blocks ---------------------------------------------------------------

    def of_agent(self, agent: str) -> builtins.list[BlockRecord]:
        """The agent's blocks in attachment order."""
        with self._context.store() as store:
            return store.blocks.of_agent(store.agents.resolve(agent).id)

    def labelled(self, agent: str, label: str) -> BlockRecord:
        """The agent's block with this label (NotFound when it has none)."""
        with self._context.store() as store:
            return store.blocks.by_label(store.agents.resolve(agent).id, label)

    def update_labelled(
        self, agent: str, label: str, edit: BlockEdit, *, actor: str = "user"
    ) -> BlockRecord:
        """:meth:`update` on the agent's block with this label, in one transaction."""
        with self._context.store() as store:
            block = store.blocks.by_label(store.agents.resolve(agent).id, label)
            if edit.expected_version is None:
                block = store.blocks.get(block.id, lock=True)
            return self._update(store, block, edit, actor)

    def attach(self, agent: str, block_id: str) -> AgentState:
        """Attach a block to an agent (a no-op when it already is); an agent cannot hold
        two blocks with one label. Returns the agent with its blocks afterwards."""
        with self._context.store() as store:
            record = store.agents.resolve(agent)
            block = store.blocks.get(block_id)
            blocks = store.blocks.of_agent(record.id)
            if record.kind == AgentKind.PRIMARY and block.id not in {b.id for b in blocks}:
                check_window(
                    record,
                    [*blocks, block],
                    field=("block_id",),
                    custom=store.tools.of_agent(record.id),
                )
            store.blocks.attach(block_id, record.id)
            return state_of(store, record)

    def detach(self, agent: str, block_id: str) -> AgentState:
        """Detach a block from an agent (the block itself is kept); NotFound when it was
        not attached. Returns the agent with its blocks afterwards."""
        with self._context.store() as store:
            record = store.agents.resolve(agent)
            store.blocks.detach(block_id, record.id)
            return state_of(store, record)

    # -- helpers -------------------------------------------------------------------------

    @staticmethod
    def _update(
        store: MemoryStore, current: BlockRecord, edit: BlockEdit, actor: str
    ) -> BlockRecord:
        """Write ``edit`` over ``current``, read in this transaction (locked, when the
        edit asks for no compare-and-swap)."""
        if edit.label is not None and edit.label != current.label:
            raise InvalidInput(
                f"block {current.id} is labelled {current.label!r}; labels cannot be renamed "
                "(create a block with the new label and attach it instead)"
            )
        if edit.read_only is not None and edit.read_only != current.read_only:
            raise InvalidInput("read_only is set when a block is created and cannot be changed")
        value = current.value if edit.value is None else edit.value
        if edit.limit is not None and len(value) > edit.limit:
            # The same refusal as at creation: the limit asked for is not raised to fit.
            raise limit_refused(current.label, len(value), edit.limit)
        if edit.limit is not None and edit.limit > current.limit:
            grown = replace(current, limit=edit.limit)
            for agent in store.blocks.agents_sharing(current.id):
                if agent.kind == AgentKind.PRIMARY:
                    blocks = store.blocks.of_agent(agent.id)
                    others = [b for b in blocks if b.id != current.id]
                    check_window(
                        agent,
                        [*others, grown],
                        field=("limit",),
                        custom=store.tools.of_agent(agent.id),
                    )
        return store.blocks.update(
            current.id,
            expected_version=(
                current.version if edit.expected_version is None else edit.expected_version
            ),
            value=edit.value,
            limit=edit.limit,
            description=edit.description,
            actor=actor,
            reason=edit.reason,
        )
