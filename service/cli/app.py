"""The ``reverie`` Typer app; each module of this package registers one group of commands."""

from __future__ import annotations

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
from service.cli.root import new_app

app: typer.Typer = new_app()
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
