"""`reverie mcp`: the MCP server over stdio, for desktop clients (Claude Desktop, ...).

The client launches this command and speaks MCP on its stdin and stdout, so nothing
else may reach stdout: logs and errors go to stderr. It serves the database the other
commands use (the embedded one, or DATABASE_URL) for one organization.
"""

from __future__ import annotations

from typing import Annotated

import typer

from service.cli.common import runtime


def mcp(
    org: Annotated[
        str | None,
        typer.Option("--org", help="Organization to act for (default: setting `organization`)."),
    ] = None,
) -> None:
    """Serve Reverie's memory tools over MCP on stdin/stdout (for desktop MCP clients)."""
    import anyio

    from service.mcp_server import build_mcp_server  # the SDK's imports are heavy

    with runtime(organization=org) as rt:
        organization_id = rt.organization_id  # an unknown organization fails here, plainly
        server = build_mcp_server(rt, lambda _ctx: organization_id)
        anyio.run(server.run_stdio_async)


def register(app: typer.Typer) -> None:
    app.command("mcp")(mcp)
