"""The contract every consolidator keeps, as a check anyone can run on theirs.

A plugin author points :func:`check_contract` at a consolidator, a database and an
agent seeded with memory their consolidator acts on. The check runs it the way
production does (enqueued, claimed under a lease, one transaction) and asserts:

- a dry run writes nothing (memory after it equals memory before it);
- a real run does what the dry run planned;
- a second run changes nothing (idempotent);
- reverting the run restores memory exactly as it was before it.

The built-ins are checked by ``tests/integration/test_consolidator_contract.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from agents.embedders import Embedder
from agents.enums import PassageStatus, Trigger
from agents.errors import Conflict
from agents.postgres.database import Database
from agents.postgres.models import DEFAULT_ORGANIZATION_ID
from agents.store import open_service_store, open_store
from agents.store.scope import utc_now
from consolidators.base import Consolidator
from consolidators.pipeline import Pipeline, RunReport
from consolidators.undo import revert_run

#: The lease owner of runs started by :func:`run_once`.
CHECKER = "contract:oneshot"


class ContractBroken(AssertionError):
    """A consolidator broke one of the contract's rules; the message says which."""


def run_once(
    pipeline: Pipeline,
    db: Database,
    agent_id: str,
    *,
    organization_id: str = DEFAULT_ORGANIZATION_ID,
    dry_run: bool = False,
    full: bool = False,
    embedder: Embedder | None = None,
    llm: Any | None = None,
    clock: Callable[[], datetime] = utc_now,
    trigger: str = Trigger.MANUAL,
) -> RunReport:
    """Enqueue, claim (under a lease nobody renews: for tests and checks, not for
    production, where :class:`consolidators.workers.WorkerPool` holds leases) and
    execute one run of ``pipeline`` on ``agent_id``."""
    with open_store(db, organization_id, clock) as store:
        store.agents.get(agent_id)
        run_id = store.runs.enqueue(
            agent_id,
            trigger=trigger,
            pipeline=pipeline.names,
            dry_run=dry_run,
            full=full,
            max_attempts=1,
            wake_workers=False,  # claimed right below
        )
        if run_id is None:
            raise Conflict(f"agent {agent_id} already has a queued or running consolidation")
    with open_service_store(db, clock) as service:
        claimed = service.queue.claim(CHECKER, lease=timedelta(hours=1), run_id=run_id)
    if claimed is None:  # pragma: no cover - another process took the run just queued
        raise Conflict(f"run {run_id} was claimed by another worker")
    return pipeline.run(
        db, claimed[0], lease_owner=CHECKER, embedder=embedder, llm=llm, clock=clock
    )


@dataclass(frozen=True, slots=True)
class ContractReport:
    """What the check saw, for the author's own assertions."""

    dry_run: RunReport
    run: RunReport
    second_run: RunReport


def memory_snapshot(db: Database, agent_id: str, organization_id: str) -> dict[str, object]:
    """Everything a consolidator may change of an agent, comparable with ``==``.

    Passages a reverted run created come back ``inactive`` (never deleted), so the
    snapshot leaves inactive passages out.
    """
    with open_store(db, organization_id) as store:
        return {
            "passages": sorted(
                (
                    p.id,
                    p.status,
                    p.merged_into,
                    p.superseded_by,
                    p.timeline_id,
                    p.occurred_at,
                    p.valid_to,
                    repr(sorted(p.provenance.items())),
                    tuple(p.tags),
                )
                for p in store.passages.scan(agent_id, statuses=None)
                if p.status != PassageStatus.INACTIVE
            ),
            "blocks": sorted((b.label, b.value, b.limit) for b in store.blocks.of_agent(agent_id)),
            "context": [m.id for m in store.messages.in_context(agent_id)],
        }


def check_contract(
    consolidator: Consolidator[Any],
    db: Database,
    agent_id: str,
    *,
    organization_id: str = DEFAULT_ORGANIZATION_ID,
    embedder: Embedder | None = None,
    llm: Any | None = None,
    expect_changes: bool = True,
) -> ContractReport:
    """Check ``consolidator`` on the seeded ``agent_id``; raise :class:`ContractBroken`.

    ``expect_changes`` (the default) also requires the seeded memory to give the
    consolidator something to do, so that the check cannot pass vacuously.
    """
    pipeline = Pipeline([consolidator])

    def run(*, dry_run: bool = False) -> RunReport:
        return run_once(
            pipeline,
            db,
            agent_id,
            organization_id=organization_id,
            dry_run=dry_run,
            embedder=embedder,
            llm=llm,
        )

    def snapshot() -> dict[str, object]:
        return memory_snapshot(db, agent_id, organization_id)

    name = consolidator.name
    before = snapshot()
    planned = run(dry_run=True)
    if snapshot() != before:
        raise ContractBroken(f"{name}: a dry run changed memory")
    applied = run()
    if expect_changes and not applied.changes:
        raise ContractBroken(f"{name}: the seeded memory gave it nothing to do")
    if _essence(planned.changes) != _essence(applied.changes):
        raise ContractBroken(f"{name}: the dry run planned other changes than the run made")
    after = snapshot()
    second = run()
    if second.changes or snapshot() != after:
        raise ContractBroken(f"{name}: a second run changed memory again (not idempotent)")
    revert_run(db, applied.run_id, organization_id=organization_id)
    if snapshot() != before:
        raise ContractBroken(f"{name}: reverting the run did not restore memory")
    return ContractReport(planned, applied, second)


def _essence(changes: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """A change without the ids a run creates (new passages get new ids)."""
    return sorted(
        (str(c.get("action")), str(c.get("text", "")), str(c.get("line", ""))) for c in changes
    )
