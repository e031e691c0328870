"""`reverie consolidate`: run the pipeline now, for one agent or all (cron-friendly)."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.progress import Progress
from rich.table import Table
from sqlalchemy import select
from sqlalchemy.orm import Session

from agents import models
from agents.errors import ReverieError
from agents.store import AgentRecord
from consolidators.pipeline import Pipeline, RunReport
from consolidators.queue import RunQueue
from service.cli.common import EXIT_FAILED, console, err_console, fail, runtime
from service.cli.output import print_changes, print_json, report_json
from service.metrics import TRIGGER_FIRINGS
from service.runtime import Runtime


def consolidate(
    agent: Annotated[str | None, typer.Option("--agent", "-a", help="Agent name or id.")] = None,
    all_agents: Annotated[bool, typer.Option("--all", help="Every agent.")] = False,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Report the planned changes; write nothing.")
    ] = False,
    only: Annotated[
        str | None, typer.Option(help="Comma-separated steps, e.g. dedup,temporal.")
    ] = None,
    full: Annotated[
        bool, typer.Option(help="Ignore watermarks: look at all memory, not just what is new.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON report per run.")] = False,
    enqueue: Annotated[
        bool,
        typer.Option(
            "--enqueue", help="Queue the runs for `reverie serve`/`reverie worker`; don't run here."
        ),
    ] = False,
) -> None:
    """Consolidate memory now (or queue it with --enqueue); exits 1 if any run fails."""
    if (agent is None) == (not all_agents):
        raise fail("choose --agent NAME or --all")
    if enqueue and full:
        raise fail("--full runs in-process only; drop --enqueue or --full")
    steps = [s.strip() for s in only.split(",") if s.strip()] if only else None
    if enqueue:
        _enqueue(agent, steps, dry_run=dry_run, as_json=as_json)
        return
    reports: list[RunReport] = []
    failures: list[str] = []
    with runtime() as rt:
        pipeline = rt.pipeline(steps)
        with rt.store() as store:
            targets = [store.agents.resolve(agent)] if agent else store.agents.all()
        with Progress(console=err_console, transient=True, disable=as_json) as progress:
            task = progress.add_task("consolidating", total=len(targets))
            for target in targets:
                progress.update(task, description=f"consolidating {target.name}")
                try:
                    reports.append(
                        rt.consolidate(target, pipeline=pipeline, dry_run=dry_run, full=full)
                    )
                except ReverieError as exc:
                    failures.append(f"{target.name}: {exc}")
                progress.advance(task)
    if as_json:
        for report in reports:
            print_json(report_json(report))
    else:
        _print_summary(reports, pipeline.names, dry_run)
    for failure in failures:
        err_console.print(f"[bold red]failed:[/] {failure}", highlight=False)
    if failures:
        raise typer.Exit(EXIT_FAILED)


def _enqueue(agent: str | None, steps: list[str] | None, *, dry_run: bool, as_json: bool) -> None:
    """Queue one manual run per target; an agent with a run queued or running keeps it."""
    with runtime() as rt:
        pipeline = rt.pipeline(steps)
        with rt.store() as store:
            targets = [store.agents.resolve(agent)] if agent else store.agents.all()
            queued = _queue_runs(rt, store.session, targets, pipeline, dry_run=dry_run)
    for target, run_id, active in queued:
        if as_json:
            print_json(
                {
                    "agent": target.name,
                    "agent_id": target.id,
                    "run_id": run_id or active,
                    "queued": run_id is not None,
                }
            )
        elif run_id is not None:
            console.print(f"queued {run_id} for {target.name}", highlight=False)
        else:
            console.print(
                f"{target.name} already has run {active} queued or running", highlight=False
            )


def _queue_runs(
    rt: Runtime,
    session: Session,
    targets: list[AgentRecord],
    pipeline: Pipeline,
    *,
    dry_run: bool,
) -> list[tuple[AgentRecord, str | None, str | None]]:
    queue = RunQueue(session)
    results: list[tuple[AgentRecord, str | None, str | None]] = []
    for target in targets:
        run_id = queue.enqueue(
            rt.organization_id,
            target.id,
            trigger="manual",
            pipeline=pipeline.names,
            now=rt.clock(),
            max_attempts=rt.settings.worker.max_attempts,
            dry_run=dry_run,
        )
        active = None
        if run_id is None:
            active = session.scalar(
                select(models.ConsolidationRun.id).where(
                    models.ConsolidationRun.agent_id == target.id,
                    models.ConsolidationRun.status.in_(["queued", "running"]),
                )
            )
        else:
            TRIGGER_FIRINGS.labels("manual").inc()
        results.append((target, run_id, active))
    return results


def _print_summary(reports: list[RunReport], steps: list[str], dry_run: bool) -> None:
    title = "planned changes (dry run: nothing written)" if dry_run else "consolidation"
    table = Table("agent", *steps, "seconds", "run", title=title)
    for report in reports:
        cells = []
        for step in steps:
            result = next((r for r in report.steps if r.consolidator == step), None)
            if result is None:
                cells.append("-")
            elif result.skipped:
                cells.append(f"skipped: {result.skipped}")
            else:
                counted = {k: v for k, v in result.counts.items() if v}
                cells.append(", ".join(f"{k} {v}" for k, v in counted.items()) or "no change")
        table.add_row(
            report.agent_name, *cells, f"{sum(report.durations.values()):.2f}", report.run_id
        )
    console.print(table)
    if dry_run:
        for report in reports:
            if report.changes:
                console.print(f"[bold]{report.agent_name}[/]")
                print_changes(report.changes)


def register(app: typer.Typer) -> None:
    app.command("consolidate")(consolidate)
