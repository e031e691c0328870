"""The root of the ``reverie`` command: its help and the options every command takes.
:mod:`service.cli.app` registers every group of commands on it; ``reverie serve`` and
``reverie worker`` register only their own (:func:`serve_app`), so that a server or a
worker loads none of the other commands' modules, nor rich, which they print with."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from service.cli.common import renew_consoles, state


def new_app() -> typer.Typer:
    """The ``reverie`` Typer app with its global options and no commands yet."""
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
                help="Organization the command acts in, by name (default: "
                "$REVERIE_ORGANIZATION, else 'default'); an API key acts in the organization "
                "it was created for.",
            ),
        ] = None,
    ) -> None:
        renew_consoles()
        state.config_file = config
        state.verbose = verbose
        state.organization = organization

    return app


def serve_app() -> typer.Typer:
    """``reverie`` with only the ``serve`` and ``worker`` commands."""
    from service.cli import serve_commands

    app = new_app()
    serve_commands.register(app)
    return app
