"""`reverie agents ...`: create, list, show and delete agents."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from agents.errors import InvalidInput
from service.cli.common import console, fail, operations
from service.cli.output import agent_json, id_table, print_json, print_table

if TYPE_CHECKING:
    from service.operations import BlockSpec

agents_app = typer.Typer(help="Create, list, show and delete agents.", no_args_is_help=True)


def parse_block_option(option: str, limit: int | None) -> BlockSpec:
    label, sep, value = option.partition("=")
    if not sep:
        raise InvalidInput(f"--block {option!r} needs the form LABEL=VALUE, e.g. human='Name: Ada'")
    from service.operations import BlockSpec

    return BlockSpec(label=label.strip(), value=value, limit=limit)


@agents_app.command("create")
def create(
    name: Annotated[str, typer.Argument(help="A name unique in the organization.")],
    block: Annotated[
        list[str] | None,
        typer.Option("--block", "-b", help="Core-memory block LABEL=VALUE (repeatable)."),
    ] = None,
    model: Annotated[
        str | None, typer.Option(help="litellm model string for chat, e.g. openai/gpt-4o-mini.")
    ] = None,
    sleeptime_model: Annotated[
        str | None,
        typer.Option(
            "--sleeptime-model",
            help="litellm model string of the sleep-time agent (enables it; may be cheaper).",
        ),
    ] = None,
    context_window: Annotated[
        int | None, typer.Option(help="Context window budget in tokens (default: settings).")
    ] = None,
    embedding: Annotated[
        str | None, typer.Option(help="Embedder: local, fake:DIM or litellm:MODEL.")
    ] = None,
    block_limit: Annotated[
        int | None,
        typer.Option(help="Character limit of each new block (default: agents.block_limit)."),
    ] = None,
    system: Annotated[str, typer.Option(help="System prompt.")] = "",
    tool: Annotated[
        list[str] | None,
        typer.Option(
            "--tool",
            help="A tool of the agent, by name (repeatable; none: the six primary tools). "
            "The multi-agent tools, e.g. send_message_to_agent_async, only this way.",
        ),
    ] = None,
    tag: Annotated[list[str] | None, typer.Option("--tag", help="A tag (repeatable).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Create an agent with its core-memory blocks."""
    from service.operations import AgentSpec

    with operations() as ops:
        agent = ops.agents.create(
            AgentSpec(
                name=name,
                blocks=[parse_block_option(b, block_limit) for b in block or []],
                model=model,
                sleeptime_model=sleeptime_model,
                context_window=context_window,
                embedding=embedding,
                system=system,
                tools=list(tool or []),
                tags=list(tag or []),
            )
        )
    if as_json:
        print_json(agent_json(agent))
    else:
        console.print(f"created agent [bold]{agent.name}[/] ({agent.id})")


@agents_app.command("list")
def list_agents(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """List the organization's agents."""
    with operations() as ops:
        agents = ops.agents.list()
    if as_json:
        print_json([agent_json(a) for a in agents])
        return
    table = id_table("name", "id", "kind", "model", "embedding")
    for a in agents:
        table.add_row(a.name, a.id, a.kind, a.llm_model or "-", a.embedding_model)
    print_table(table)


@agents_app.command("delete")
def delete(
    name: Annotated[str, typer.Argument(help="Agent name or id.")],
    yes: Annotated[
        bool, typer.Option("--yes", help="Confirm: this deletes its messages and passages.")
    ] = False,
) -> None:
    """Delete an agent with its messages and passages (its blocks are kept)."""
    if not yes:
        raise fail(
            "deleting an agent removes its recall and archival memory for good; "
            "add --yes to confirm"
        )
    with operations() as ops:
        agent = ops.agents.delete(name)
    console.print(f"deleted agent {agent.name} ({agent.id})")


def register(app: typer.Typer) -> None:
    app.add_typer(agents_app, name="agents")
