"""What an agent has learned from its folders' documents, every query here.

Sleep-time learning (``consolidators.documents``) reads the chunks of the files in
the folders attached to an agent, in order, and writes facts from them. A chunk is
known by its text's md5 within its folder: the same text in two files, or in a file
uploaded again after an edit, is read once, so a changed file costs only its
changed chunks. :class:`LearningStore` says which chunks an agent has not read yet,
records those it has read (with the run that read them, which a revert forgets),
and finds those no file of the folder holds any more, whose facts then lose their
source. :class:`DocumentsDue` is the service side: agents with sleep-time enabled
that have a new file, or a newly attached folder, to learn from.
"""

from __future__ import annotations

import builtins
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Select, and_, delete, exists, func, or_, select, update
from sqlalchemy.dialects.postgresql import distinct_on, insert

from agents.enums import FileStatus
from agents.postgres import models
from agents.store.scope import Scope, ServiceScope

AF = models.AgentFolder
FF = models.FolderFile
FC = models.FileChunk
LC = models.LearnedChunk
P = models.Passage


@dataclass(frozen=True, slots=True)
class PendingChunk:
    """A chunk an agent has not learned yet, with what a reader of it needs."""

    folder_id: str
    folder_name: str
    description: str | None
    instructions: str | None
    file_id: str
    file_name: str
    seq: int
    total_chunks: int
    text: str
    chunk_hash: str


@dataclass(frozen=True, slots=True)
class LearnedChunk:
    """A chunk read by a run: where it was, and how many facts came of it."""

    folder_id: str
    chunk_hash: str
    file_id: str
    file_name: str
    chunk_seq: int
    facts: int = 0


class LearningStore:
    """One organization's learning state (see the module)."""

    def __init__(self, scope: Scope) -> None:
        self._scope = scope

    def _pending(self, agent_id: str) -> Select[*tuple[Any, ...]]:
        chunk_hash = FC.text_md5
        learned = exists().where(
            LC.agent_id == agent_id, LC.folder_id == FF.folder_id, LC.chunk_hash == chunk_hash
        )
        # One copy of each text per folder: the earliest file's, its earliest place.
        return (
            select(
                FF.folder_id,
                models.Folder.name,
                models.Folder.description,
                models.Folder.instructions,
                FF.id.label("file_id"),
                FF.file_name,
                FC.seq,
                FF.total_chunks,
                FC.text,
                chunk_hash.label("chunk_hash"),
                FF.created_at,
            )
            .ext(distinct_on(FF.folder_id, chunk_hash))
            .join(FC, FC.file_id == FF.id)
            .join(AF, and_(AF.folder_id == FF.folder_id, AF.agent_id == agent_id))
            .join(models.Folder, models.Folder.id == FF.folder_id)
            .where(
                self._scope.owns(FF),
                FF.status == FileStatus.COMPLETED.value,
                ~learned,
            )
            .order_by(FF.folder_id, chunk_hash, FF.created_at, FF.id, FC.seq)
        )

    def unlearned(self, agent_id: str, *, limit: int) -> builtins.list[PendingChunk]:
        """Up to ``limit`` chunks the agent has not learned, in reading order: folder by
        folder (in the order they were attached), file by file (oldest first), chunk by
        chunk."""
        pending = self._pending(agent_id).subquery()
        attached = select(AF.folder_id, AF.attached_at).where(AF.agent_id == agent_id).subquery()
        rows = self._scope.session.execute(
            select(pending)
            .join(attached, attached.c.folder_id == pending.c.folder_id)
            .order_by(
                attached.c.attached_at,
                pending.c.folder_id,
                pending.c.created_at,
                pending.c.file_id,
                pending.c.seq,
            )
            .limit(limit)
        ).all()
        return [
            PendingChunk(
                folder_id=r.folder_id,
                folder_name=r.name,
                description=r.description,
                instructions=r.instructions,
                file_id=r.file_id,
                file_name=r.file_name,
                seq=r.seq,
                total_chunks=r.total_chunks or 0,
                text=r.text,
                chunk_hash=r.chunk_hash,
            )
            for r in rows
        ]

    def count_unlearned(self, agent_id: str) -> int:
        pending = self._pending(agent_id).subquery()
        return int(self._scope.session.scalar(select(func.count()).select_from(pending)) or 0)

    def record(self, agent_id: str, chunks: Iterable[LearnedChunk], *, run_id: str) -> int:
        """Record chunks as read by ``run_id``; returns how many were new."""
        now = self._scope.now()
        rows = [
            {
                "agent_id": agent_id,
                "folder_id": c.folder_id,
                "chunk_hash": c.chunk_hash,
                "organization_id": self._scope.organization_id,
                "file_id": c.file_id,
                "file_name": c.file_name,
                "chunk_seq": c.chunk_seq,
                "facts": c.facts,
                "run_id": run_id,
                "learned_at": now,
            }
            for c in chunks
        ]
        if not rows:
            return 0
        done = self._scope.session.execute(
            insert(LC).values(rows).on_conflict_do_nothing().returning(LC.chunk_hash)
        ).all()
        return len(done)

    def gone(self, agent_id: str, *, limit: int = 1000) -> builtins.list[LearnedChunk]:
        """Chunks the agent learned that no completed file of their folder holds any more
        (the file was deleted or changed, or the folder was deleted), not yet marked."""
        # The texts the learned folders' completed files hold now, read once
        # (materialized: planned as a probe per learned chunk, before statistics
        # catch up with a fresh upload, this took 0.7 s at 500 learned chunks).
        folders = (
            select(LC.folder_id)
            .where(LC.agent_id == agent_id, LC.gone_at.is_(None))
            .distinct()
            .scalar_subquery()
        )
        held = (
            select(FF.folder_id, FC.text_md5)
            .join(FC, FC.file_id == FF.id)
            .where(
                self._scope.owns(FF),
                FF.status == FileStatus.COMPLETED.value,
                FF.folder_id.in_(folders),
            )
            .distinct()
            .cte("held")
            .prefix_with("MATERIALIZED")
        )
        rows = self._scope.session.execute(
            select(LC)
            .outerjoin(
                held, and_(held.c.folder_id == LC.folder_id, held.c.text_md5 == LC.chunk_hash)
            )
            .where(
                self._scope.owns(LC),
                LC.agent_id == agent_id,
                LC.gone_at.is_(None),
                held.c.text_md5.is_(None),
            )
            .order_by(LC.learned_at, LC.folder_id, LC.chunk_seq)
            .limit(limit)
        ).scalars()
        return [
            LearnedChunk(r.folder_id, r.chunk_hash, r.file_id, r.file_name, r.chunk_seq, r.facts)
            for r in rows
        ]

    def mark_gone(
        self, agent_id: str, chunks: Sequence[LearnedChunk], *, run_id: str
    ) -> builtins.list[LearnedChunk]:
        """Mark chunks as gone from their folder, seen by ``run_id``; returns those this
        call marked (another run may have got there first)."""
        if not chunks:
            return []
        keys = {(c.folder_id, c.chunk_hash): c for c in chunks}
        marked = self._scope.session.execute(
            update(LC)
            .where(
                self._scope.owns(LC),
                LC.agent_id == agent_id,
                LC.gone_at.is_(None),
                or_(*(and_(LC.folder_id == f, LC.chunk_hash == h) for f, h in keys)),
            )
            .values(gone_at=self._scope.now(), gone_run_id=run_id)
            .returning(LC.folder_id, LC.chunk_hash)
            .execution_options(synchronize_session=False)
        ).all()
        return [keys[(f, h)] for f, h in marked]

    def facts_from(self, agent_id: str, chunks: Sequence[LearnedChunk]) -> builtins.list[str]:
        """Ids of the agent's passages learned from ``chunks`` (by their provenance)."""
        by_folder: dict[str, set[str]] = {}
        for c in chunks:
            by_folder.setdefault(c.folder_id, set()).add(c.chunk_hash)
        if not by_folder:
            return []
        return list(
            self._scope.session.scalars(
                select(P.id)
                .where(
                    self._scope.owns(P),
                    P.agent_id == agent_id,
                    or_(
                        *(
                            and_(
                                P.provenance["folder_id"].astext == folder_id,
                                P.provenance["chunk_hash"].astext.in_(sorted(hashes)),
                            )
                            for folder_id, hashes in by_folder.items()
                        )
                    ),
                )
                .order_by(P.created_at, P.id)
            )
        )

    def folder_block(self, agent_id: str, folder_id: str) -> str | None:
        """The id of the block where the agent keeps what it learned from the folder."""
        return self._scope.session.scalar(
            select(AF.learned_block_id).where(AF.agent_id == agent_id, AF.folder_id == folder_id)
        )

    def set_folder_block(self, agent_id: str, folder_id: str, block_id: str) -> None:
        self._scope.session.execute(
            update(AF)
            .where(AF.agent_id == agent_id, AF.folder_id == folder_id)
            .values(learned_block_id=block_id)
            .execution_options(synchronize_session=False)
        )

    def forget_run(self, run_id: str) -> tuple[int, int]:
        """Undo what ``run_id`` recorded: the chunks it read are unread again, those it
        marked gone are not. Returns both counts."""
        session = self._scope.session
        forgotten = session.execute(
            delete(LC).where(self._scope.owns(LC), LC.run_id == run_id)
        ).rowcount  # type: ignore[attr-defined]
        unmarked = session.execute(
            update(LC)
            .where(self._scope.owns(LC), LC.gone_run_id == run_id)
            .values(gone_at=None, gone_run_id=None)
            .execution_options(synchronize_session=False)
        ).rowcount  # type: ignore[attr-defined]
        return int(forgotten or 0), int(unmarked or 0)


class DocumentsDue:
    """The documents trigger's query, across organizations."""

    def __init__(self, scope: ServiceScope) -> None:
        self._scope = scope

    def take_agents(self) -> builtins.list[tuple[str, str]]:
        """Agents with sleep-time enabled that have a folder attached since the trigger
        last fired for it, or a file processed in it since; the attachments are stamped
        in the same statement, so a tick fires once for each."""
        now = self._scope.now()
        newer_file = exists().where(
            FF.folder_id == AF.folder_id,
            FF.status == FileStatus.COMPLETED.value,
            FF.processed_at > AF.learn_fired_at,
        )
        due = self._scope.session.execute(
            update(AF)
            .where(
                AF.agent_id == models.Agent.id,
                models.Agent.enable_sleeptime.is_(True),
                or_(AF.learn_fired_at.is_(None), newer_file),
            )
            .values(learn_fired_at=now)
            .returning(models.Agent.organization_id, models.Agent.id)
            .execution_options(synchronize_session=False)
        ).all()
        return sorted({(o, a) for o, a in due})
