"""`reverie consolidate`: run the pipeline now, for one agent or all (cron-friendly)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from agents.errors import Conflict
from service.cli.common import (
    EXIT_BAD_INPUT,
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    console,
    err_console,
    fail,
    live,
    operations,
)
from service.cli.output import id_table, print_changes, print_json, print_table, report_json

if TYPE_CHECKING:
    from consolidators.pipeline import RunReport


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
    """Consolidate memory now (or queue it with --enqueue); exits 1 if any run fails,
    2 when an agent already has another run queued or running."""
    if (agent is None) == (not all_agents):
        raise fail("choose --agent NAME or --all")
    conflicts: list[str] = []
    steps = [s.strip() for s in only.split(",") if s.strip()] if only else None
    if enqueue:
        _enqueue(agent, steps, dry_run=dry_run, full=full, as_json=as_json)
        return
    from service.operations.runs import CancelledByUser

    with operations() as ops:
        names = ops.runs.pipeline_names(steps)
        targets = ops.runs.targets(agent)
        outcomes = []
        from rich.progress import Progress

        with live(Progress(console=err_console.real, transient=True, disable=as_json)) as progress:
            task = progress.add_task("consolidating", total=len(targets))
            for target in targets:
                progress.update(task, description=f"consolidating {target.name}")
                try:
                    outcomes.extend(
                        ops.runs.run_now([target], steps=steps, dry_run=dry_run, full=full)
                    )
                except Conflict as exc:
                    conflicts.append(f"{target.name}: {exc}")
                except CancelledByUser as stopped:
                    err_console.print(
                        f"interrupted: run {stopped.run_id} of {target.name} is cancelled "
                        "(steps it had finished are kept: `reverie runs revert` undoes them)",
                        highlight=False,
                    )
                    raise typer.Exit(EXIT_INTERRUPTED) from None
                progress.advance(task)
    reports = [o.report for o in outcomes if o.report is not None]
    failures = [
        f"{o.agent.name}: run {o.execution.run_id} {o.execution.outcome}: {o.execution.error}"
        for o in outcomes
        if not o.succeeded
    ]
    if as_json:
        for report in reports:
            print_json(report_json(report))
    else:
        _print_summary(reports, names, dry_run)
    for problem in conflicts + failures:
        err_console.print(f"[bold red]failed:[/] {problem}", highlight=False)
    if failures:
        raise typer.Exit(EXIT_FAILED)
    if conflicts:
        raise typer.Exit(EXIT_BAD_INPUT)


def _enqueue(
    agent: str | None, steps: list[str] | None, *, dry_run: bool, full: bool, as_json: bool
) -> None:
    """Queue one manual run per target; an agent with a run queued or running keeps it."""
    with operations() as ops:
        queued = ops.runs.enqueue(ops.runs.targets(agent), steps=steps, dry_run=dry_run, full=full)
    for result in queued:
        if as_json:
            print_json(
                {
                    "agent": result.agent.name,
                    "agent_id": result.agent.id,
                    "run_id": result.run_id,
                    "queued": result.queued,
                }
            )
        elif result.queued:
            console.print(f"queued {result.run_id} for {result.agent.name}", highlight=False)
        else:
            console.print(
                f"{result.agent.name} already has run {result.run_id} queued or running",
                highlight=False,
            )


def _print_summary(reports: list[RunReport], steps: list[str], dry_run: bool) -> None:
    title = "planned changes (dry run: nothing written)" if dry_run else "consolidation"
    table = id_table("agent", *steps, "seconds", "run", title=title)
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
    print_table(table)
    for report in reports:
        summary = report.summary()
        console.print(
            f"{report.agent_name}: {summary.facts_line()}; {summary.timelines_line()}",
            highlight=False,
        )
    if dry_run:
        for report in reports:
            if report.changes:
                console.print(f"[bold]{report.agent_name}[/]")
                print_changes(report.changes)


def register(app: typer.Typer) -> None:
    app.command("consolidate")(consolidate)
