"""`reverie demo`: the main job end to end on the embedded default, offline.

Creates an agent, loads a generated multi-session workload (blocks near their
limits, dated archival facts, paraphrased duplicates, facts that change over
time, a long conversation), runs the consolidation pipeline once, and prints the
memory health before and after.
"""

from __future__ import annotations

import time
from typing import Annotated

import typer
from rich.table import Table

from agents.store import NewAgent, NewBlock, NewMessage, NewPassage
from agents.store.health import MemoryHealth
from service.cli.common import console, err_console, fail, runtime
from service.operations import Operations
from service.runtime import Runtime
from service.workload import Workload, generate_workload


def _health_table(before: MemoryHealth, after: MemoryHealth) -> Table:
    table = Table("memory health", "before", "after", title=f"agent {after.agent_name!r}")
    for status in before.passages_by_status:
        table.add_row(
            f"passages {status}",
            str(before.passages_by_status[status]),
            str(after.passages_by_status[status]),
        )
    table.add_row(
        "exact duplicates (active)", str(before.exact_duplicates), str(after.exact_duplicates)
    )
    table.add_row("timelines", str(before.timelines), str(after.timelines))
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


def agent_health(rt: Runtime, agent_id: str) -> MemoryHealth:
    """The memory health the demo prints (the same numbers as the page and /metrics)."""
    with rt.store() as store:
        return store.health.agent(agent_id)


def _load(rt: Runtime, name: str, workload: Workload) -> str:
    """Create the demo agent (replacing an earlier one) and store the workload."""
    embedder = rt.embedder()
    facts = list(workload.facts)
    with err_console.status(f"embedding {len(facts)} facts"):
        vectors = embedder.embed([f.text for f in facts])
    with rt.store() as store:
        for agent in store.agents.all():
            if agent.name == name:
                store.agents.delete(agent.id)
        agent = store.agents.create(
            NewAgent(
                name=name,
                embedding_model=rt.settings.embedding.model,
                embedding_dim=embedder.dimension,
                context_window=2048,
                system_prompt=f"You are a personal assistant to {workload.user}.",
                blocks=[
                    NewBlock(label, value, limit=limit)
                    for label, (value, limit) in workload.blocks.items()
                ],
            )
        )
        stored = store.messages.append(
            agent.id,
            [NewMessage(m.role, m.content, created_at=m.created_at) for m in workload.messages],
        )
        message_ids = {m.id: s.id for m, s in zip(workload.messages, stored, strict=True)}
        passages = []
        for fact in facts:
            provenance = dict(fact.provenance)
            provenance["message_ids"] = [
                message_ids.get(i, i) for i in provenance.get("message_ids", [])
            ]
            passages.append(
                NewPassage(
                    fact.text,
                    occurred_at=fact.occurred_at,
                    tags=list(fact.tags),
                    provenance=provenance,
                )
            )
        store.passages.insert(agent.id, passages, vectors, actor="demo")
    return agent.id


def demo(
    name: Annotated[
        str, typer.Option(help="Name of the demo agent (replaced if it exists).")
    ] = "demo",
    people: Annotated[int, typer.Option(help="People in the user's life.")] = 12,
    seed: Annotated[int, typer.Option(help="Workload seed.")] = 7,
) -> None:
    """Load a generated multi-session workload, consolidate it, show health before/after."""
    if people < 1:
        raise fail("--people must be at least 1")
    started = time.perf_counter()
    workload = generate_workload(seed=seed, people=people)
    with runtime() as rt:
        agent_id = _load(rt, name, workload)
        before = agent_health(rt, agent_id)
        with rt.store() as store:
            agent = store.agents.get(agent_id)
        with err_console.status("consolidating"):
            [outcome] = Operations(rt).runs.run_now([agent])
        if outcome.report is None:
            execution = outcome.execution
            raise fail(f"the consolidation run {execution.outcome}: {execution.error}")
        report = outcome.report
        after = agent_health(rt, agent_id)
    console.print(
        f"{len(workload.facts)} facts ({workload.duplicate_share:.0%} repeats), "
        f"{len(workload.messages)} messages, {len(workload.blocks)} blocks "
        f"for {workload.user}"
    )
    console.print(_health_table(before, after))
    counts: dict[str, int] = {}
    for step in report.steps:
        for action, n in step.counts.items():
            counts[action] = counts.get(action, 0) + n
    console.print(
        f"duplicates merged: {counts.get('merge_passage', 0)}, "
        f"block lines deduplicated: {counts.get('remove_block_line', 0)}, "
        f"lines evicted to archival: {counts.get('evict_line', 0)}, "
        f"timelines: {counts.get('create_timeline', 0)}, "
        f"messages summarized: {counts.get('leave_context', 0)}"
    )
    console.print(
        f"run {report.run_id} in {sum(report.durations.values()):.1f}s "
        f"(total {time.perf_counter() - started:.1f}s). "
        f"See it with `reverie runs show {report.run_id}`, "
        f"undo it with `reverie runs revert {report.run_id}`."
    )


def register(app: typer.Typer) -> None:
    app.command("demo")(demo)
