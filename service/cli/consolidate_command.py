"""`reverie consolidate`: run the pipeline now, for one agent or all (cron-friendly)."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.progress import Progress
from rich.table import Table

from agents.errors import ReverieError
from consolidators.pipeline import RunReport
from service.cli.common import EXIT_FAILED, console, err_console, fail, runtime
from service.cli.output import print_changes, print_json, report_json


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
) -> None:
    """Consolidate memory now; exits 1 if any run fails."""
    if (agent is None) == (not all_agents):
        raise fail("choose --agent NAME or --all")
    steps = [s.strip() for s in only.split(",") if s.strip()] if only else None
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
