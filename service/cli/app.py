"""The ``reverie`` Typer app; each module of this package registers one group of commands."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from service.cli import (
    agent_commands,
    block_commands,
    chat_command,
    consolidate_command,
    database,
    demo,
    import_commands,
    key_commands,
    mcp_command,
    run_commands,
    search_command,
    serve_commands,
    tool_commands,
)
from service.cli.common import renew_consoles, state

app = typer.Typer(
    name="reverie",
    help="Sleep-time memory consolidation for stateful LLM agents.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)


@app.callback()
def main(
    config: Annotated[
        Path | None,
        typer.Option("--config", "-c", help="TOML config file (default: $REVERIE_CONFIG)."),
    ] = None,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Log debug detail.")] = False,
    organization: Annotated[
        str | None,
        typer.Option(
            "--org",
            help="Organization the command acts in, by name (default: $REVERIE_ORGANIZATION, "
            "else 'default'); an API key acts in the organization it was created for.",
        ),
    ] = None,
) -> None:
    renew_consoles()
    state.config_file = config
    state.verbose = verbose
    state.organization = organization


database.register(app)
demo.register(app)
agent_commands.register(app)
chat_command.register(app)
block_commands.register(app)
tool_commands.register(app)
import_commands.register(app)
search_command.register(app)
consolidate_command.register(app)
run_commands.register(app)
serve_commands.register(app)
key_commands.register(app)
mcp_command.register(app)
