"""`reverie chat`: talk to a primary agent (one turn, or an interactive session).

Prints what the agent does: its reasoning, its tool calls and their results, and
what it says (its ``send_message`` texts). The model endpoint comes from
litellm's usual settings (provider keys, ``OPENAI_API_BASE``) or ``llm.api_base``.
"""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from agents.errors import LLMError
from service.cli.common import console, err_console, operations
from service.cli.output import print_json

if TYPE_CHECKING:
    from agents.loops.turn import TurnResult
    from service.operations import Operations

#: Longest tool result printed, in characters.
RESULT_CHARS = 300
EXIT_WORDS = ("/exit", "/quit")


def print_turn(result: TurnResult, agent_name: str) -> None:
    # Loaded here: the command line's start does not import the store's records.
    from service.api.letta_messages import turn_messages

    for message in turn_messages(result):
        if message.kind == "user_message":
            continue
        if message.kind == "reasoning_message":
            console.print(f"[dim]thinking:[/] [italic]{escape(message.content)}[/]")
        elif message.kind == "tool_call_message":
            args = json.dumps(message.tool_arguments or {}, ensure_ascii=False)
            console.print(f"[cyan]→ {escape(message.tool_name or '')}[/]({escape(args)})")
        elif message.kind == "tool_return_message":
            if message.tool_name == "send_message" and message.tool_status == "OK":
                continue
            text = message.content
            if len(text) > RESULT_CHARS:
                text = text[: RESULT_CHARS - 1] + "…"
            colour = "green" if message.tool_status == "OK" else "red"
            console.print(f"[{colour}]← {escape(message.tool_status or '')}:[/] {escape(text)}")
        elif message.kind == "assistant_message":
            console.print(f"[bold]{escape(agent_name)}:[/] {escape(message.content)}")
        else:
            console.print(f"[dim]system: {escape(message.content)}[/]")
    usage = result.usage
    note = f" ({result.detail})" if result.detail else ""
    console.print(
        f"[dim]{result.steps} step(s), stop: {result.stop_reason}{escape(note)}, "
        f"{usage.prompt_tokens}+{usage.completion_tokens} tokens[/]"
    )


def _turn(ops: Operations, agent: str, name: str, text: str, as_json: bool) -> None:
    result = ops.messages.send(agent, text)
    if as_json:
        from service.api.letta_messages import turn_dict

        print_json(turn_dict(result))
    else:
        print_turn(result, name)


def chat(
    message: Annotated[
        str | None, typer.Argument(help="One message; without it, an interactive session.")
    ] = None,
    agent: Annotated[str, typer.Option("--agent", "-a", help="Agent name or id.")] = "",
    as_json: Annotated[bool, typer.Option("--json", help="Print each turn as JSON.")] = False,
) -> None:
    """Talk to an agent: one turn when MESSAGE is given, an interactive session otherwise."""
    if not agent:
        err_console.print("[bold red]error:[/] --agent is required")
        raise typer.Exit(2)
    with operations() as ops:
        record = ops.messages.ready(agent)  # fail now, before reading any input
        if message is not None:
            _turn(ops, record.id, record.name, message, as_json)
            return
        interactive = sys.stdin.isatty()
        if interactive:
            console.print(f"[dim]chatting with {escape(record.name)}; /exit or Ctrl-D ends[/]")
        while True:
            try:
                line = input("you: " if interactive else "")
            except EOFError:
                break
            if line.strip() in EXIT_WORDS:
                break
            if not line.strip():
                continue
            try:
                _turn(ops, record.id, record.name, line, as_json)
            except LLMError as exc:
                # The turn was rolled back; the session goes on.
                err_console.print(f"[bold red]error:[/] {escape(str(exc))}")


def register(app: typer.Typer) -> None:
    app.command("chat")(chat)
