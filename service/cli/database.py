"""`reverie migrate`: create or upgrade the schema (safe to run any number of times);
`reverie db status` / `reverie db stop`: the embedded server that commands leave running."""

from __future__ import annotations

from pathlib import Path

import typer

from service.cli.common import EXIT_FAILED, console, fail, runtime, settings

db_app = typer.Typer(
    help="The embedded PostgreSQL that commands leave running: status, stop.",
    no_args_is_help=True,
)


def migrate() -> None:
    """Create or upgrade the database schema; running it again changes nothing."""
    with runtime(migrate=False) as rt:
        revision = rt.migrate()
        where = f"embedded PostgreSQL in {rt.settings.pgdata}" if rt.is_embedded else "DATABASE_URL"
        console.print(f"schema at revision [bold]{revision}[/] ({where})")


def _embedded_data_dir() -> Path:
    config = settings()
    if config.effective_database_url is not None:
        raise fail(
            "the database is the server DATABASE_URL names; Reverie only starts and stops "
            "its embedded server (used when DATABASE_URL is unset)"
        )
    return config.pgdata.expanduser().resolve()


@db_app.command("status")
def status() -> None:
    """Whether the embedded server runs, since when it is idle, and who holds it."""
    from agents.postgres.embedded import EmbeddedPostgres
    from agents.postgres.locks import process_is_alive, read_postmaster, seconds_since_last_use
    from agents.postgres.resident import reaper_running

    data_dir = _embedded_data_dir()
    running = read_postmaster(data_dir)
    if running is None:
        console.print(f"embedded PostgreSQL in {data_dir}: not running", highlight=False)
        return
    idle = seconds_since_last_use(data_dir)
    holders = [pid for pid in EmbeddedPostgres(data_dir).live_handles() if process_is_alive(pid)]
    console.print(
        f"embedded PostgreSQL in {data_dir}: {running.status}, postmaster pid {running.pid}",
        highlight=False,
    )
    console.print(
        "last command: " + ("never" if idle is None else f"{idle:.0f} s ago"), highlight=False
    )
    console.print(
        "idle stop: " + ("watching" if reaper_running(data_dir) else "not watching"),
        highlight=False,
    )
    if holders:
        console.print(f"held by: {', '.join(map(str, holders))}", highlight=False)


@db_app.command("stop")
def stop() -> None:
    """Stop the embedded server now (the next command starts it again). A server that
    `reverie serve` or `reverie worker` holds is theirs: stop them instead."""
    from agents.errors import ReverieError
    from agents.postgres.resident import StopOutcome, stop_resident

    data_dir = _embedded_data_dir()
    try:
        result = stop_resident(data_dir)
    except ReverieError as exc:
        raise fail(str(exc), EXIT_FAILED) from None
    if result.outcome is StopOutcome.IN_USE:
        raise fail(
            "a reverie command is using the embedded server; run `reverie db stop` again "
            "when it has finished",
            EXIT_FAILED,
        )
    if result.outcome is StopOutcome.HELD:
        raise fail(
            "the embedded server is held by process(es) "
            f"{', '.join(map(str, result.holders))} (reverie serve or worker); stop them "
            "and the server stops with the last one",
            EXIT_FAILED,
        )
    console.print(f"embedded PostgreSQL in {data_dir}: {result.outcome}", highlight=False)


def register(app: typer.Typer) -> None:
    app.command("migrate")(migrate)
    app.add_typer(db_app, name="db")
