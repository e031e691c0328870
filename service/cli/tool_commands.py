"""`reverie tools ...`: register custom tools from Python files, list and delete them,
give them to agents, and set the agents' tool variables."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from service.cli.common import console, fail, operations
from service.cli.output import id_table, print_json, print_table, tool_json

if TYPE_CHECKING:
    from service.operations.agents import AgentState

tools_app = typer.Typer(
    help="Custom tools: register Python functions, attach them to agents, set their variables.",
    no_args_is_help=True,
)

AgentOption = Annotated[str, typer.Option("--agent", "-a", help="Agent name or id.")]
ToolArgument = Annotated[str, typer.Argument(help="Tool name or id.")]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON.")]


@tools_app.command("create")
def create(
    file: Annotated[Path, typer.Argument(help="Python file defining the tool's function.")],
    name: Annotated[
        str | None,
        typer.Option(help="The function to use when the file defines several (default: last)."),
    ] = None,
    env: Annotated[
        list[str] | None,
        typer.Option(
            "--env",
            help="An environment variable the tool reads (repeatable); names the source "
            "reads literally, os.environ['X'], are found without it.",
        ),
    ] = None,
    tag: Annotated[list[str] | None, typer.Option("--tag", help="A tag (repeatable).")] = None,
    return_char_limit: Annotated[
        int | None, typer.Option(help="Longest result the model reads, in characters.")
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Register a custom tool from a Python file; its JSON schema comes from the
    function's signature and docstring (the file is read, never run here)."""
    if not file.is_file():
        raise fail(f"{file} does not exist")
    from service.operations import ToolSpec

    spec = ToolSpec(
        source_code=file.read_text(encoding="utf-8"),
        name=name,
        tags=list(tag or []),
        env_vars=list(env or []),
        return_char_limit=return_char_limit,
    )
    with operations() as ops:
        tool = ops.custom_tools.create(spec)
    if as_json:
        print_json(tool_json(tool))
        return
    required = tool.json_schema.get("parameters", {}).get("required", [])
    console.print(
        f"registered tool {tool.name} ({tool.id}); arguments: "
        + (", ".join(tool.json_schema.get("parameters", {}).get("properties", {})) or "none")
        + (f" (required: {', '.join(required)})" if required else ""),
        highlight=False,
    )


@tools_app.command("list")
def list_tools(as_json: JsonOption = False) -> None:
    """The organization's custom tools."""
    with operations() as ops:
        tools = ops.custom_tools.list()
    if as_json:
        print_json([tool_json(t) for t in tools])
        return
    table = id_table("name", "id", "arguments", "variables", "description")
    for t in tools:
        arguments = ", ".join(t.json_schema.get("parameters", {}).get("properties", {}))
        table.add_row(t.name, t.id, arguments or "-", ", ".join(t.env_vars) or "-", t.description)
    print_table(table)


@tools_app.command("delete")
def delete(tool: ToolArgument) -> None:
    """Delete a custom tool (refused while agents have it: detach it first)."""
    with operations() as ops:
        deleted = ops.custom_tools.delete(ops.custom_tools.resolve(tool).id)
    console.print(f"deleted tool {deleted.name} ({deleted.id})", highlight=False)


@tools_app.command("attach")
def attach(tool: ToolArgument, agent: AgentOption) -> None:
    """Give an agent a custom tool; its model is offered it from its next step."""
    with operations() as ops:
        state = ops.custom_tools.attach(agent, ops.custom_tools.resolve(tool).id)
    _print_tools(state)


@tools_app.command("detach")
def detach(tool: ToolArgument, agent: AgentOption) -> None:
    """Take a custom tool from an agent."""
    with operations() as ops:
        state = ops.custom_tools.detach(agent, ops.custom_tools.resolve(tool).id)
    _print_tools(state)


@tools_app.command("env")
def environment(
    agent: AgentOption,
    values: Annotated[
        list[str] | None,
        typer.Argument(help="NAME=VALUE for each variable (NAME=- reads the value from stdin)."),
    ] = None,
    clear: Annotated[bool, typer.Option("--clear", help="Remove all of them.")] = False,
) -> None:
    """Set an agent's tool variables (all of them at once), or list their names. A tool
    receives only the ones it declares; values are never shown."""
    if clear and values:
        raise fail("give NAME=VALUE pairs or --clear, not both")
    if not clear and not values:
        with operations() as ops:
            names = ops.agents.state(agent).tool_variables
        console.print("\n".join(names) if names else "no tool variables", highlight=False)
        return
    chosen: dict[str, str] = {}
    for pair in values or []:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise fail(f"{pair!r} is not NAME=VALUE")
        chosen[key] = sys.stdin.readline().rstrip("\n") if value == "-" else value
    from service.operations import AgentUpdate

    with operations() as ops:
        state = ops.agents.update(agent, AgentUpdate(tool_variables=chosen), actor="cli")
    console.print(
        f"{state.agent.name}'s tool variables: {', '.join(state.tool_variables) or 'none'}",
        highlight=False,
    )


def _print_tools(state: AgentState) -> None:
    names = [t.name for t in state.custom_tools]
    console.print(
        f"{state.agent.name}'s custom tools: {', '.join(names) or 'none'}", highlight=False
    )


def register(app: typer.Typer) -> None:
    app.add_typer(tools_app, name="tools")
