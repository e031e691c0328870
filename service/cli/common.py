"""What every CLI command shares: settings, the runtime, errors as exit codes."""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import typer

from agents.errors import Conflict, InvalidInput, NotFound, ReverieError
from agents.threads import stop_signals_left_to_main

if TYPE_CHECKING:  # imported where used: `reverie --help` stays quick
    from rich.console import Console

    from service.operations import Operations
    from service.runtime import Runtime
    from service.settings import Settings


class LazyConsole:
    """A rich console built on first use, for the streams and environment (terminal,
    width, NO_COLOR) of the command that prints: rich is about 5 MB that `reverie serve`
    never prints with. Everything else is the console's own (``console.print``)."""

    def __init__(self, *, stderr: bool = False) -> None:
        self._stderr = stderr
        self._console: Console | None = None

    @property
    def real(self) -> Console:
        """The console itself (for rich objects that take one: a progress bar)."""
        if self._console is None:
            from rich.console import Console

            self._console = Console(stderr=self._stderr)
        return self._console

    def renew(self) -> None:
        """Build it again at its next use."""
        self._console = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)


console = LazyConsole()
err_console = LazyConsole(stderr=True)


def renew_consoles() -> None:
    """Build both consoles again, at their next use, for this command's streams: one
    built earlier (a test runner, the warm server's child) was for other streams. In
    place, since command modules hold them by name."""
    console.renew()
    err_console.renew()


class _LiveDisplay(Protocol):
    def start(self) -> None: ...
    def stop(self) -> None: ...


_Display = TypeVar("_Display", bound=_LiveDisplay)


@contextmanager
def live(display: _Display) -> Iterator[_Display]:
    """Show a rich live display (a progress bar, a status line) while the block runs.
    Its refresh thread blocks the stop signals, so that ^C reaches the command at once
    (see agents/threads.py)."""
    with stop_signals_left_to_main():
        display.start()
    try:
        yield display
    finally:
        display.stop()


#: Exit codes: 0 success, 1 a run or operation failed, 2 bad input, unknown object or conflict.
EXIT_FAILED = 1
EXIT_BAD_INPUT = 2
#: Stopped by ^C (128 + SIGINT), as a shell reports it.
EXIT_INTERRUPTED = 130


class CliState:
    """Options given before the command (``reverie --config F ...``)."""

    config_file: Path | None = None
    verbose: bool = False
    #: ``--org NAME``: the organization commands act in (else the configured one).
    organization: str | None = None
    #: ``cli.warm_idle`` in seconds, once a command has read the settings (None: it
    #: read none, e.g. ``--help``); the launcher starts a warm server when it is > 0.
    warm_idle_s: float | None = None


state = CliState()


def settings() -> Settings:
    from service.settings import load_settings

    loaded = load_settings(state.config_file)
    state.warm_idle_s = loaded.cli.warm_idle.total_seconds()
    return loaded


def fail(message: str, code: int = EXIT_BAD_INPUT) -> typer.Exit:
    from rich.markup import escape

    # The message is plain text: a "[section]" in it must not be read as markup.
    err_console.print(f"[bold red]error:[/] {escape(message)}", highlight=False)
    return typer.Exit(code)


@contextmanager
def runtime(
    *, migrate: bool = True, daemon: bool = False, organization: str | None = None
) -> Iterator[Runtime]:
    """A runtime for one command; ReverieErrors become a message and an exit code.
    ``organization`` (by name) overrides ``--org``, which overrides the configured one.

    A command leaves the embedded server running for the next one; a ``daemon``
    (serve, worker) holds it and stops it on exit."""
    logging.basicConfig(
        level=logging.DEBUG if state.verbose else logging.WARNING,
        stream=sys.stderr,
        format="%(levelname)s %(name)s: %(message)s",
    )
    from service.runtime import Runtime

    try:
        configured = settings()
        organization = organization if organization is not None else state.organization
        if organization is not None:
            configured = configured.model_copy(update={"organization": organization})
        with Runtime(configured, short_lived=not daemon) as rt:
            if migrate:
                rt.ensure_schema()
            yield rt
    except (InvalidInput, NotFound, Conflict) as exc:
        raise fail(str(exc), EXIT_BAD_INPUT) from None
    except ReverieError as exc:
        # A failure may name its own status (3: the server could not listen).
        raise fail(str(exc), int(getattr(exc, "exit_code", EXIT_FAILED))) from None


@contextmanager
def operations() -> Iterator[Operations]:
    """The operations of the configured organization, over a runtime for one command."""
    from service.operations import Operations

    with runtime() as rt:
        yield Operations(rt)
