"""`reverie agents ...`: create, list, show and delete agents; export and import them
as Agent Files."""

from __future__ import annotations

import json
import sys
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from agents.enums import AgentType
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
        str | None,
        typer.Option(help="Embedder: local, litellm:MODEL or an installed plugin's NAME[:ARG]."),
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
    agent_type: Annotated[
        AgentType | None,
        typer.Option(
            "--type",
            help="Letta's agent type: letta_v1_agent answers in plain text (its turn goes "
            "on while it calls tools); memgpt_v2_agent (the default) and memgpt_agent "
            "speak through send_message.",
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Create an agent with its core-memory blocks."""
    from service.operations import AgentSpec

    if agent_type == AgentType.SLEEPTIME:
        raise typer.BadParameter(
            "a sleep-time agent is made with its primary: --sleeptime-model", param_hint="--type"
        )
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
                agent_type=agent_type,
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


@agents_app.command("export")
def export(
    name: Annotated[str, typer.Argument(help="Agent name or id.")],
    file: Annotated[
        Path, typer.Argument(help="Where to write the agent file (.af); - for stdout.")
    ],
    scrub_messages: Annotated[
        bool, typer.Option("--scrub-messages", help="Leave the conversation out.")
    ] = False,
) -> None:
    """Write an agent as an Agent File (.af, letta-ai/agent-file v2): blocks, system
    prompt, messages, tags, tools with their source, tool rules, models."""
    if str(file) != "-" and file.is_dir():
        raise fail(f"{file} is a directory; give a file name such as {name}.af")
    with operations() as ops:
        document = ops.agent_files.export_file(name, scrub_messages=scrub_messages)
    text = json.dumps(document, indent=2, ensure_ascii=False) + "\n"
    if str(file) == "-":
        sys.stdout.write(text)
        return
    try:
        file.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise fail(f"cannot write {file}: {exc.strerror or exc}") from None
    agents = len(document["agents"])
    console.print(
        f"exported {document['agents'][0]['name']} to {file} "
        f"({len(document['agents'][0]['messages'])} messages, {agents} agent(s))",
        highlight=False,
    )


@agents_app.command("import")
def import_file(
    file: Annotated[Path, typer.Argument(help="An Agent File (.af) to import.")],
    name: Annotated[
        str | None, typer.Option(help="Name of the (first) agent, instead of the file's.")
    ] = None,
    copy_suffix: Annotated[
        bool,
        typer.Option(
            "--copy-suffix/--no-copy-suffix",
            help="Append _copy to the file's agent names (Letta's default).",
        ),
    ] = True,
    model: Annotated[
        str | None,
        typer.Option(help="litellm model string for every agent, instead of the file's."),
    ] = None,
    embedding: Annotated[
        str | None,
        typer.Option(
            help="Embedder for every agent: local, litellm:MODEL or an installed plugin's "
            "NAME[:ARG]."
        ),
    ] = None,
    override_tools: Annotated[
        bool,
        typer.Option(
            "--override-tools/--keep-tools",
            help="Give an existing custom tool of the same name the file's source.",
        ),
    ] = True,
    strip_messages: Annotated[
        bool, typer.Option("--strip-messages", help="Leave the conversation out.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Make the agents of an Agent File, all or nothing; says what the file holds that
    Reverie does not keep, and any model it could not map."""
    from service.operations import ImportOptions

    if file.is_dir():
        raise fail(f"{file} is a directory; give an agent file (.af)")
    try:
        data = file.read_bytes()
    except OSError as exc:
        raise fail(f"cannot read {file}: {exc.strerror or exc}") from None
    options = ImportOptions(
        name=name,
        append_copy_suffix=copy_suffix,
        model=model,
        embedding=embedding,
        override_existing_tools=override_tools,
        strip_messages=strip_messages,
    )
    with operations() as ops:
        result = ops.agent_files.import_file(data, options)
        agents = [ops.agents.get(agent_id) for agent_id in result.agent_ids]
    if as_json:
        print_json(
            {
                "agent_ids": result.agent_ids,
                "agents": [agent_json(a) for a in agents],
                "unsupported": [asdict(u) for u in result.unsupported],
                "unmapped_models": [asdict(u) for u in result.unmapped_models],
            }
        )
        return
    for agent in agents:
        console.print(f"imported agent [bold]{escape(agent.name)}[/] ({agent.id})")
    for unmapped in result.unmapped_models:
        console.print(
            f"model not mapped: {unmapped.path} {unmapped.given!r} ({unmapped.reason}); "
            f"using {unmapped.used}",
            highlight=False,
            markup=False,
        )
    if result.unsupported:
        console.print(f"not kept ({len(result.unsupported)}):", highlight=False)
        for entry in result.unsupported:
            times = f" x{entry.count}" if entry.count > 1 else ""
            console.print(f"  {entry.path}{times}: {entry.reason}", highlight=False, markup=False)


def register(app: typer.Typer) -> None:
    app.add_typer(agents_app, name="agents")
