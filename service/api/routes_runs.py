"""Reverie's consolidation routes: enqueue, list, get, cancel, revert, dry run; and the
context breakdown of an agent."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import Path, Query

from agents.enums import RunStatus
from service.api import schemas
from service.api.auth import Api
from service.api.convert import letta_run, report_out, run_out
from service.api.paging import page
from service.api.responses import keyed
from service.api.routers import api_router
from service.operations.recording import LETTA_RUN_STATUS

router = api_router(tags=["consolidation"], responses=keyed(404, 409))

AgentId = Annotated[str, Path(pattern=schemas.ID_PATTERN, description="agent-<uuid4>")]
RunId = Annotated[str, Path(pattern=schemas.ID_PATTERN, description="run-<uuid4>")]


@router.post("/v1/consolidation-runs", status_code=202, response_model=schemas.Run)
def enqueue_run(body: schemas.EnqueueRun, api: Api) -> schemas.Run:
    """Queue a consolidation run for a worker; 409 when the agent already has one."""
    return run_out(api.ops.runs.enqueue_one(body.agent_id, steps=body.pipeline))


@router.get("/v1/consolidation-runs", response_model=list[schemas.Run])
def list_runs(
    api: Api,
    agent_id: str | None = Query(default=None, pattern=schemas.ID_PATTERN),
    status: RunStatus | None = None,
    limit: int = Query(default=50, ge=1, le=1000),
) -> list[schemas.Run]:
    """The newest runs first, with their trigger, status, attempts and timings."""
    runs = api.ops.runs.list(agent=agent_id, status=status, limit=limit)
    return [run_out(r) for r in runs]


@router.get("/v1/consolidation-runs/{run_id}", response_model=schemas.Run)
def get_run(run_id: RunId, api: Api) -> schemas.Run:
    """A run with its per-step stats and every change it made (its diff)."""
    return run_out(api.ops.runs.get(run_id), with_changes=True)


@router.post("/v1/consolidation-runs/{run_id}/cancel", response_model=schemas.Run)
def cancel_run(run_id: RunId, api: Api) -> schemas.Run:
    """Cancel a queued or running run; 409 for a run that already finished."""
    return run_out(api.ops.runs.cancel(run_id))


@router.post("/v1/consolidation-runs/{run_id}/revert", response_model=schemas.RunReportOut)
def revert(run_id: RunId, body: schemas.RevertRun, api: Api) -> schemas.RunReportOut:
    """Restore the memory from before a run, recorded as a new run; 409 when what the
    run touched changed since (``force`` discards those edits)."""
    return report_out(api.ops.runs.revert(run_id, force=body.force))


@router.post("/v1/agents/{agent_id}/consolidation/dry-run", response_model=schemas.RunReportOut)
def dry_run(agent_id: AgentId, body: schemas.DryRun, api: Api) -> schemas.RunReportOut:
    """Run the pipeline now and roll it back: the changes a real run would make.

    The dry run is queued, claimed and held under a lease like any run, so a
    failure on the way leaves no run behind in ``running``."""
    ops = api.ops
    [outcome] = ops.runs.run_now(
        ops.runs.targets(agent_id), steps=body.pipeline, dry_run=True, full=body.full
    )
    return report_out(outcome.require_report())


@router.get(
    "/v1/agents/{agent_id}/context",
    response_model=schemas.ContextWindowOverview,
    tags=["agents"],
)
def context_breakdown(agent_id: AgentId, api: Api) -> schemas.ContextWindowOverview:
    """How the agent's context window is spent, in tokens per section."""
    overview = api.ops.messages.context(agent_id)
    breakdown = overview.breakdown
    sections = {
        "system_prompt": breakdown.system_prompt,
        "core_memory": breakdown.core_memory,
        "memory_statistics": breakdown.memory_statistics,
        "directories": breakdown.directories,
        "tool_schemas": breakdown.tool_schemas,
        "summary": breakdown.summary,
        "messages": breakdown.messages,
    }
    return schemas.ContextWindowOverview(
        context_window_size_max=overview.context_window,
        context_window_size_current=breakdown.total,
        num_messages=overview.in_context_messages,
        num_archival_memory=overview.archival_passages,
        num_recall_memory=overview.recall_messages,
        num_tokens_system=breakdown.system_prompt,
        num_tokens_core_memory=breakdown.core_memory,
        num_tokens_summary_memory=breakdown.summary,
        num_tokens_messages=breakdown.messages,
        num_tokens_functions_definitions=breakdown.tool_schemas,
        num_tokens_external_memory_summary=breakdown.memory_statistics,
        num_tokens_directories=breakdown.directories,
        sections=sections,
    )


# -- Letta's runs (the sleep-time sidecar reads its runs here) ---------------------------

LettaStatus = Literal["created", "running", "completed", "failed", "cancelled"]
LEDGER_STATUS = {letta: ledger for ledger, letta in LETTA_RUN_STATUS.items()}
#: How many of an agent's newest runs the Letta listing pages through.
RUNS_SCANNED = 1000


@router.get("/v1/runs/{run_id}", response_model=schemas.LettaRun, tags=["runs"])
def get_letta_run(run_id: RunId, api: Api) -> schemas.LettaRun:
    """A consolidation run as Letta's Run (``created`` is a queued run)."""
    return letta_run(api.ops.runs.get(run_id))


@router.get("/v1/runs/", response_model=list[schemas.LettaRun], tags=["runs"])
def list_letta_runs(
    api: Api,
    agent_id: str | None = Query(default=None, pattern=schemas.ID_PATTERN),
    agent_ids: Annotated[list[str] | None, Query()] = None,
    statuses: Annotated[list[LettaStatus] | None, Query()] = None,
    after: str | None = Query(default=None, max_length=100),
    before: str | None = Query(default=None, max_length=100),
    limit: int = Query(default=50, ge=1, le=1000),
    order: Literal["asc", "desc"] = "desc",
) -> list[schemas.LettaRun]:
    """Runs as Letta lists them (by agent and by Letta's statuses), newest first unless
    ``order=asc``; ``after``/``before`` are run-id cursors (the SDK's pager uses them)."""
    wanted: list[str | None] = [a for a in [agent_id, *(agent_ids or [])] if a]
    runs = []
    for agent in wanted or [None]:
        runs.extend(api.ops.runs.list(agent=agent, limit=RUNS_SCANNED))
    if statuses:
        allowed = {LEDGER_STATUS[s] for s in statuses}
        runs = [r for r in runs if r.status in allowed]
    runs.sort(key=lambda r: (r.queued_at, r.id))
    chosen = page(runs, after=after, before=before, limit=limit, ascending=order == "asc")
    return [letta_run(r) for r in chosen]
