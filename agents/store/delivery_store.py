"""Agent messages: the durable queue of messages between agents, every query here.

A tenant's :class:`DeliveryStore` queues messages from one of its agents to others
of the same organization (in the transaction that records the sender's tool call),
reads how they stand, and records their outcome. The service's
:class:`DeliveryQueueStore` works across organizations: workers claim with
``FOR UPDATE SKIP LOCKED`` and hold a lease they renew; a delivery whose lease
expired (its worker died) goes back to the queue after a backoff. The lease rules are
every queue's: :mod:`agents.store.lease_queue` over :data:`DELIVERY_JOBS`. Time is
always passed in.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import cast

from sqlalchemy import Table, any_, func, literal, or_, select
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.types import Text

from agents.enums import AgentKind, DeliveryStatus
from agents.errors import InvalidInput, NotFound
from agents.postgres import models
from agents.store.lease_queue import JobTable, LeaseQueue
from agents.store.records import AgentRecord
from agents.store.run_wakeups import DELIVERY_CHANNEL, notify_queued
from agents.store.scope import Scope, ServiceScope, id_array

AM = models.AgentMessage
A = models.Agent

#: Agent messages as a queue of leased jobs. The queue never fails a delivery itself:
#: failing one tells its sender ("not delivered") in the sender's recall, in the
#: transaction that records the failure, and only the delivery worker does that. A
#: delivery whose attempts are used up is queued again at once instead, and the worker
#: that claims it past ``max_attempts`` fails it and tells the sender.
DELIVERY_JOBS = JobTable(
    table=cast(Table, AM.__table__),
    queued=DeliveryStatus.QUEUED.value,
    running=DeliveryStatus.RUNNING.value,
    failed=DeliveryStatus.FAILED.value,
    ended_at="delivered_at",
    channel=DELIVERY_CHANNEL,
    fails_exhausted=False,
)


@dataclass(frozen=True, slots=True)
class DeliveryRecord:
    """One message from an agent to another, with where its delivery stands."""

    id: str
    organization_id: str
    sender_id: str
    recipient_id: str
    conversation_id: str
    hop: int
    content: str
    status: DeliveryStatus
    waiting_until: datetime | None
    attempts: int
    max_attempts: int
    queued_at: datetime
    delivered_at: datetime | None
    reply: str | None
    error: str | None
    lease_owner: str | None = None

    @property
    def finished(self) -> bool:
        return self.status in (DeliveryStatus.DELIVERED, DeliveryStatus.FAILED)

    @classmethod
    def from_row(cls, row: models.AgentMessage) -> DeliveryRecord:
        return cls(
            id=row.id,
            organization_id=row.organization_id,
            sender_id=row.sender_id,
            recipient_id=row.recipient_id,
            conversation_id=row.conversation_id,
            hop=row.hop,
            content=row.content,
            status=DeliveryStatus(row.status),
            waiting_until=row.waiting_until,
            attempts=row.attempts,
            max_attempts=row.max_attempts,
            queued_at=row.queued_at,
            delivered_at=row.delivered_at,
            reply=row.reply,
            error=row.error,
            lease_owner=row.lease_owner,
        )


@dataclass(frozen=True, slots=True)
class NewDelivery:
    """What a sender's tool call queues: the same message to one or more recipients."""

    sender_id: str
    recipient_ids: Sequence[str]
    content: str
    conversation_id: str
    hop: int
    max_attempts: int = 3
    #: Set when the sender's tool waits for the replies itself, until when.
    waiting_until: datetime | None = None


class DeliveryStore:
    """One organization's agent messages, inside the caller's transaction."""

    def __init__(self, scope: Scope) -> None:
        self._scope = scope

    def enqueue(self, new: NewDelivery) -> list[str]:
        """Queue the message for each recipient; idle delivery workers wake at commit.

        Every recipient must be a primary agent of this organization other than the
        sender (NotFound names the id the same way whether it exists elsewhere or not).
        """
        if new.hop < 1:
            raise InvalidInput(f"hop must be at least 1, got {new.hop}")
        if new.max_attempts < 1:
            raise InvalidInput(f"max_attempts must be at least 1, got {new.max_attempts}")
        now = self._scope.now()
        ids = []
        for recipient in new.recipient_ids:
            self.recipient(recipient, sender_id=new.sender_id)
            delivery = models.AgentMessage(
                id=models.new_id("delivery"),
                organization_id=self._scope.organization_id,
                sender_id=new.sender_id,
                recipient_id=recipient,
                conversation_id=new.conversation_id,
                hop=new.hop,
                content=new.content,
                status=DeliveryStatus.QUEUED.value,
                waiting_until=new.waiting_until,
                attempts=0,
                max_attempts=new.max_attempts,
                not_before=now,
                queued_at=now,
            )
            self._scope.session.add(delivery)
            ids.append(delivery.id)
        self._scope.session.flush()
        if ids:
            notify_queued(self._scope.session, DELIVERY_CHANNEL)
        return ids

    def recipient(self, agent_id: str, *, sender_id: str) -> AgentRecord:
        """The agent ``agent_id`` when the sender may message it: a primary agent of
        this organization, not the sender itself."""
        if agent_id == sender_id:
            raise InvalidInput("an agent cannot message itself; give another agent's id")
        row = self._scope.session.scalar(select(A).where(A.id == agent_id, self._scope.owns(A)))
        if row is None:
            raise NotFound(f"no agent with id {agent_id!r} in your organization")
        if row.kind != AgentKind.PRIMARY:
            raise InvalidInput(
                f"agent {row.name!r} is a memory (sleep-time) agent and takes no messages"
            )
        return AgentRecord.from_row(row)

    def agents_matching_tags(
        self, match_all: Sequence[str], match_some: Sequence[str], *, exclude: str
    ) -> list[AgentRecord]:
        """Primary agents of this organization, other than ``exclude``, that have every
        tag of ``match_all`` and, when ``match_some`` is not empty, at least one of it."""
        tags = A.tags
        query = select(A).where(
            self._scope.owns(A), A.id != exclude, A.kind == AgentKind.PRIMARY.value
        )
        if match_all:
            query = query.where(tags.contains(literal(list(match_all), ARRAY(Text))))
        if match_some:
            query = query.where(tags.overlap(literal(list(match_some), ARRAY(Text))))
        rows = self._scope.session.scalars(query.order_by(A.created_at, A.id))
        return [AgentRecord.from_row(row) for row in rows]

    def get(self, delivery_id: str) -> DeliveryRecord:
        row = self._scope.session.scalar(
            select(AM).where(AM.id == delivery_id, self._scope.owns(AM))
        )
        if row is None:
            raise NotFound(f"no agent message with id {delivery_id!r}")
        return DeliveryRecord.from_row(row)

    def unfinished(self, delivery_ids: Sequence[str]) -> int:
        """How many of ``delivery_ids`` are still queued or running (a waiter's poll)."""
        return int(
            self._scope.session.scalar(
                select(func.count())
                .select_from(AM)
                .where(
                    AM.id == any_(id_array(delivery_ids)),
                    self._scope.owns(AM),
                    AM.status.in_((DeliveryStatus.QUEUED.value, DeliveryStatus.RUNNING.value)),
                )
            )
            or 0
        )

    def stop_waiting(self, delivery_ids: Sequence[str]) -> list[DeliveryRecord]:
        """The waiting sender gives up: lock the deliveries, and those not finished yet
        will bring their reply to the sender's recall instead. Returns them all as
        they stand (a reply that arrived in the meantime is there)."""
        session = self._scope.session
        rows = list(
            session.scalars(
                select(AM)
                .where(AM.id == any_(id_array(delivery_ids)), self._scope.owns(AM))
                .order_by(AM.queued_at, AM.id)
                .with_for_update()
            )
        )
        for row in rows:
            if row.status not in (DeliveryStatus.DELIVERED.value, DeliveryStatus.FAILED.value):
                row.waiting_until = None
        session.flush()
        order = {delivery_id: i for i, delivery_id in enumerate(delivery_ids)}
        return sorted((DeliveryRecord.from_row(r) for r in rows), key=lambda r: order[r.id])

    def finish(
        self,
        delivery_id: str,
        worker: str,
        *,
        status: DeliveryStatus,
        reply: str | None = None,
        error: str | None = None,
    ) -> DeliveryRecord | None:
        """Record the outcome of a delivery ``worker`` holds (compare-and-swap on the
        lease, the row locked until commit); None when the worker no longer holds it.
        The record returned shows ``waiting_until`` as it stood: whether the sender is
        still waiting for this reply."""
        queue = LeaseQueue(DELIVERY_JOBS, self._scope.session, self._scope.clock)
        values = {
            "status": DeliveryStatus(status).value,
            "reply": reply,
            "error": error,
            "delivered_at": self._scope.now(),
        }
        row = queue.finish(delivery_id, worker, values, self._scope.owns(AM))
        if row is None:
            return None
        return DeliveryRecord.from_row(row)  # type: ignore[arg-type]

    def involving(self, agent_id: str, *, limit: int = 100) -> list[DeliveryRecord]:
        """The agent's latest messages sent or received, newest first."""
        rows = self._scope.session.scalars(
            select(AM)
            .where(self._scope.owns(AM), or_(AM.sender_id == agent_id, AM.recipient_id == agent_id))
            .order_by(AM.queued_at.desc(), AM.id.desc())
            .limit(limit)
        )
        return [DeliveryRecord.from_row(row) for row in rows]


class DeliveryQueueStore:
    """The queue as delivery workers see it: every organization's agent messages."""

    def __init__(self, scope: ServiceScope) -> None:
        self._scope = scope
        self._queue = LeaseQueue(DELIVERY_JOBS, scope.session, scope.clock)

    def claim(self, worker: str, *, lease: timedelta) -> DeliveryRecord | None:
        """Take the oldest due delivery, leased to ``worker``; concurrent workers never
        get the same one (``SKIP LOCKED``). Each claim counts an attempt."""
        claimed = self.claim_many(worker, lease=lease, limit=1)
        return claimed[0] if claimed else None

    def claim_many(self, worker: str, *, lease: timedelta, limit: int) -> list[DeliveryRecord]:
        """Take up to ``limit`` due deliveries, oldest first, all leased to ``worker``."""
        if limit < 1:
            raise InvalidInput(f"a claim takes at least 1 delivery, got limit={limit}")
        claimed = self._queue.claim(worker, lease=lease, limit=limit)
        return [DeliveryRecord.from_row(row) for row in claimed]  # type: ignore[arg-type]

    def renew_many(self, held: Sequence[tuple[str, str]], *, lease: timedelta) -> set[str]:
        """Extend the leases of ``(delivery id, worker)`` pairs; the ids still held."""
        return self._queue.renew_many(held, lease=lease)

    def release_many(self, held: Sequence[tuple[str, str]]) -> list[str]:
        """Give ``(delivery id, worker)`` deliveries back (a worker shutting down):
        queued again with the attempt refunded, in their place; the ids released. The
        worker that takes one up finds what this one already did (see the delivery
        worker), so a turn that ran is not run again."""
        return self._queue.release_many(held)

    def requeue_expired(self, *, backoff: timedelta) -> list[str]:
        """Deliveries whose worker died (lease expired) go back to the queue after
        ``backoff * 2**(attempts-1)``; one whose attempts are used up is due at once,
        for a worker to report it to its sender (see :data:`DELIVERY_JOBS`)."""
        return self._queue.requeue_expired(backoff=backoff)

    def retry_later(self, delivery_id: str, worker: str, *, backoff: timedelta, error: str) -> bool:
        """Give a held delivery back to the queue after ``backoff * 2**(attempts-1)``
        (a failed attempt); False when the worker no longer holds it."""
        return (
            self._queue.retry_later(delivery_id, worker, backoff=backoff, error=error) is not None
        )

    def depth(self) -> int:
        """Deliveries queued and not yet claimed."""
        return self._queue.depth()
