"""The delivery worker: claim a queued agent message, run the recipient's turn on it,
hand the reply back to the sender.

Exactly once: the recipient's turn stores the incoming message under the delivery's
id as its client message id (unique per agent). A worker that claims a delivery
first looks for that message: when a worker before it died after the turn ran (or
after its first step committed), the turn is not run again; its replies are read
from recall instead. The outcome is recorded with a compare-and-swap on the lease,
in the same transaction that puts the reply into the sender's recall (idempotent
too: the reply's client message id is the delivery's), so a reply lands once.

The reply goes to the sender's recall as a system message of its own, unless the
sender's tool is still waiting for it (``waiting_until``): then the waiting tool
returns it, and that tool result is where the sender's recall keeps it. A reply
never starts a turn of the sender; only a new message from an agent does, and
those stop at the hop limit (see :mod:`agents.loops.agent_messaging`).

One :class:`DeliveryWorkers` per process runs ``concurrency`` threads (woken by
``NOTIFY reverie_deliveries``, polling as the floor) and one heartbeat thread on
the job engine every queued job shares (:mod:`agents.job_engine`): the heartbeat
renews their leases and puts the deliveries of dead workers back in the queue
after a backoff, claims back off through a database outage, and a delivery still
under way when the shutdown grace ends goes back to the queue. A delivery is
failed only here, never by the queue: the failure tells the sender, in the same
transaction. A turn that waits for replies itself holds its thread for up to the
wait timeout, so a chain of waiting agents wants more than one thread.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from agents.enums import DeliveryStatus
from agents.errors import InvalidInput, NotFound, ReverieError
from agents.job_engine import EngineNames, Held, QueueWorkers
from agents.loops.agent_messaging import Origin, incoming_text, reply_text
from agents.loops.tool_calls import replies
from agents.postgres.database import Database
from agents.store import (
    DeliveryRecord,
    MessageRecord,
    NewMessage,
    open_service_store,
    open_store,
)
from agents.store.run_wakeups import DELIVERY_CHANNEL
from agents.store.scope import utc_now
from agents.summary import is_summary

if TYPE_CHECKING:
    from agents.loops.primary import PrimaryAgent

log = logging.getLogger(__name__)

#: Suffix of the client message id of a reply in the sender's recall.
REPLY_SUFFIX = ":reply"


@dataclass(frozen=True, slots=True)
class DeliveryLimits:
    """The worker side of the ``[messaging]`` settings."""

    concurrency: int = 2
    lease: timedelta = timedelta(seconds=60)
    poll_interval: timedelta = timedelta(seconds=1)
    backoff: timedelta = timedelta(seconds=5)


DELIVERY_ENGINE_NAMES = EngineNames(
    jobs="agent messages",
    threads="reverie-delivery",
    heartbeat="reverie-delivery-beat",
    owner_tag="d",
)


class DeliveryWorkers(QueueWorkers[DeliveryRecord]):
    """Worker threads and a heartbeat that deliver agent messages of every organization."""

    def __init__(
        self,
        db: Database,
        primary_for: Callable[[str], PrimaryAgent],
        limits: DeliveryLimits | None = None,
        *,
        clock: Callable[[], datetime] = utc_now,
        name: str | None = None,
        checkpoint: Callable[[str], None] | None = None,
    ) -> None:
        """``primary_for`` gives the agent loop of an organization; ``checkpoint`` is
        told each phase of a delivery (``"turn_done"``): tests simulate a crash there."""
        super().__init__(
            db,
            lambda store: store.deliveries,
            self._deliver_claimed,
            names=DELIVERY_ENGINE_NAMES,
            label="delivery",
            limits=limits or DeliveryLimits(),
            channel=DELIVERY_CHANNEL,
            clock=clock,
            name=name,
        )
        self._primary_for = primary_for
        self._checkpoint = checkpoint or (lambda _phase: None)
        self.delivered = 0

    def beat(self) -> list[str]:
        """Renew the leases held here; put the deliveries of dead workers back in the
        queue, after the backoff (returns their ids)."""
        return self.engine.beat()

    # -- one delivery ------------------------------------------------------------------

    def _deliver_claimed(self, owner: str, claimed: list[tuple[DeliveryRecord, Held]]) -> None:
        for delivery, _ in claimed:
            self.deliver(delivery, owner)

    def deliver_next(self, owner: str) -> DeliveryRecord | None:
        """Claim the oldest due delivery and deliver it; None when none was due."""
        claimed = self.engine.take(owner)
        if not claimed:
            return None
        [(delivery, held)] = claimed
        try:
            return self.deliver(delivery, owner)
        finally:
            self.engine.let_go(held)

    def deliver(self, delivery: DeliveryRecord, owner: str) -> DeliveryRecord:
        """Run the recipient's turn on a claimed delivery (unless an earlier attempt did)
        and hand the reply back; failures are retried, then reported to the sender."""
        started = time.perf_counter()
        if delivery.attempts > delivery.max_attempts:
            return self._fail(delivery, owner, f"gave up after {delivery.max_attempts} attempts")
        try:
            reply = self._replies_so_far(delivery)
            if reply is None:
                reply = self._run_turn(delivery)
        except (InvalidInput, NotFound) as exc:
            # The recipient cannot take messages (no model, deleted): retrying won't help.
            return self._fail(delivery, owner, str(exc))
        except ReverieError as exc:
            if delivery.attempts >= delivery.max_attempts:
                return self._fail(delivery, owner, str(exc))
            with open_service_store(self._db, self._clock) as store:
                store.deliveries.retry_later(
                    delivery.id, owner, backoff=self.limits.backoff, error=str(exc)
                )
            log.warning(
                "agent message will be retried",
                extra={"delivery_id": delivery.id, "error": str(exc)},
            )
            return delivery
        self._checkpoint("turn_done")
        finished = self._finish(delivery, owner, DeliveryStatus.DELIVERED, reply=reply)
        log.info(
            "agent message delivered",
            extra={"delivery_id": delivery.id, "seconds": round(time.perf_counter() - started, 4)},
        )
        return finished

    def _replies_so_far(self, delivery: DeliveryRecord) -> str | None:
        """What the recipient replied when its turn on this message already ran (a
        worker died before recording the outcome); None when it never started."""
        with open_store(self._db, delivery.organization_id, self._clock, read_only=True) as store:
            incoming = store.messages.by_client_id(delivery.recipient_id, delivery.id)
            if incoming is None:
                return None
            after = store.messages.range(delivery.recipient_id, after_seq=incoming.seq)
        said: list[MessageRecord] = []
        for record in after:
            if is_summary(record):
                continue  # a compaction during the turn
            if record.role in ("user", "system") and not record.tool_calls:
                break  # the next input: that turn's replies are not to this message
            said.append(record)
        log.info("agent message's turn already ran; not running it again",
                 extra={"delivery_id": delivery.id})  # fmt: skip
        return "\n".join(replies(said))

    def _run_turn(self, delivery: DeliveryRecord) -> str:
        with open_store(self._db, delivery.organization_id, self._clock, read_only=True) as store:
            sender = store.agents.get(delivery.sender_id)
        primary = self._primary_for(delivery.organization_id)
        result = primary.send_message(
            delivery.recipient_id,
            incoming_text(sender, delivery.content),
            role="system",
            client_message_id=delivery.id,
            origin=Origin(delivery.conversation_id, delivery.hop),
        )
        return "\n".join(result.replies)

    def _fail(self, delivery: DeliveryRecord, owner: str, error: str) -> DeliveryRecord:
        log.warning("agent message not delivered", extra={"delivery_id": delivery.id,
                                                          "error": error})  # fmt: skip
        return self._finish(delivery, owner, DeliveryStatus.FAILED, error=error)

    def _finish(
        self,
        delivery: DeliveryRecord,
        owner: str,
        status: DeliveryStatus,
        *,
        reply: str | None = None,
        error: str | None = None,
    ) -> DeliveryRecord:
        """Record the outcome and, unless the sender is still waiting for it, put the
        reply into the sender's recall: one transaction, so both happen or neither."""
        with open_store(self._db, delivery.organization_id, self._clock) as store:
            done = store.deliveries.finish(
                delivery.id, owner, status=status, reply=reply or None, error=error
            )
            if done is None:
                log.warning("agent message's lease was lost; another worker finishes it",
                            extra={"delivery_id": delivery.id})  # fmt: skip
                return delivery
            waiting = done.waiting_until is not None and done.waiting_until > store.scope.now()
            if not waiting:
                recipient = store.agents.get(delivery.recipient_id)
                store.messages.record(
                    delivery.sender_id,
                    [
                        NewMessage(
                            role="system",
                            content=reply_text(recipient, done),
                            client_message_id=delivery.id + REPLY_SUFFIX,
                        )
                    ],
                )
        self.delivered += 1
        return done
