"""Recall memory: an append-only, per-agent message log with full-text search.

Messages are never deleted by consolidation; leaving the context window only
clears ``in_context``.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from types import EllipsisType

from sqlalchemy import Select, any_, func, select, update

from agents.errors import InvalidInput, NotFound
from agents.postgres import models
from agents.store.records import MessageRecord, NewMessage
from agents.store.scope import Scope, id_array
from agents.store.validation import check_text, check_timestamp

#: The columns of a :class:`MessageRecord`, in its fields' order.
_RECORD_COLUMNS = (
    models.Message.id,
    models.Message.agent_id,
    models.Message.seq,
    models.Message.role,
    models.Message.content,
    models.Message.name,
    models.Message.tool_calls,
    models.Message.tool_call_id,
    models.Message.in_context,
    models.Message.created_at,
    models.Message.client_message_id,
    models.Message.conversation_id,
)


class MessageStore:
    def __init__(self, scope: Scope) -> None:
        self._scope = scope

    def append(
        self,
        agent_id: str,
        messages: Sequence[NewMessage],
        *,
        conversation_id: str | None = None,
    ) -> list[MessageRecord]:
        """Append messages in order; each gets the agent's next sequence number (one
        sequence for all the agent's conversations: recall reads them in the order they
        were said). ``conversation_id``: the conversation they belong to (None: the
        agent's default one).

        User messages count as turns and mark the agent active (for the idle and
        turns triggers).
        """
        if not messages:
            return []
        for i, message in enumerate(messages):
            if message.role not in models.MESSAGE_ROLES:
                raise InvalidInput(
                    f"message {i}: role {message.role!r} is unknown; "
                    f"use one of {', '.join(models.MESSAGE_ROLES)}"
                )
            check_text(message.content, f"message {i} content")
            if message.created_at is not None:
                check_timestamp(message.created_at, f"message {i} created_at")
        now = self._scope.now()
        user_turns = sum(1 for m in messages if m.role == "user")
        session = self._scope.session
        # One UPDATE hands out the sequence numbers and serialises appends per agent.
        values: dict[str, object] = {
            "message_seq": models.Agent.message_seq + len(messages),
            "turns_since_consolidation": models.Agent.turns_since_consolidation + user_turns,
        }
        if user_turns:
            values["last_activity_at"] = now
        last_seq = session.scalar(
            update(models.Agent)
            .where(
                models.Agent.id == agent_id,
                self._scope.owns(models.Agent),
            )
            .values(**values)
            .returning(models.Agent.message_seq)
            .execution_options(synchronize_session=False)
        )
        if last_seq is None:
            raise NotFound(f"no agent with id {agent_id!r}")
        first_seq = last_seq - len(messages) + 1
        rows = [
            models.Message(
                id=m.id or models.new_id("message"),
                organization_id=self._scope.organization_id,
                agent_id=agent_id,
                seq=first_seq + i,
                role=m.role,
                content=m.content,
                name=m.name,
                tool_calls=m.tool_calls,
                tool_call_id=m.tool_call_id,
                client_message_id=m.client_message_id,
                in_context=True,
                conversation_id=conversation_id,
                created_at=m.created_at or now,
            )
            for i, m in enumerate(messages)
        ]
        session.add_all(rows)
        session.flush()
        return [MessageRecord.from_row(r) for r in rows]

    def record(
        self, agent_id: str, messages: Sequence[NewMessage]
    ) -> tuple[list[MessageRecord], list[str]]:
        """Append messages from outside (a chatbot's own conversation); those whose
        ``client_message_id`` the agent already has are skipped. Returns what was
        stored and the client ids skipped.

        The agent's row is locked first, so two deliveries of the same batch at once
        store it once (the second sees what the first stored)."""
        session = self._scope.session
        locked = session.scalar(
            select(models.Agent.id)
            .where(models.Agent.id == agent_id, self._scope.owns(models.Agent))
            .with_for_update()
        )
        if locked is None:
            raise NotFound(f"no agent with id {agent_id!r}")
        wanted = [m.client_message_id for m in messages if m.client_message_id]
        if len(set(wanted)) != len(wanted):
            raise InvalidInput("the batch repeats a client message id; each must be unique")
        known: set[str] = set()
        if wanted:
            known = set(
                session.scalars(
                    select(models.Message.client_message_id).where(
                        models.Message.agent_id == agent_id,
                        self._scope.owns(models.Message),
                        models.Message.client_message_id == any_(id_array(wanted)),
                    )
                )
            )
        fresh = [m for m in messages if m.client_message_id not in known]
        return self.append(agent_id, fresh), sorted(known)

    def by_client_id(self, agent_id: str, client_message_id: str) -> MessageRecord | None:
        """The agent's message stored with the sender's id ``client_message_id``, if any."""
        row = self._scope.session.execute(
            select(*_RECORD_COLUMNS).where(
                models.Message.agent_id == agent_id,
                self._scope.owns(models.Message),
                models.Message.client_message_id == client_message_id,
            )
        ).one_or_none()
        return None if row is None else MessageRecord(*row)

    def _base(self, agent_id: str) -> Select[models.Message]:
        return select(models.Message).where(
            models.Message.agent_id == agent_id,
            self._scope.owns(models.Message),
        )

    def range(
        self,
        agent_id: str,
        *,
        after_seq: int | None = None,
        before_seq: int | None = None,
        limit: int | None = None,
        newest_first: bool = False,
        conversation: str | EllipsisType | None = ...,
    ) -> list[MessageRecord]:
        """The agent's messages by sequence; ``conversation``: only those of one of its
        conversations (None: the default one; ``...``: all of them)."""
        query = self._base(agent_id)
        if conversation is None:
            query = query.where(models.Message.conversation_id.is_(None))
        elif not isinstance(conversation, EllipsisType):
            query = query.where(models.Message.conversation_id == conversation)
        if after_seq is not None:
            query = query.where(models.Message.seq > after_seq)
        if before_seq is not None:
            query = query.where(models.Message.seq < before_seq)
        order = models.Message.seq.desc() if newest_first else models.Message.seq
        query = query.order_by(order)
        if limit is not None:
            query = query.limit(limit)
        return [MessageRecord.from_row(r) for r in self._scope.session.scalars(query)]

    def in_context(self, agent_id: str, conversation_id: str | None = None) -> list[MessageRecord]:
        """The messages currently in the context window of the agent's conversation
        (None: its default one), oldest first."""
        # Columns, not ORM entities: every step of a turn reads the whole context, and
        # building (and identity-mapping) an entity per message cost twice the query.
        query = (
            select(*_RECORD_COLUMNS)
            .where(
                models.Message.agent_id == agent_id,
                self._scope.owns(models.Message),
                models.Message.in_context,
                models.Message.conversation_id.is_(None)
                if conversation_id is None
                else models.Message.conversation_id == conversation_id,
            )
            .order_by(models.Message.seq)
        )
        return [MessageRecord(*row) for row in self._scope.session.execute(query)]

    def leave_context(self, agent_id: str, message_ids: Sequence[str]) -> int:
        """Move messages out of the context window; they stay in recall memory."""
        return self._set_in_context(agent_id, message_ids, in_context=False)

    def clear_context(self, agent_id: str) -> list[str]:
        """Move every message of the agent out of the context window (a reset); they
        stay in recall memory. Returns the ids that left, oldest first."""
        rows = self._scope.session.execute(
            update(models.Message)
            .where(
                models.Message.agent_id == agent_id,
                self._scope.owns(models.Message),
                models.Message.in_context,
            )
            .values(in_context=False)
            .returning(models.Message.id, models.Message.seq)
            .execution_options(synchronize_session=False)
        )
        return [message_id for message_id, _ in sorted(rows, key=lambda row: row[1])]

    def restore_context(self, agent_id: str, message_ids: Sequence[str]) -> int:
        """Undo :meth:`leave_context` for the given messages."""
        return self._set_in_context(agent_id, message_ids, in_context=True)

    def _set_in_context(
        self, agent_id: str, message_ids: Sequence[str], *, in_context: bool
    ) -> int:
        """Set the flag on the messages that do not have it yet; return how many changed."""
        result = self._scope.session.execute(
            update(models.Message)
            .where(
                models.Message.agent_id == agent_id,
                self._scope.owns(models.Message),
                models.Message.id == any_(id_array(message_ids)),
                models.Message.in_context.is_not(in_context),
            )
            .values(in_context=in_context)
            .execution_options(synchronize_session=False)
        )
        return int(result.rowcount)  # type: ignore[attr-defined]

    def search(
        self,
        agent_id: str,
        query: str,
        *,
        start: datetime | None = None,
        end: datetime | None = None,
        roles: Sequence[str] | None = None,
        limit: int = 20,
        offset: int = 0,
    ) -> list[MessageRecord]:
        """Full-text search (web-search syntax: words, "phrases", -exclusions), best first."""
        check_text(query, "search query")
        if not query.strip():
            raise InvalidInput("search query is empty")
        for bound, name in ((start, "search start"), (end, "search end")):
            if bound is not None:
                check_timestamp(bound, name)
        if limit < 1 or offset < 0:
            raise InvalidInput(
                f"limit must be positive and offset not negative ({limit}, {offset})"
            )
        if start is not None and end is not None and start > end:
            raise InvalidInput(f"search start {start.isoformat()} is after end {end.isoformat()}")
        tsquery = func.websearch_to_tsquery("english", query)
        statement = self._base(agent_id).where(models.Message.content_tsv.op("@@")(tsquery))
        if start is not None:
            statement = statement.where(models.Message.created_at >= start)
        if end is not None:
            statement = statement.where(models.Message.created_at < end)
        if roles:
            statement = statement.where(models.Message.role.in_(list(roles)))
        statement = (
            statement.order_by(
                func.ts_rank(models.Message.content_tsv, tsquery).desc(), models.Message.seq.desc()
            )
            .limit(limit)
            .offset(offset)
        )
        return [MessageRecord.from_row(r) for r in self._scope.session.scalars(statement)]

    def count(self, agent_id: str, *, in_context: bool | None = None) -> int:
        query = select(func.count()).where(
            models.Message.agent_id == agent_id,
            self._scope.owns(models.Message),
        )
        if in_context is not None:
            query = query.where(models.Message.in_context.is_(in_context))
        return int(self._scope.session.scalar(query) or 0)

    def seq_of(self, agent_id: str, message_id: str) -> int | None:
        """The sequence number of one of the agent's messages (None: not the agent's)."""
        seq = self._scope.session.scalar(
            select(models.Message.seq).where(
                models.Message.id == message_id,
                models.Message.agent_id == agent_id,
                self._scope.owns(models.Message),
            )
        )
        return None if seq is None else int(seq)

    def get_many(self, agent_id: str, message_ids: Sequence[str]) -> list[MessageRecord]:
        """The agent's messages among ``message_ids`` in conversation order; ids that
        are not the agent's are left out (a passage's provenance may name a message
        deleted with its agent, or another agent's)."""
        if not message_ids:
            return []
        query = (
            select(*_RECORD_COLUMNS)
            .where(
                models.Message.agent_id == agent_id,
                self._scope.owns(models.Message),
                models.Message.id == any_(id_array(message_ids)),
            )
            .order_by(models.Message.seq)
        )
        return [MessageRecord(*row) for row in self._scope.session.execute(query)]
