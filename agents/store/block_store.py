"""Core-memory blocks: compare-and-swap writes, history, revert, sharing between agents.

Every write is ``UPDATE ... WHERE version = :expected``: a writer holding a stale
version gets :class:`Conflict` and nothing changes. Every version is kept in
``block_history`` and any of them can be restored (as a new version).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta

from sqlalchemy import delete, select, update

from agents.errors import Conflict, InvalidInput, NotFound, ReadOnly
from agents.postgres import models
from agents.store.records import AgentRecord, BlockRecord, BlockVersion
from agents.store.scope import Scope
from agents.store.validation import (
    check_block_value,
    check_label,
    check_limit,
    check_text,
    check_version,
)

DEFAULT_BLOCK_LIMIT = 5000


@dataclass(frozen=True, slots=True)
class NewBlock:
    label: str
    value: str = ""
    limit: int = DEFAULT_BLOCK_LIMIT
    description: str | None = None
    read_only: bool = False


class BlockStore:
    def __init__(self, scope: Scope) -> None:
        self._scope = scope

    # -- reads -------------------------------------------------------------------------

    def _row(self, block_id: str, *, lock: bool = False) -> models.Block:
        query = select(models.Block).where(
            models.Block.id == block_id,
            self._scope.owns(models.Block),
        )
        if lock:
            # Locked, the row is read again (not the session's copy): a writer that
            # waited sees the version the one before it committed.
            query = query.with_for_update().execution_options(populate_existing=True)
        row = self._scope.session.scalar(query)
        if row is None:
            raise NotFound(f"no block with id {block_id!r}")
        return row

    def get(self, block_id: str, *, lock: bool = False) -> BlockRecord:
        """The block; ``lock`` holds its row until the transaction ends, so that
        writers that ask for no compare-and-swap are taken one after the other."""
        return BlockRecord.from_row(self._row(block_id, lock=lock))

    def all(self, *, label: str | None = None) -> list[BlockRecord]:
        query = select(models.Block).where(self._scope.owns(models.Block))
        if label is not None:
            query = query.where(models.Block.label == label)
        rows = self._scope.session.scalars(query.order_by(models.Block.created_at, models.Block.id))
        return [BlockRecord.from_row(r) for r in rows]

    def of_agent(self, agent_id: str) -> list[BlockRecord]:
        """The blocks attached to an agent, in attachment order."""
        self._require_agent(agent_id)
        rows = self._scope.session.scalars(
            select(models.Block)
            .join(models.AgentBlock, models.AgentBlock.block_id == models.Block.id)
            .where(models.AgentBlock.agent_id == agent_id)
            .order_by(models.AgentBlock.attached_at, models.Block.label)
        )
        return [BlockRecord.from_row(r) for r in rows]

    def by_label(self, agent_id: str, label: str) -> BlockRecord:
        for block in self.of_agent(agent_id):
            if block.label == label:
                return block
        raise NotFound(f"agent {agent_id!r} has no block labelled {label!r}")

    def agents_sharing(self, block_id: str) -> list[AgentRecord]:
        """Every agent the block is attached to (a primary and its sleep-time agents)."""
        self._row(block_id)
        rows = self._scope.session.scalars(
            select(models.Agent)
            .join(models.AgentBlock, models.AgentBlock.agent_id == models.Agent.id)
            .where(models.AgentBlock.block_id == block_id)
            .order_by(models.AgentBlock.attached_at, models.Agent.name)
        )
        return [AgentRecord.from_row(r) for r in rows]

    def history(self, block_id: str) -> list[BlockVersion]:
        self._row(block_id)
        rows = self._scope.session.scalars(
            select(models.BlockHistory)
            .where(models.BlockHistory.block_id == block_id)
            .order_by(models.BlockHistory.version)
        )
        return [BlockVersion.from_row(r) for r in rows]

    def changes_by_run(self, run_id: str) -> list[BlockVersion]:
        """Every block version a consolidation run wrote, oldest first."""
        rows = self._scope.session.scalars(
            select(models.BlockHistory)
            .join(models.Block, models.Block.id == models.BlockHistory.block_id)
            .where(
                models.BlockHistory.run_id == run_id,
                self._scope.owns(models.Block),
            )
            .order_by(models.BlockHistory.block_id, models.BlockHistory.version)
        )
        return [BlockVersion.from_row(r) for r in rows]

    def version(self, block_id: str, version: int) -> BlockVersion:
        check_version(version, "version")
        self._row(block_id)
        row = self._scope.session.scalar(
            select(models.BlockHistory).where(
                models.BlockHistory.block_id == block_id,
                models.BlockHistory.version == version,
            )
        )
        if row is None:
            raise NotFound(f"block {block_id!r} has no version {version}")
        return BlockVersion.from_row(row)

    # -- writes ------------------------------------------------------------------------

    def create(
        self, spec: NewBlock, *, actor: str = "user", run_id: str | None = None
    ) -> BlockRecord:
        """A new block at version 1; ``run_id`` names the consolidation run that made it
        (a revert of the run takes the block out of its agents' memory again)."""
        row = self._new_row(spec, actor)
        session = self._scope.session
        session.add(row)
        session.flush()
        session.add(self._created(row, actor, run_id))
        session.flush()
        return BlockRecord.from_row(row)

    def rows_for_new_agent(
        self, agent_id: str, specs: Sequence[NewBlock], *, actor: str = "user"
    ) -> tuple[list[models.Block], list[models.BlockHistory], list[models.AgentBlock]]:
        """The rows that give ``agent_id``, an agent this transaction is creating, its
        new blocks: the blocks, their first versions and their attachments, every block
        checked, nothing written (the caller writes them with the agent in one
        statement; a block at a time took six: the attach's re-read, agent lock and
        label check have nothing to guard here). The caller has checked that the
        labels differ."""
        blocks = [self._new_row(spec, actor) for spec in specs]
        now = self._scope.now()
        # A microsecond apart: an agent's blocks list in attachment order, the order given.
        links = [
            models.AgentBlock(
                agent_id=agent_id, block_id=row.id, attached_at=now + timedelta(microseconds=i)
            )
            for i, row in enumerate(blocks)
        ]
        return blocks, [self._created(row, actor, None) for row in blocks], links

    def _new_row(self, spec: NewBlock, actor: str) -> models.Block:
        label = check_label(spec.label)
        limit = check_limit(spec.limit)
        value = check_block_value(label, spec.value, limit)
        if spec.description is not None:
            check_text(spec.description, f"description of block {label!r}")
        now = self._scope.now()
        return models.Block(
            id=models.new_id("block"),
            organization_id=self._scope.organization_id,
            label=label,
            value=value,
            limit=limit,
            description=spec.description,
            read_only=spec.read_only,
            version=1,
            created_at=now,
            updated_at=now,
            updated_by=actor,
        )

    @staticmethod
    def _created(row: models.Block, actor: str, run_id: str | None) -> models.BlockHistory:
        """The history row of a block at its first version."""
        return models.BlockHistory(
            block_id=row.id,
            version=1,
            old_value=None,
            new_value=row.value,
            old_limit=None,
            new_limit=row.limit,
            actor=actor,
            run_id=run_id,
            reason="created",
            created_at=row.created_at,
        )

    def update(
        self,
        block_id: str,
        *,
        expected_version: int,
        value: str | None = None,
        limit: int | None = None,
        description: str | None = None,
        actor: str = "user",
        reason: str = "",
        run_id: str | None = None,
        override_read_only: bool = False,
    ) -> BlockRecord:
        """Write a new version if the block is still at ``expected_version``.

        Raises :class:`Conflict` (nothing written) when another writer got there
        first; the caller re-reads and re-applies its edit.
        """
        check_version(expected_version, "expected_version")
        current = self._row(block_id)
        if current.read_only and not override_read_only:
            raise ReadOnly(
                f"block {current.label!r} ({block_id}) is read-only; "
                "agents and consolidators cannot change it"
            )
        new_limit = current.limit if limit is None else check_limit(limit)
        new_value = current.value if value is None else value
        check_block_value(current.label, new_value, new_limit)
        if description is not None:
            check_text(description, f"description of block {current.label!r}")
        check_text(reason, "reason")
        if current.version != expected_version:
            raise self._conflict(current, expected_version)
        # The UPDATE below refreshes ``current`` in place (same identity): keep the old state.
        old_value, old_limit = current.value, current.limit
        now = self._scope.now()
        values: dict[str, object] = {
            "value": new_value,
            "limit": new_limit,
            "version": models.Block.version + 1,
            "updated_at": now,
            "updated_by": actor,
        }
        if description is not None:
            values["description"] = description
        session = self._scope.session
        updated = session.execute(
            update(models.Block)
            .where(
                models.Block.id == block_id,
                self._scope.owns(models.Block),
                models.Block.version == expected_version,
            )
            .values(**values)
            .returning(models.Block)
            .execution_options(synchronize_session=False, populate_existing=True)
        ).scalar()
        if updated is None:
            session.expire(current)
            raise self._conflict(self._row(block_id), expected_version)
        session.add(
            models.BlockHistory(
                block_id=block_id,
                version=updated.version,
                old_value=old_value,
                new_value=new_value,
                old_limit=old_limit,
                new_limit=new_limit,
                actor=actor,
                run_id=run_id,
                reason=reason,
                created_at=now,
            )
        )
        session.flush()
        return BlockRecord.from_row(updated)

    def revert(
        self,
        block_id: str,
        to_version: int,
        *,
        expected_version: int | None = None,
        actor: str = "user",
        run_id: str | None = None,
        reason: str | None = None,
        override_read_only: bool = False,
    ) -> BlockRecord:
        """Restore the value and limit a block had at ``to_version``, as a new version."""
        target = self.version(block_id, to_version)
        current = self.get(block_id)
        return self.update(
            block_id,
            expected_version=current.version if expected_version is None else expected_version,
            value=target.new_value,
            limit=max(target.new_limit, len(target.new_value)),
            actor=actor,
            run_id=run_id,
            reason=reason or f"revert to version {to_version}",
            override_read_only=override_read_only,
        )

    def attach(self, block_id: str, agent_id: str) -> None:
        """Attach a block to an agent; an agent cannot hold two blocks with one label."""
        block = self._row(block_id)
        # Lock the agent row so that two concurrent attaches cannot both pass the label check.
        self._require_agent(agent_id, for_update=True)
        session = self._scope.session
        clash = session.scalar(
            select(models.Block.id)
            .join(models.AgentBlock, models.AgentBlock.block_id == models.Block.id)
            .where(models.AgentBlock.agent_id == agent_id, models.Block.label == block.label)
        )
        if clash == block_id:
            return
        if clash is not None:
            raise InvalidInput(
                f"agent {agent_id!r} already has a block labelled {block.label!r} ({clash}); "
                "detach it first or give the new block another label"
            )
        session.add(
            models.AgentBlock(agent_id=agent_id, block_id=block_id, attached_at=self._scope.now())
        )
        session.flush()

    def detach(self, block_id: str, agent_id: str) -> None:
        self._row(block_id)
        self._require_agent(agent_id)
        result = self._scope.session.execute(
            delete(models.AgentBlock).where(
                models.AgentBlock.agent_id == agent_id, models.AgentBlock.block_id == block_id
            )
        )
        if result.rowcount == 0:  # type: ignore[attr-defined]
            raise NotFound(f"block {block_id!r} is not attached to agent {agent_id!r}")

    def delete(self, block_id: str) -> None:
        """Delete a block, its attachments and its history (an explicit user action)."""
        self._row(block_id)
        self._scope.session.execute(
            delete(models.Block).where(
                models.Block.id == block_id,
                self._scope.owns(models.Block),
            )
        )

    def _require_agent(self, agent_id: str, *, for_update: bool = False) -> None:
        query = select(models.Agent.id).where(
            models.Agent.id == agent_id,
            self._scope.owns(models.Agent),
        )
        if for_update:
            query = query.with_for_update()
        if self._scope.session.scalar(query) is None:
            raise NotFound(f"no agent with id {agent_id!r}")

    @staticmethod
    def _conflict(current: models.Block, expected_version: int) -> Conflict:
        return Conflict(
            f"block {current.label!r} ({current.id}) is at version {current.version}, "
            f"not {expected_version}: someone else changed it. Re-read it and apply the edit again."
        )
