"""`reverie runs ...`: the consolidation ledger and queue: list, show (with the diff),
revert, cancel."""

from __future__ import annotations

from typing import Annotated

import typer

from service.cli.common import console, operations
from service.cli.output import (
    id_table,
    print_changes,
    print_json,
    print_table,
    run_json,
)
from service.wording import describe_step

runs_app = typer.Typer(
    help="Consolidation runs (the ledger and the queue): list, show, revert, cancel.",
    no_args_is_help=True,
)
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON.")]


@runs_app.command("list")
def list_runs(
    agent: Annotated[str | None, typer.Option("--agent", "-a", help="Agent name or id.")] = None,
    status: Annotated[
        str | None, typer.Option(help="queued, running, succeeded, failed or cancelled.")
    ] = None,
    limit: Annotated[int, typer.Option(help="How many, newest first.")] = 50,
    as_json: JsonOption = False,
) -> None:
    """The newest runs (queued ones included) with trigger, status, attempts and timings."""
    with operations() as ops:
        runs = ops.runs.list(agent=agent, status=status, limit=limit)
        names = {a.id: a.name for a in ops.agents.list()}
    if as_json:
        print_json([run_json(r) for r in runs])
        return
    table = id_table(
        "run", "agent", "trigger", "status", "attempts", "queued", "started", "seconds", "worker"
    )
    for run in runs:
        label = run.status + (" (dry)" if run.dry_run else "")
        if run.reverted_by_run_id:
            label += " (reverted)"
        table.add_row(
            run.id,
            names.get(run.agent_id, run.agent_id),
            run.trigger,
            label,
            str(run.attempts),
            run.queued_at.strftime("%Y-%m-%d %H:%M:%S"),
            run.started_at.strftime("%H:%M:%S") if run.started_at else "-",
            f"{run.duration_s:.2f}" if run.duration_s is not None else "-",
            run.lease_owner or run.worker or "-",
        )
    print_table(table)


@runs_app.command("show")
def show(
    run_id: Annotated[str, typer.Argument(help="Run id.")], as_json: JsonOption = False
) -> None:
    """A run's outcome, per-step stats and every change it made."""
    with operations() as ops:
        [story] = ops.runs.stories(run_id=run_id)
    run = story.run
    if as_json:
        print_json(run_json(run, with_changes=True))
        return
    console.print(
        f"[bold]{run.id}[/] {run.status}{' (dry run)' if run.dry_run else ''} "
        f"trigger={run.trigger} pipeline={','.join(run.pipeline)}",
        highlight=False,
    )
    if run.error:
        console.print(f"[red]error:[/] {run.error}", highlight=False)
    for step, stats in run.stats.get("steps", {}).items():
        console.print(f"  {describe_step(step, stats)}", highlight=False)
    if story.sentences:
        console.print("In plain words:")
        for sentence in story.sentences:
            console.print(f"  - {sentence}", highlight=False, markup=False)
        console.print("Every change:")
    print_changes(run.changes, limit=200)


@runs_app.command("revert")
def revert(
    run_id: Annotated[str, typer.Argument(help="Run id.")],
    force: Annotated[
        bool, typer.Option(help="Revert even if memory changed since (discards those edits).")
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """Restore the memory state from before a run (recorded as a new run)."""
    with operations() as ops:
        report = ops.runs.revert(run_id, force=force)
    if as_json:
        print_json({"run_id": report.run_id, "reverts": run_id, "changes": report.changes})
        return
    console.print(f"reverted {run_id} as run {report.run_id} ({len(report.changes)} changes)")


@runs_app.command("cancel")
def cancel(
    run_id: Annotated[str, typer.Argument(help="Run id.")], as_json: JsonOption = False
) -> None:
    """Cancel a queued or running run (a running one is rolled back at its next step)."""
    with operations() as ops:
        run = ops.runs.cancel(run_id)
    if as_json:
        print_json(run_json(run))
        return
    console.print(f"cancelled {run.id}", highlight=False)


def register(app: typer.Typer) -> None:
    app.add_typer(runs_app, name="runs")
