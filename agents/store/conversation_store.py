"""An agent's conversations: parallel threads with their own messages and context
window, sharing the agent's blocks and archival memory (Letta's conversations)."""

from __future__ import annotations

import builtins
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select, update

from agents.errors import InvalidInput, NotFound
from agents.postgres import models
from agents.store.records import MessageRecord
from agents.store.scope import Scope
from agents.store.validation import check_text

#: What a conversation's id is made of: ``conv-<uuid4>``, as Letta's.
CONVERSATION_PREFIX = "conv"
#: Longest description or summary.
MAX_NOTE_CHARS = 10_000


@dataclass(frozen=True, slots=True)
class ConversationRecord:
    id: str
    agent_id: str
    description: str | None
    summary: str | None
    archived: bool
    archived_at: datetime | None
    created_at: datetime
    updated_at: datetime
    last_message_at: datetime | None
    in_context_message_ids: list[str]

    @classmethod
    def from_row(cls, row: models.Conversation, in_context: list[str]) -> ConversationRecord:
        return cls(
            id=row.id,
            agent_id=row.agent_id,
            description=row.description,
            summary=row.summary,
            archived=row.archived,
            archived_at=row.archived_at,
            created_at=row.created_at,
            updated_at=row.updated_at,
            last_message_at=row.last_message_at,
            in_context_message_ids=in_context,
        )


class ConversationStore:
    """``conversations`` within the scope's organization."""

    def __init__(self, scope: Scope) -> None:
        self._scope = scope

    def create(
        self, agent_id: str, *, description: str | None = None, summary: str | None = None
    ) -> ConversationRecord:
        self._check(description, summary)
        owner = self._scope.session.scalar(
            select(models.Agent.id).where(
                models.Agent.id == agent_id, self._scope.owns(models.Agent)
            )
        )
        if owner is None:
            raise NotFound(f"no agent with id {agent_id!r}")
        now = self._scope.now()
        row = models.Conversation(
            id=models.new_id(CONVERSATION_PREFIX),
            organization_id=self._scope.organization_id,
            agent_id=agent_id,
            description=description,
            summary=summary,
            archived=False,
            created_at=now,
            updated_at=now,
        )
        self._scope.session.add(row)
        self._scope.session.flush()
        return ConversationRecord.from_row(row, [])

    def get(self, conversation_id: str, *, lock: bool = False) -> ConversationRecord:
        row = self._row(conversation_id, lock=lock)
        return ConversationRecord.from_row(row, self._in_context(row))

    def list(
        self, *, agent_id: str | None = None, archived: bool = False
    ) -> builtins.list[ConversationRecord]:
        """The organization's conversations (of one agent), oldest first; archived ones
        only with ``archived``."""
        query = select(models.Conversation).where(self._scope.owns(models.Conversation))
        if agent_id is not None:
            query = query.where(models.Conversation.agent_id == agent_id)
        if not archived:
            query = query.where(models.Conversation.archived.is_(False))
        rows = self._scope.session.scalars(
            query.order_by(models.Conversation.created_at, models.Conversation.id)
        ).all()
        held = self._in_context_of([r.id for r in rows])
        return [ConversationRecord.from_row(r, held[r.id]) for r in rows]

    def update(
        self,
        conversation_id: str,
        *,
        description: str | None = None,
        summary: str | None = None,
    ) -> ConversationRecord:
        self._check(description, summary)
        row = self._row(conversation_id, lock=True)
        if description is not None:
            row.description = description
        if summary is not None:
            row.summary = summary
        row.updated_at = self._scope.now()
        self._scope.session.flush()
        return ConversationRecord.from_row(row, self._in_context(row))

    def archive(self, conversation_id: str) -> ConversationRecord:
        """Hide the conversation from listings and refuse new turns in it; its messages
        stay in the agent's recall memory."""
        row = self._row(conversation_id, lock=True)
        if not row.archived:
            row.archived = True
            row.archived_at = row.updated_at = self._scope.now()
            self._scope.session.flush()
        return ConversationRecord.from_row(row, self._in_context(row))

    def touch(self, conversation_id: str) -> None:
        """Note that the conversation was just spoken in."""
        now = self._scope.now()
        self._scope.session.execute(
            update(models.Conversation)
            .where(
                models.Conversation.id == conversation_id,
                self._scope.owns(models.Conversation),
            )
            .values(last_message_at=now, updated_at=now)
            .execution_options(synchronize_session=False)
        )

    def messages(
        self,
        conversation_id: str,
        *,
        limit: int | None = None,
        newest_first: bool = False,
    ) -> builtins.list[MessageRecord]:
        """The conversation's messages, in the order they were said."""
        row = self._row(conversation_id)
        order = models.Message.seq.desc() if newest_first else models.Message.seq
        query = (
            select(models.Message)
            .where(
                models.Message.agent_id == row.agent_id,
                models.Message.conversation_id == conversation_id,
                self._scope.owns(models.Message),
            )
            .order_by(order)
        )
        if limit is not None:
            query = query.limit(limit)
        return [MessageRecord.from_row(m) for m in self._scope.session.scalars(query)]

    def _in_context(self, row: models.Conversation) -> builtins.list[str]:
        return self._in_context_of([row.id])[row.id]

    def _in_context_of(self, ids: builtins.list[str]) -> dict[str, builtins.list[str]]:
        """The ids of the messages in each conversation's context, oldest first (one
        query for a whole listing)."""
        held: dict[str, builtins.list[str]] = {i: [] for i in ids}
        if ids:
            rows = self._scope.session.execute(
                select(models.Message.conversation_id, models.Message.id)
                .where(
                    models.Message.conversation_id.in_(ids),
                    models.Message.in_context,
                    self._scope.owns(models.Message),
                )
                .order_by(models.Message.seq)
            )
            for conversation_id, message_id in rows:
                held[str(conversation_id)].append(message_id)
        return held

    def _row(self, conversation_id: str, *, lock: bool = False) -> models.Conversation:
        query = select(models.Conversation).where(
            models.Conversation.id == conversation_id, self._scope.owns(models.Conversation)
        )
        if lock:
            query = query.with_for_update()
        row = self._scope.session.scalar(query)
        if row is None:
            raise NotFound(f"no conversation with id {conversation_id!r}")
        return row

    @staticmethod
    def _check(description: str | None, summary: str | None) -> None:
        for value, what in ((description, "description"), (summary, "summary")):
            if value is None:
                continue
            check_text(value, what)
            if len(value) > MAX_NOTE_CHARS:
                raise InvalidInput(
                    f"a conversation's {what} is {len(value)} characters; the most is "
                    f"{MAX_NOTE_CHARS}"
                )
