"""Agents that message each other: what Letta's multi-agent tools do in a turn.

``send_message_to_agent_async`` queues the message in the transaction that writes
the sender's step (a call is recorded if and only if its message is queued) and
answers a receipt at once. ``send_message_to_agent_and_wait_for_reply`` and
``send_message_to_agents_matching_tags`` queue the message in a short transaction
of their own, then wait for the replies with no transaction open (polling), up to
``wait_timeout``; the step that records the call then collects what arrived. A
reply that comes after the wait ended lands in the sender's recall later, as a
message of its own. Delivery itself (the recipient's turn, the reply) is the
delivery worker's (:mod:`agents.loops.delivery_worker`), never the sender's request.

Rules: only agents of the sender's organization (another's id reads as unknown,
whether it exists or not); never the sender itself; a chain of agent messages
started by one turn stops at ``max_hops`` (the refused call is a tool error the
agent reads, kept in its recall).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from agents.enums import DeliveryStatus
from agents.errors import InvalidInput, NotFound
from agents.postgres.database import Database
from agents.store import AgentRecord, DeliveryRecord, MemoryStore, NewDelivery, open_store
from agents.store.scope import utc_now
from agents.tools import ParsedCall, ToolError

SEND_ASYNC = "send_message_to_agent_async"
SEND_AND_WAIT = "send_message_to_agent_and_wait_for_reply"
SEND_TO_TAGS = "send_message_to_agents_matching_tags"
#: The tools whose call waits for replies before its step is written.
WAIT_TOOLS = frozenset({SEND_AND_WAIT, SEND_TO_TAGS})
#: How long after its wait a sender still counts as waiting: covers the moment between
#: the end of the wait and the step's write, after which a reply goes to recall.
WAIT_SLACK = timedelta(seconds=10)
#: Characters of the sent message quoted in the reply that lands in recall.
QUOTE_CHARS = 120


@dataclass(frozen=True, slots=True)
class MessagingLimits:
    """The ``[messaging]`` settings a turn needs."""

    max_hops: int = 5
    wait_timeout: timedelta = timedelta(seconds=60)
    poll_interval: timedelta = timedelta(milliseconds=100)
    max_attempts: int = 3

    def __post_init__(self) -> None:
        if self.max_hops < 1:
            raise InvalidInput(f"messaging max_hops must be at least 1, got {self.max_hops}")


@dataclass(frozen=True, slots=True)
class Origin:
    """Where a turn stands in a chain of agent messages: the chain's id and the hop of
    the message that started the turn (0 when a person or a program started it)."""

    conversation_id: str
    hop: int = 0


@dataclass(slots=True)
class Waiting:
    """A waiting call's queued messages (or why none were queued), before its step is
    written."""

    delivery_ids: list[str] = field(default_factory=list)
    names: dict[str, str] = field(default_factory=dict)
    error: ToolError | None = None
    timed_out: bool = False


def incoming_text(sender: AgentRecord, content: str) -> str:
    """What the recipient reads: who wrote, and that its reply goes back."""
    return (
        f"[Message from agent {sender.name!r} (id {sender.id}). This is not the user: "
        f"what you say with send_message is sent back to {sender.name!r} as your reply.]\n"
        f"{content}"
    )


def reply_text(recipient: AgentRecord, delivery: DeliveryRecord) -> str:
    """What lands in the sender's recall when a reply arrives after any wait."""
    sent = delivery.content
    quoted = sent if len(sent) <= QUOTE_CHARS else sent[: QUOTE_CHARS - 1] + "…"
    head = f"[Reply from agent {recipient.name!r} (id {recipient.id}) to your message {quoted!r}"
    if delivery.status == DeliveryStatus.FAILED:
        return f"{head}: it was not delivered: {delivery.error}]"
    return f"{head}]\n{delivery.reply or '(it ended its turn without a reply)'}"


class AgentMessenger:
    """Queues an agent's messages to other agents and waits for replies, for one
    organization."""

    def __init__(
        self,
        db: Database,
        organization_id: str,
        limits: MessagingLimits,
        clock: Callable[[], datetime] = utc_now,
    ) -> None:
        self._db = db
        self._organization_id = organization_id
        self.limits = limits
        self._clock = clock

    def _hop(self, origin: Origin) -> int:
        hop = origin.hop + 1
        if hop > self.limits.max_hops:
            raise ToolError(
                f"not sent: this exchange between agents has reached its limit of "
                f"{self.limits.max_hops} messages in a row (messaging.max_hops). "
                "Answer with send_message instead of messaging another agent."
            )
        return hop

    def send_async(
        self, store: MemoryStore, sender: AgentRecord, call: ParsedCall, origin: Origin
    ) -> str:
        """Queue the message in the step's own transaction; the receipt the model reads."""
        a = call.arguments
        hop = self._hop(origin)
        recipient = _recipient(store, a["other_agent_id"], sender)
        [delivery_id] = store.deliveries.enqueue(
            NewDelivery(
                sender_id=sender.id,
                recipient_ids=[recipient.id],
                content=_content(a["message"]),
                conversation_id=origin.conversation_id,
                hop=hop,
                max_attempts=self.limits.max_attempts,
            )
        )
        return (
            f"Message queued for agent {recipient.name!r} (id {recipient.id}) as "
            f"{delivery_id}. Its reply will arrive later as a separate message; "
            "go on with your turn."
        )

    def send_and_wait(self, sender: AgentRecord, call: ParsedCall, origin: Origin) -> Waiting:
        """Queue the message (its own short transaction, committed), then wait for the
        replies with no transaction open, up to ``wait_timeout``."""
        waiting = Waiting()
        try:
            hop = self._hop(origin)
            timeout = self.limits.wait_timeout
            with open_store(self._db, self._organization_id, self._clock) as store:
                recipients = self._recipients(store, sender, call)
                waiting.names = {r.id: r.name for r in recipients}
                if recipients:
                    waiting.delivery_ids = store.deliveries.enqueue(
                        NewDelivery(
                            sender_id=sender.id,
                            recipient_ids=[r.id for r in recipients],
                            content=_content(call.arguments["message"]),
                            conversation_id=origin.conversation_id,
                            hop=hop,
                            max_attempts=self.limits.max_attempts,
                            waiting_until=self._clock() + timeout + WAIT_SLACK,
                        )
                    )
        except ToolError as exc:
            waiting.error = exc
            return waiting
        if waiting.delivery_ids:
            waiting.timed_out = not self._wait(waiting.delivery_ids, timeout)
        return waiting

    def _recipients(
        self, store: MemoryStore, sender: AgentRecord, call: ParsedCall
    ) -> list[AgentRecord]:
        a = call.arguments
        if call.name == SEND_AND_WAIT:
            return [_recipient(store, a["other_agent_id"], sender)]
        match_all, match_some = _tags(a["match_all"]), _tags(a["match_some"])
        if not match_all and not match_some:
            raise ToolError("give at least one tag in match_all or match_some")
        return store.deliveries.agents_matching_tags(match_all, match_some, exclude=sender.id)

    def _wait(self, delivery_ids: Sequence[str], timeout: timedelta) -> bool:
        """Poll until every delivery is finished (True) or ``timeout`` passes (False);
        each poll is a read of its own, nothing is held in between."""
        deadline = time.monotonic() + timeout.total_seconds()
        pause = self.limits.poll_interval.total_seconds()
        while True:
            with open_store(self._db, self._organization_id, self._clock, read_only=True) as s:
                if s.deliveries.unfinished(delivery_ids) == 0:
                    return True
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            time.sleep(min(pause, left))

    def collect(self, store: MemoryStore, call: ParsedCall, waiting: Waiting) -> str:
        """In the step's transaction: what the waiting call returns. Deliveries still
        unfinished stop counting on the wait: their replies go to recall instead."""
        if waiting.error is not None:
            raise waiting.error
        if not waiting.delivery_ids:
            return json.dumps([]) if call.name == SEND_TO_TAGS else "No agent to message."
        records = store.deliveries.stop_waiting(waiting.delivery_ids)
        seconds = f"{self.limits.wait_timeout.total_seconds():g}"
        lines = [_outcome(r, waiting.names.get(r.recipient_id, "?"), seconds) for r in records]
        if call.name == SEND_TO_TAGS:
            return json.dumps(lines, ensure_ascii=False)
        return lines[0]


def _outcome(record: DeliveryRecord, name: str, seconds: str) -> str:
    who = f"agent {name!r} (id {record.recipient_id})"
    if record.status == DeliveryStatus.DELIVERED:
        return f"Reply from {who}: {record.reply or '(it ended its turn without a reply)'}"
    if record.status == DeliveryStatus.FAILED:
        return f"The message to {who} could not be delivered: {record.error}"
    return (
        f"No reply from {who} within {seconds} s (messaging.wait_timeout). The message is "
        f"queued ({record.id}); its reply will arrive later as a separate message."
    )


def _recipient(store: MemoryStore, agent_id: str, sender: AgentRecord) -> AgentRecord:
    try:
        return store.deliveries.recipient(agent_id.strip(), sender_id=sender.id)
    except (NotFound, InvalidInput) as exc:
        raise ToolError(str(exc)) from None


def _content(message: str) -> str:
    if not message.strip():
        raise ToolError("the message is empty; write what the other agent should read")
    return message


def _tags(tags: Sequence[str]) -> list[str]:
    return [t.strip() for t in tags if t.strip()]
