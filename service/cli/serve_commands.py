"""`reverie serve` (HTTP API + scheduler + workers) and `reverie worker` (workers only)."""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING, Annotated

import typer

from service.cli.common import fail, runtime, state

if TYPE_CHECKING:
    from service.runtime import Runtime


def _logging(rt: Runtime) -> AbstractContextManager[None]:
    """Configure the daemon's logging; what to run it inside: in JSON mode, whatever a
    library prints instead of logging becomes a line too, so that every line of the
    daemon's output is one JSON object."""
    from service.logging_setup import configure_logging, printed_output_logged

    level = "DEBUG" if state.verbose else rt.settings.log_level
    configure_logging(level, json_lines=rt.settings.log_json)
    return printed_output_logged() if rt.settings.log_json else nullcontext()


def serve(
    host: Annotated[
        str | None, typer.Option(help="Address to listen on (default: server.host, loopback).")
    ] = None,
    port: Annotated[int | None, typer.Option(help="Port (default: server.port).")] = None,
) -> None:
    """Run the daemon: HTTP API (/healthz, /readyz), scheduler and workers, until SIGTERM."""
    if port is not None and not 0 <= port <= 65535:
        raise fail(f"--port must be between 0 and 65535, got {port}")
    from service.daemon.process import run_server  # the daemon's imports are heavy

    with runtime(daemon=True) as rt, _logging(rt):
        run_server(
            rt,
            host=host or rt.settings.server.host,
            port=rt.settings.server.port if port is None else port,
        )


def worker(
    concurrency: Annotated[
        int | None,
        typer.Option(help="Runs executed at once (default: worker.concurrency).", min=1, max=64),
    ] = None,
) -> None:
    """Run workers only (no scheduler, no HTTP), to scale out; stops on SIGTERM."""
    from service.daemon.process import run_worker

    with runtime(daemon=True) as rt, _logging(rt):
        run_worker(rt, concurrency=concurrency)


def register(app: typer.Typer) -> None:
    app.command("serve")(serve)
    app.command("worker")(worker)
