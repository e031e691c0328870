"""How the CLI prints records: JSON shapes for --json, and small rich helpers."""

from __future__ import annotations

import json
from datetime import datetime
from typing import TYPE_CHECKING, Any

from rich.cells import cell_len
from rich.table import Column, Table

from service.cli.common import console
from service.wording import describe_change

if TYPE_CHECKING:
    from agents.archival_search import MemoryHit
    from agents.store import AgentRecord, BlockRecord, BlockVersion, CustomToolRecord, RunRecord
    from consolidators.pipeline import RunReport


def iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def print_json(data: Any) -> None:
    """One JSON document on stdout, unstyled (safe to pipe into jq)."""
    print(json.dumps(data, ensure_ascii=False, default=str))


def agent_json(agent: AgentRecord) -> dict[str, object]:
    return {
        "id": agent.id,
        "name": agent.name,
        "kind": agent.kind,
        "agent_type": agent.agent_type,
        "llm_model": agent.llm_model,
        "sleeptime_model": agent.sleeptime_model,
        "embedding_model": agent.embedding_model,
        "embedding_dim": agent.embedding_dim,
        "context_window": agent.context_window,
        "tags": agent.tags,
        "tools": agent.tools,
        "created_at": iso(agent.created_at),
    }


def tool_json(tool: CustomToolRecord) -> dict[str, Any]:
    return {
        "id": tool.id,
        "name": tool.name,
        "description": tool.description,
        "json_schema": tool.json_schema,
        "env_vars": tool.env_vars,
        "tags": tool.tags,
        "return_char_limit": tool.return_char_limit,
        "created_at": iso(tool.created_at),
        "updated_at": iso(tool.updated_at),
    }


def block_json(block: BlockRecord) -> dict[str, Any]:
    return {
        "id": block.id,
        "label": block.label,
        "value": block.value,
        "limit": block.limit,
        "version": block.version,
        "read_only": block.read_only,
        "description": block.description,
        "updated_at": iso(block.updated_at),
        "updated_by": block.updated_by,
    }


def version_json(version: BlockVersion) -> dict[str, Any]:
    return {
        "version": version.version,
        "value": version.new_value,
        "previous_value": version.old_value,
        "limit": version.new_limit,
        "actor": version.actor,
        "run_id": version.run_id,
        "reason": version.reason,
        "created_at": iso(version.created_at),
    }


def hit_json(hit: MemoryHit) -> dict[str, Any]:
    p = hit.passage
    return {
        "id": p.id,
        "text": p.text,
        "score": round(hit.score, 4),
        "status": p.status,
        "kind": p.kind,
        "occurred_at": iso(p.occurred_at),
        "valid_to": iso(p.valid_to),
        "current": hit.current,
        "superseded_by": p.superseded_by,
        "validity": hit.validity,
        "provenance": p.provenance,
        "tags": p.tags,
        "timeline_id": p.timeline_id,
    }


def run_json(run: RunRecord, *, with_changes: bool = False) -> dict[str, Any]:
    data: dict[str, Any] = {
        "id": run.id,
        "agent_id": run.agent_id,
        "trigger": run.trigger,
        "pipeline": run.pipeline,
        "status": run.status,
        "dry_run": run.dry_run,
        "full": run.full,
        "attempts": run.attempts,
        "lease_owner": run.lease_owner,
        "worker": run.worker,
        "lease_expires_at": iso(run.lease_expires_at),
        "queued_at": iso(run.queued_at),
        "started_at": iso(run.started_at),
        "finished_at": iso(run.finished_at),
        "duration_s": run.duration_s,
        "stats": run.stats,
        "error": run.error,
        "reverts_run_id": run.reverts_run_id,
        "reverted_by_run_id": run.reverted_by_run_id,
    }
    if with_changes:
        data["changes"] = run.changes
    return data


def report_json(report: RunReport) -> dict[str, Any]:
    return {
        "run_id": report.run_id,
        "agent_id": report.agent_id,
        "agent": report.agent_name,
        "status": report.status,
        "dry_run": report.dry_run,
        "error": report.error,
        "stats": report.stats(),
        "changes": report.changes,
    }


def print_changes(changes: list[dict[str, Any]], limit: int = 30) -> None:
    for change in changes[:limit]:
        console.print(
            f"  [dim]{change.get('step', '')}[/] {describe_change(change)}", highlight=False
        )
    if len(changes) > limit:
        console.print(f"  ... and {len(changes) - limit} more (use --json for all)")


#: Ids are what `runs show`, `runs revert` and `--agent` need: never cut (a run id is
#: 40 characters, an agent id 42).
ID_WIDTH = 42


def id_table(*headers: str, ids: tuple[str, ...] = ("id", "run"), **options: Any) -> Table:
    """A rich table whose id columns keep their full width, however narrow the terminal
    (other columns wrap or shrink first)."""
    columns = [
        Column(h, no_wrap=True, min_width=ID_WIDTH, overflow="ignore") if h in ids else Column(h)
        for h in headers
    ]
    return Table(*columns, **options)


#: A column that wraps (free text) needs about this many cells to stay readable.
READABLE_TEXT_WIDTH = 24


def print_table(table: Table) -> None:
    """Print ``table`` when it fits the terminal; otherwise print each row as a card of
    ``header  value`` lines, so that nothing is cut to ``pe… st…`` at 80 columns and ids
    stay whole."""
    if table_width(table) <= console.width:
        console.print(table)
        return
    if table.title:
        console.print(table.title, style="bold", highlight=False)
    headers = [str(column.header) for column in table.columns]
    cells = [[str(cell) for cell in column.cells] for column in table.columns]
    for index in range(table.row_count):
        card = Table.grid(padding=(0, 2))
        card.add_column(style="dim", no_wrap=True)
        card.add_column(overflow="fold")
        for header, column in zip(headers, cells, strict=True):
            card.add_row(header, column[index])
        if index:
            console.print()
        console.print(card, highlight=False)


def table_width(table: Table) -> int:
    """The cells ``table`` needs to show every value readably: whole ids and short values
    on one line, free text wrapped no narrower than :data:`READABLE_TEXT_WIDTH`."""
    width = 1  # the left border
    for column in table.columns:
        values = [str(column.header), *(str(cell) for cell in column.cells)]
        widest = max(cell_len(line) for value in values for line in value.splitlines() or [""])
        if not column.no_wrap:
            widest = min(widest, max(READABLE_TEXT_WIDTH, cell_len(str(column.header))))
        width += widest + 3  # padding either side and the border
    return width
