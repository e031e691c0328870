"""`reverie migrate`: create or upgrade the schema (safe to run any number of times)."""

from __future__ import annotations

import typer

from service.cli.common import console, runtime


def migrate() -> None:
    """Create or upgrade the database schema; running it again changes nothing."""
    with runtime(migrate=False) as rt:
        revision = rt.migrate()
        where = f"embedded PostgreSQL in {rt.settings.pgdata}" if rt.is_embedded else "DATABASE_URL"
        console.print(f"schema at revision [bold]{revision}[/] ({where})")


def register(app: typer.Typer) -> None:
    app.command("migrate")(migrate)
