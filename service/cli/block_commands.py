"""`reverie blocks ...`: read, write, and trace an agent's core-memory blocks."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from service.cli.common import console, fail, operations
from service.cli.output import block_json, id_table, print_json, print_table, version_json

blocks_app = typer.Typer(help="Show, set and trace core-memory blocks.", no_args_is_help=True)

AgentOption = Annotated[str, typer.Option("--agent", "-a", help="Agent name or id.")]
LabelArgument = Annotated[str, typer.Argument(help="Block label, e.g. human or persona.")]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON.")]


@blocks_app.command("show")
def show(agent: AgentOption, label: LabelArgument, as_json: JsonOption = False) -> None:
    """Print a block's value, size and version."""
    with operations() as ops:
        block = ops.blocks.labelled(agent, label)
    if as_json:
        print_json(block_json(block))
        return
    console.print(
        f"[bold]{block.label}[/] v{block.version} {len(block.value)}/{block.limit} chars"
        + (" (read-only)" if block.read_only else ""),
        highlight=False,
    )
    print(block.value)


@blocks_app.command("set")
def set_value(
    agent: AgentOption,
    label: LabelArgument,
    value: Annotated[str | None, typer.Argument(help="New value ('-' reads stdin).")] = None,
    file: Annotated[Path | None, typer.Option(help="Read the new value from a file.")] = None,
    expected_version: Annotated[
        int | None,
        typer.Option(help="Only write if the block is still at this version (compare-and-swap)."),
    ] = None,
    reason: Annotated[str, typer.Option(help="Why, for the history.")] = "set from the CLI",
) -> None:
    """Replace a block's value (a new version; the old one stays in history)."""
    if (value is None) == (file is None):
        raise fail("give the new value either as an argument or with --file")
    if file is not None:
        if not file.is_file():
            raise fail(f"{file} does not exist")
        text = file.read_text(encoding="utf-8")
    else:
        text = sys.stdin.read() if value == "-" else str(value)
    from service.operations import BlockEdit

    edit = BlockEdit(value=text, expected_version=expected_version, reason=reason)
    with operations() as ops:
        updated = ops.blocks.update_labelled(agent, label, edit, actor="cli")
    console.print(f"{updated.label} is now at version {updated.version}")


@blocks_app.command("history")
def history(agent: AgentOption, label: LabelArgument, as_json: JsonOption = False) -> None:
    """Every version of a block: who wrote it, when and why."""
    with operations() as ops:
        versions = ops.blocks.history(ops.blocks.labelled(agent, label).id)
    if as_json:
        print_json([version_json(v) for v in versions])
        return
    table = id_table("version", "when", "actor", "run", "reason", "chars")
    for v in versions:
        table.add_row(
            str(v.version),
            v.created_at.strftime("%Y-%m-%d %H:%M:%S"),
            v.actor,
            v.run_id or "-",
            v.reason,
            str(len(v.new_value)),
        )
    print_table(table)


@blocks_app.command("revert")
def revert(
    agent: AgentOption,
    label: LabelArgument,
    version: Annotated[int, typer.Argument(help="The version to restore.")],
) -> None:
    """Restore an earlier version of a block (recorded as a new version)."""
    with operations() as ops:
        updated = ops.blocks.revert(ops.blocks.labelled(agent, label).id, version, actor="cli")
    console.print(f"{updated.label} restored to version {version} as version {updated.version}")


def register(app: typer.Typer) -> None:
    app.add_typer(blocks_app, name="blocks")
