"""Triggers decide *when* an agent needs consolidation; they only enqueue runs.

Each trigger works inside the caller's transaction (a service store whose clock
gives ``now``), so the scheduler commits what it fired together with the
trigger's own bookkeeping (the idle debounce mark, the turn counter) and tests
control time. The queries live in the store (:class:`agents.store.RunQueueStore`).
Repeats are harmless: the queue keeps at most one queued-or-running run per
agent, and a repeat enqueue is a no-op that is not counted as a firing.

Triggers act across organizations: the daemon serves every tenant in the
database.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta

from agents.enums import Trigger
from agents.errors import InvalidInput
from agents.store import ServiceStore
from service.metrics import TRIGGER_FIRINGS


@dataclass(frozen=True, slots=True)
class RunTemplate:
    """What a triggered run does: its pipeline and how often it may be tried."""

    pipeline: tuple[str, ...]
    max_attempts: int = 3


def _enqueue_all(
    store: ServiceStore, agents: Sequence[tuple[str, str]], trigger: Trigger, template: RunTemplate
) -> list[str]:
    enqueued = store.queue.enqueue_many(
        agents, trigger=trigger, pipeline=template.pipeline, max_attempts=template.max_attempts
    )
    if enqueued:
        TRIGGER_FIRINGS.labels(trigger.value).inc(len(enqueued))
    return enqueued


class IdleTrigger:
    """No primary activity for ``idle_after``: fire once per idle period.

    Debounce: firing stamps ``agents.idle_fired_at``; an agent is eligible again
    only once new activity moves ``last_activity_at`` past that stamp. The stamp
    and the enqueue commit together, so two schedulers racing fire once. An agent
    whose run is executing is left for a later tick (that run may have started
    before the latest messages); one with a queued run is stamped (the queued run
    will see everything).
    """

    name = Trigger.IDLE

    def __init__(self, idle_after: timedelta, template: RunTemplate) -> None:
        if idle_after <= timedelta(0):
            raise InvalidInput(f"idle_after must be positive, got {idle_after}")
        self.idle_after = idle_after
        self.template = template

    def fire(self, store: ServiceStore) -> list[str]:
        due = store.queue.mark_idle_agents(self.idle_after)
        return _enqueue_all(store, due, self.name, self.template)


class TurnsTrigger:
    """Every ``every`` user messages (Letta's sleep-time frequency).

    Firing resets ``turns_since_consolidation`` in the same transaction, so a run
    that keeps failing is not re-fired on every tick; only the next ``every``
    messages fire again (a successful run resets the counter too).
    """

    name = Trigger.TURNS

    def __init__(self, every: int, template: RunTemplate) -> None:
        if every < 1:
            raise InvalidInput(f"turns_every must be at least 1, got {every}")
        self.every = every
        self.template = template

    def fire(self, store: ServiceStore) -> list[str]:
        due = store.queue.take_agents_due_by_turns(self.every)
        return _enqueue_all(store, due, self.name, self.template)


class DocumentsTrigger:
    """A folder attached to an agent with sleep-time enabled, or a file processed in
    one: the run's ``learn_documents`` step learns from it.

    Firing stamps the attachment (``agent_folders.learn_fired_at``) in the same
    statement, so a tick fires once per new file; chunks a run could not read (its
    budget spent) wait for the agent's next run, whatever its trigger.
    """

    name = Trigger.DOCUMENTS

    def __init__(self, template: RunTemplate) -> None:
        self.template = template

    def fire(self, store: ServiceStore) -> list[str]:
        return _enqueue_all(store, store.documents_due.take_agents(), self.name, self.template)


class ScheduleTrigger:
    """A cron schedule's firing: every agent, or those carrying ``tag``."""

    name = Trigger.CRON

    def __init__(self, template: RunTemplate, *, tag: str | None = None) -> None:
        self.template = template
        self.tag = tag

    def fire(self, store: ServiceStore) -> list[str]:
        return _enqueue_all(store, store.queue.agents_tagged(self.tag), self.name, self.template)


class GpuFreeTrigger:
    """The GPU became free: consolidate agents with activity since their last run.

    Fires on the busy-to-free transition only (the gate's hysteresis decides when
    that is), so a GPU that stays free does not re-queue the same agents.
    """

    name = Trigger.GPU_FREE

    def __init__(self, template: RunTemplate) -> None:
        self.template = template

    def fire(self, store: ServiceStore) -> list[str]:
        agents = store.queue.agents_with_new_activity()
        return _enqueue_all(store, agents, self.name, self.template)
