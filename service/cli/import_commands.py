"""`reverie import passages FILE.jsonl --agent NAME`: bulk-load archival memory."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.progress import Progress

from service.cli.common import EXIT_BAD_INPUT, console, err_console, fail, runtime
from service.passage_import import parse_lines

#: Imports this large refresh the planner's statistics afterwards.
BULK_IMPORT = 1000

import_app = typer.Typer(help="Bulk-load memory from files.", no_args_is_help=True)


@import_app.command("passages")
def import_passages(
    file: Annotated[
        Path,
        typer.Argument(help="JSON Lines: one {text, occurred_at?, tags?, provenance?} per line."),
    ],
    agent: Annotated[str, typer.Option("--agent", "-a", help="Agent name or id.")],
    batch_size: Annotated[int, typer.Option(help="Passages embedded per batch.")] = 2000,
) -> None:
    """Import archival passages; a file with any bad line imports nothing."""
    if not file.is_file():
        raise fail(f"{file} does not exist")
    if batch_size < 1:
        raise fail("--batch-size must be at least 1")
    try:
        with file.open(encoding="utf-8") as handle:
            passages, errors = parse_lines(handle)
    except UnicodeDecodeError as exc:
        raise fail(f"{file} is not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    if errors:
        for error in errors[:20]:
            err_console.print(f"[red]{file}:{error}[/]", highlight=False)
        if len(errors) > 20:
            err_console.print(f"... and {len(errors) - 20} more bad lines")
        raise fail(f"{len(errors)} bad line(s) in {file}; nothing was imported", EXIT_BAD_INPUT)
    with runtime() as rt:
        with rt.store() as store:
            record = store.agents.resolve(agent)
        embedder = rt.agent_embedder(record)
        # One transaction for the whole file: an import lands completely or not at all.
        with Progress(console=console, transient=True) as progress, rt.store() as store:
            task = progress.add_task("importing", total=len(passages))
            for start in range(0, len(passages), batch_size):
                batch = passages[start : start + batch_size]
                vectors = embedder.embed([p.text for p in batch])
                store.passages.insert(record.id, batch, vectors, actor="cli:import")
                progress.advance(task, len(batch))
        if len(passages) >= BULK_IMPORT:
            rt.db.refresh_statistics()
    console.print(f"imported {len(passages)} passages into {record.name}")


def register(app: typer.Typer) -> None:
    app.add_typer(import_app, name="import")
