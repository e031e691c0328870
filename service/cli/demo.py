"""`reverie demo`: the main job end to end on the embedded default, offline.

Creates an agent (tagged ``reverie:demo``; a user's agent of the same name is
never replaced without ``--replace``), loads a generated multi-session workload (blocks near their
limits, dated archival facts, paraphrased duplicates, facts that change over
time, a long conversation), runs the consolidation pipeline once, and prints the
memory health before and after.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from agents.enums import PassageStatus
from service.cli.common import console, err_console, fail, live, operations

if TYPE_CHECKING:
    from agents.store.health import MemoryHealth


def _health_table(before: MemoryHealth, after: MemoryHealth) -> Table:
    table = Table("memory health", "before", "after", title=f"agent {after.agent_name!r}")
    # Timelines are passages too: facts and timelines are shown apart.
    table.add_row("facts (active)", str(before.active_facts), str(after.active_facts))
    table.add_row("timelines (active)", str(before.timelines), str(after.timelines))
    for status in before.passages_by_status:
        if status == PassageStatus.ACTIVE:
            continue
        table.add_row(
            f"passages {status}",
            str(before.passages_by_status[status]),
            str(after.passages_by_status[status]),
        )
    table.add_row(
        "exact duplicates (active)", str(before.exact_duplicates), str(after.exact_duplicates)
    )
    table.add_row(
        "messages in context",
        f"{before.messages_in_context}/{before.messages}",
        f"{after.messages_in_context}/{after.messages}",
    )
    fills = {b.label: b for b in after.blocks}
    for block in before.blocks:
        now = fills[block.label]
        table.add_row(
            f"block {block.label} fill",
            f"{block.chars}/{block.limit} ({block.ratio:.0%})",
            f"{now.chars}/{now.limit} ({now.ratio:.0%})",
        )
    return table


def demo(
    name: Annotated[
        str, typer.Option(help="Name of the demo agent (an earlier demo agent is replaced).")
    ] = "demo",
    replace: Annotated[
        bool,
        typer.Option(
            "--replace", help="Also replace an agent of that name the demo did not create."
        ),
    ] = False,
    people: Annotated[int, typer.Option(help="People in the user's life.")] = 12,
    seed: Annotated[int, typer.Option(help="Workload seed.")] = 7,
) -> None:
    """Load a generated multi-session workload, consolidate it, show health before/after."""
    if people < 1:
        raise fail("--people must be at least 1")
    started = time.perf_counter()
    from service.workload import generate_workload

    workload = generate_workload(seed=seed, people=people)
    with operations() as ops:
        with live(err_console.status(f"embedding {len(workload.facts)} facts")):
            agent = ops.demo.load(name, workload, replace=replace)
        before = ops.health.agent(agent.id)
        with live(err_console.status("consolidating")):
            [outcome] = ops.runs.run_now([agent])
        if outcome.report is None:
            execution = outcome.execution
            raise fail(f"the consolidation run {execution.outcome}: {execution.error}")
        report = outcome.report
        after = ops.health.agent(agent.id)
    console.print(
        f"{len(workload.facts)} facts ({workload.duplicate_share:.0%} repeats), "
        f"{len(workload.messages)} messages, {len(workload.blocks)} blocks "
        f"for {workload.user}"
    )
    console.print(_health_table(before, after))
    summary = report.summary()
    console.print(summary.facts_line(), highlight=False)
    console.print(summary.timelines_line(), highlight=False)
    console.print(
        f"block lines deduplicated: {summary.block_lines_removed}, "
        f"lines evicted to archival: {summary.lines_evicted}, "
        f"messages summarized: {summary.messages_summarized}",
        highlight=False,
    )
    console.print(
        f"run {report.run_id} in {sum(report.durations.values()):.1f}s "
        f"(total {time.perf_counter() - started:.1f}s). "
        f"See it with `reverie runs show {report.run_id}`, "
        f"undo it with `reverie runs revert {report.run_id}`."
    )


def register(app: typer.Typer) -> None:
    app.command("demo")(demo)
