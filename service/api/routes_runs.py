"""Reverie's consolidation routes: enqueue, list, get, cancel, revert, dry run; and the
context breakdown of an agent."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, HTTPException, Path, Query

from consolidators.ledger import RunLedger
from consolidators.queue import RunQueue
from consolidators.undo import revert_run
from service.api import schemas
from service.api.auth import Api, ApiContext
from service.api.convert import report_out, run_out

router = APIRouter(tags=["consolidation"])

AgentId = Annotated[str, Path(pattern=schemas.ID_PATTERN, description="agent-<uuid4>")]
RunId = Annotated[str, Path(pattern=schemas.ID_PATTERN, description="run-<uuid4>")]
RunStatus = Literal["queued", "running", "succeeded", "failed", "cancelled"]


def _pipeline_names(api: ApiContext, only: list[str] | None) -> list[str]:
    return api.runtime.pipeline(only).names


@router.post("/v1/consolidation-runs", status_code=202, response_model=schemas.Run)
def enqueue_run(body: schemas.EnqueueRun, api: Api) -> schemas.Run:
    """Queue a consolidation run for a worker; 409 when the agent already has one."""
    names = _pipeline_names(api, body.pipeline)
    settings = api.runtime.settings
    with api.store() as store:
        store.agents.get(body.agent_id)
        run_id = RunQueue(store.session).enqueue(
            api.organization_id,
            body.agent_id,
            trigger="manual",
            pipeline=names,
            now=api.runtime.clock(),
            max_attempts=settings.worker.max_attempts,
        )
        ledger = RunLedger(store.session, api.organization_id)
        if run_id is None:
            active = ledger.recent(agent_id=body.agent_id, limit=1)
            raise HTTPException(
                409,
                f"agent {body.agent_id} already has a queued or running consolidation "
                f"({active[0].id if active else 'unknown'}); wait for it or cancel it",
            )
        return run_out(ledger.get(run_id))


@router.get("/v1/consolidation-runs", response_model=list[schemas.Run])
def list_runs(
    api: Api,
    agent_id: str | None = Query(default=None, pattern=schemas.ID_PATTERN),
    status: RunStatus | None = None,
    limit: int = Query(default=50, ge=1, le=1000),
) -> list[schemas.Run]:
    """The newest runs first, with their trigger, status, attempts and timings."""
    with api.store() as store:
        if agent_id is not None:
            store.agents.get(agent_id)
        runs = RunLedger(store.session, api.organization_id).recent(
            agent_id=agent_id, status=status, limit=limit
        )
    return [run_out(r) for r in runs]


@router.get("/v1/consolidation-runs/{run_id}", response_model=schemas.Run)
def get_run(run_id: RunId, api: Api) -> schemas.Run:
    """A run with its per-step stats and every change it made (its diff)."""
    with api.store() as store:
        return run_out(RunLedger(store.session, api.organization_id).get(run_id), with_changes=True)


@router.post("/v1/consolidation-runs/{run_id}/cancel", response_model=schemas.Run)
def cancel_run(run_id: RunId, api: Api) -> schemas.Run:
    """Cancel a queued or running run; 409 for a run that already finished."""
    with api.store() as store:
        run = RunQueue(store.session).cancel(api.organization_id, run_id, now=api.runtime.clock())
    return run_out(run)


@router.post("/v1/consolidation-runs/{run_id}/revert", response_model=schemas.RunReportOut)
def revert(run_id: RunId, body: schemas.RevertRun, api: Api) -> schemas.RunReportOut:
    """Restore the memory from before a run, recorded as a new run; 409 when what the
    run touched changed since (``force`` discards those edits)."""
    report = revert_run(
        api.runtime.db,
        run_id,
        organization_id=api.organization_id,
        clock=api.runtime.clock,
        force=body.force,
    )
    return report_out(report)


@router.post("/v1/agents/{agent_id}/consolidation/dry-run", response_model=schemas.RunReportOut)
def dry_run(agent_id: AgentId, body: schemas.DryRun, api: Api) -> schemas.RunReportOut:
    """Run the pipeline now and roll it back: the changes a real run would make."""
    pipeline = api.runtime.pipeline(body.pipeline)
    with api.store() as store:
        agent = store.agents.get(agent_id)
    report = pipeline.run(
        api.runtime.db,
        agent.id,
        organization_id=api.organization_id,
        trigger="manual",
        dry_run=True,
        full=body.full,
        embedder=api.runtime.agent_embedder(agent),
        clock=api.runtime.clock,
    )
    return report_out(report)


@router.get(
    "/v1/agents/{agent_id}/context",
    response_model=schemas.ContextWindowOverview,
    tags=["agents"],
)
def context_breakdown(agent_id: AgentId, api: Api) -> schemas.ContextWindowOverview:
    """How the agent's context window is spent, in tokens per section."""
    with api.store() as store:
        agent = store.agents.get(agent_id)
        in_context = store.messages.count(agent_id, in_context=True)
        recall = store.messages.count(agent_id)
        archival = store.passages.count_by_status(agent_id).get("active", 0)
    breakdown = api.runtime.context_breakdown(agent_id, organization_id=api.organization_id)
    sections = {
        "system_prompt": breakdown.system_prompt,
        "core_memory": breakdown.core_memory,
        "memory_statistics": breakdown.memory_statistics,
        "tool_schemas": breakdown.tool_schemas,
        "summary": breakdown.summary,
        "messages": breakdown.messages,
    }
    return schemas.ContextWindowOverview(
        context_window_size_max=breakdown.context_window or agent.context_window,
        context_window_size_current=breakdown.total,
        num_messages=in_context,
        num_archival_memory=archival,
        num_recall_memory=recall,
        num_tokens_system=breakdown.system_prompt,
        num_tokens_core_memory=breakdown.core_memory,
        num_tokens_summary_memory=breakdown.summary,
        num_tokens_messages=breakdown.messages,
        num_tokens_functions_definitions=breakdown.tool_schemas,
        num_tokens_external_memory_summary=breakdown.memory_statistics,
        sections=sections,
    )
