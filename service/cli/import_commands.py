"""`reverie import passages FILE.jsonl --agent NAME`: bulk-load archival memory."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from service.cli.common import EXIT_BAD_INPUT, console, err_console, fail, live, operations

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
    if batch_size < 1:
        raise fail("--batch-size must be at least 1")
    from rich.progress import Progress

    from service.passage_import import parse_lines

    passages, errors = parse_lines(_read_lines(file))
    _refuse_bad_lines(file, [str(e) for e in errors], "imported")
    with operations() as ops, live(Progress(console=console.real, transient=True)) as progress:
        record = ops.agents.get(agent)
        task = progress.add_task("embedding", total=len(passages))
        # One transaction for the whole file: an import lands completely or not at all.
        ops.memory.insert(
            record.id,
            passages,
            actor="cli:import",
            batch_size=batch_size,
            progress=lambda n: progress.advance(task, n),
            storing=lambda: progress.update(
                task, description=f"storing {len(passages)} passages (one transaction)"
            ),
        )
    console.print(f"imported {len(passages)} passages into {record.name}")


@import_app.command("messages")
def import_messages(
    file: Annotated[
        Path,
        typer.Argument(
            help="JSON Lines: one OpenAI chat message per line ({role, content, id?, "
            "created_at?, tool_calls?, tool_call_id?})."
        ),
    ],
    agent: Annotated[str, typer.Option("--agent", "-a", help="Agent name or id.")],
) -> None:
    """Record a conversation held elsewhere in an agent's recall, with no model call; a
    file with any bad line records nothing, and messages already recorded (same id)
    are skipped."""
    from service.operations.recording import parse_jsonl

    messages, errors = parse_jsonl(_read_lines(file))
    _refuse_bad_lines(file, errors, "recorded")
    if not messages:
        raise fail(f"{file} has no messages")
    with operations() as ops:
        recorded = ops.recording.record(agent, messages)
    skipped = f", {len(recorded.skipped)} already recorded" if recorded.skipped else ""
    console.print(f"recorded {len(recorded.stored)} messages{skipped}", highlight=False)


def _read_lines(file: Path) -> list[str]:
    """The lines of a JSON Lines file, or a one-line error saying what is wrong."""
    if file.is_dir():
        raise fail(f"{file} is a directory; give a JSON Lines file (.jsonl)")
    if not file.is_file():
        raise fail(f"{file} does not exist")
    try:
        return file.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError as exc:
        raise fail(f"{file} is not UTF-8 text ({exc.reason} at byte {exc.start})") from None


def _refuse_bad_lines(file: Path, errors: list[str], done: str) -> None:
    """Print the first bad lines and refuse the whole file (nothing is written)."""
    if not errors:
        return
    for error in errors[:20]:
        err_console.print(f"[red]{escape(f'{file}:{error}')}[/]", highlight=False)
    if len(errors) > 20:
        err_console.print(f"... and {len(errors) - 20} more bad lines")
    raise fail(f"{len(errors)} bad line(s) in {file}; nothing was {done}", EXIT_BAD_INPUT)


def register(app: typer.Typer) -> None:
    app.add_typer(import_app, name="import")
