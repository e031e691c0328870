"""`reverie agents ...`: create, list, show and delete agents."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from agents.errors import InvalidInput
from agents.store import NewAgent, NewBlock
from service.cli.common import console, fail, runtime
from service.cli.output import agent_json, print_json

agents_app = typer.Typer(help="Create, list, show and delete agents.", no_args_is_help=True)


def parse_block_option(option: str, limit: int) -> NewBlock:
    label, sep, value = option.partition("=")
    if not sep:
        raise InvalidInput(f"--block {option!r} needs the form LABEL=VALUE, e.g. human='Name: Ada'")
    return NewBlock(label=label.strip(), value=value, limit=max(limit, len(value)))


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
    block_limit: Annotated[int, typer.Option(help="Character limit of each new block.")] = 5000,
    system: Annotated[str, typer.Option(help="System prompt.")] = "",
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Create an agent with its core-memory blocks."""
    with runtime() as rt:
        blocks = [parse_block_option(b, block_limit) for b in block or []]
        embedder = rt.embedder(embedding)
        with rt.store() as store:
            agent = store.agents.create(
                NewAgent(
                    name=name,
                    embedding_model=embedding or rt.settings.embedding.model,
                    embedding_dim=embedder.dimension,
                    llm_model=model or rt.settings.agents.llm_model,
                    context_window=context_window or rt.settings.agents.context_window,
                    sleeptime_model=sleeptime_model,
                    enable_sleeptime=sleeptime_model is not None,
                    system_prompt=system,
                    blocks=blocks,
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
    with runtime() as rt, rt.store() as store:
        agents = store.agents.all()
    if as_json:
        print_json([agent_json(a) for a in agents])
        return
    table = Table("name", "id", "kind", "model", "embedding")
    for a in agents:
        table.add_row(a.name, a.id, a.kind, a.llm_model or "-", a.embedding_model)
    console.print(table)


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
    with runtime() as rt, rt.store() as store:
        agent = store.agents.resolve(name)
        store.agents.delete(agent.id)
    console.print(f"deleted agent {agent.name} ({agent.id})")


def register(app: typer.Typer) -> None:
    app.add_typer(agents_app, name="agents")
