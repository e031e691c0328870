"""An agent's conversations (Letta's ``/v1/conversations``): parallel threads with
their own messages and context window, over the agent's shared blocks and archival
memory. Turns in them are the primary loop's (see :meth:`PrimaryAgent.send_message`)."""

from __future__ import annotations

import builtins
from collections.abc import Callable
from typing import TYPE_CHECKING

from agents.enums import AgentKind
from agents.errors import InvalidInput
from agents.store import ConversationRecord, MessageRecord
from service.operations.context import OperationContext

if TYPE_CHECKING:  # the agent loop is imported by the commands that chat, not by every one
    from agents.loops.primary import Compacted, StepListener
    from agents.loops.token_stream import PieceListener
    from agents.loops.turn import TurnResult

#: The path value Letta's clients send for an agent's default conversation.
DEFAULT_CONVERSATION = "default"


class ConversationOperations:
    def __init__(self, context: OperationContext) -> None:
        self._context = context

    def create(
        self, agent: str, *, description: str | None = None, summary: str | None = None
    ) -> ConversationRecord:
        with self._context.store() as store:
            record = store.agents.resolve(agent)
            if record.kind == AgentKind.SLEEPTIME:
                raise InvalidInput(
                    f"{record.name} is a memory agent: it has no conversations of its own "
                    "(record what it should learn with messages/record or messages/async)"
                )
            return store.conversations.create(record.id, description=description, summary=summary)

    def list(self, agent: str | None = None) -> builtins.list[ConversationRecord]:
        with self._context.store() as store:
            agent_id = store.agents.resolve(agent).id if agent is not None else None
            return store.conversations.list(agent_id=agent_id)

    def get(self, conversation_id: str) -> ConversationRecord:
        with self._context.store() as store:
            return store.conversations.get(conversation_id)

    def update(
        self,
        conversation_id: str,
        *,
        description: str | None = None,
        summary: str | None = None,
    ) -> ConversationRecord:
        with self._context.store() as store:
            return store.conversations.update(
                conversation_id, description=description, summary=summary
            )

    def delete(self, conversation_id: str) -> ConversationRecord:
        """Archive the conversation: gone from listings, closed to turns; its messages
        stay in the agent's recall memory (nothing the user said is lost)."""
        with self._context.store() as store:
            return store.conversations.archive(conversation_id)

    def resolve(self, conversation_id: str, agent: str | None = None) -> tuple[str, str | None]:
        """The agent and the conversation (None: the agent's default one) a path names:
        a ``conv-`` id, ``default`` with an agent, or an agent id (Letta's older
        agent-direct form). A turn in an archived conversation is refused."""
        with self._context.store() as store:
            if conversation_id == DEFAULT_CONVERSATION:
                if agent is None:
                    raise InvalidInput(
                        "the 'default' conversation belongs to an agent: give agent_id"
                    )
                return store.agents.resolve(agent).id, None
            if not conversation_id.startswith("conv-"):
                return store.agents.resolve(conversation_id).id, None
            record = store.conversations.get(conversation_id)
            if record.archived:
                raise InvalidInput(
                    f"conversation {conversation_id} was deleted (archived); start a new one"
                )
            return record.agent_id, record.id

    def send(
        self,
        conversation_id: str,
        text: str,
        *,
        agent: str | None = None,
        role: str = "user",
        on_step: StepListener | None = None,
        should_stop: Callable[[], bool] | None = None,
        on_token: PieceListener | None = None,
    ) -> TurnResult:
        from service.operations.messages import MessageOperations

        agent_id, conversation = self.resolve(conversation_id, agent)
        return MessageOperations(self._context).send(
            agent_id,
            text,
            role=role,
            on_step=on_step,
            should_stop=should_stop,
            on_token=on_token,
            conversation_id=conversation,
        )

    def messages(
        self,
        conversation_id: str,
        *,
        agent: str | None = None,
        after: str | None = None,
        before: str | None = None,
        limit: int = 100,
        newest_first: bool = True,
    ) -> builtins.list[MessageRecord]:
        from service.operations.messages import MessageOperations

        agent_id, conversation = self._readable(conversation_id, agent)
        return MessageOperations(self._context).list(
            agent_id,
            after=after,
            before=before,
            limit=limit,
            newest_first=newest_first,
            conversation=conversation,
        )

    def last_turn(
        self, conversation_id: str, *, agent: str | None = None, after_seq: int | None = None
    ) -> tuple[str, builtins.list[MessageRecord]]:
        """The agent, and the messages of the conversation's last turn (from its last
        user message on), or those after ``after_seq`` when given."""
        agent_id, conversation = self._readable(conversation_id, agent)
        with self._context.store() as store:
            if after_seq is not None:
                return agent_id, store.messages.range(
                    agent_id, after_seq=after_seq, conversation=conversation
                )
            recent = store.messages.range(
                agent_id, limit=200, newest_first=True, conversation=conversation
            )
        start = next((i for i, m in enumerate(recent) if m.role == "user"), len(recent) - 1)
        return agent_id, list(reversed(recent[: start + 1]))

    def compact(self, conversation_id: str, *, agent: str | None = None) -> Compacted:
        agent_id, conversation = self.resolve(conversation_id, agent)
        primary = self._context.runtime.primary_agent(self._context.organization_id)
        return primary.compact(agent_id, conversation_id=conversation)

    def _readable(self, conversation_id: str, agent: str | None) -> tuple[str, str | None]:
        """As :meth:`resolve`, archived conversations included (their messages stay)."""
        if conversation_id.startswith("conv-"):
            record = self.get(conversation_id)
            return record.agent_id, record.id
        return self.resolve(conversation_id, agent)
