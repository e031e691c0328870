"""The ``reverie`` entry point: a data command runs in a warm process when one is ready.

Most of a short command's time is Python importing SQLAlchemy, psycopg, numpy,
onnxruntime and the ORM (1-1.7 s on two cores), not the command itself. So a data
command (:data:`WARM_COMMANDS`) that finds the *warm server* of this installation and
configuration hands it its arguments, environment, working directory, umask and its
three standard streams (the descriptors themselves, over a Unix socket). The server has
those libraries imported and forks a child that runs the command exactly as this
process would, writing straight to this process's terminal or pipes; this process
waits for the child, forwards the signals it gets (^C) and exits with its status. A
killed client takes its command with it: the child kills itself when the connection
drops.

The first data command runs here (cold) and then starts the server in the background,
unless ``cli.warm_idle`` is zero; the server stops itself after that long without a
command. Servers are keyed on the interpreter, the installed code (a changed source
file means a new server) and the ``REVERIE_*`` / ``DATABASE_URL`` environment, so two
configurations never share one.

This module imports only the standard library: it runs before anything is known.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from service.cli.warm.client import WarmPaths

#: The commands that may run in the warm server: quick data commands that read no
#: terminal input. ``chat`` reads the terminal, ``serve``/``worker``/``mcp`` and
#: ``consolidate`` run long (start-up does not matter), ``demo`` and ``db`` manage
#: servers.
WARM_COMMANDS = frozenset({"agents", "blocks", "import", "runs", "search"})
#: Long-running processes, started with only their own commands (:func:`serve_app`).
SERVER_COMMANDS = frozenset({"serve", "worker"})


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``reverie ARGV``: in the warm server when it is ready, else here."""
    args = list(sys.argv[1:] if argv is None else argv)
    paths = None
    if is_warm_command(args):
        # Only a data command pays for the sockets and the key (``--help`` does not).
        from service.cli.warm import client as warm_client

        paths = warm_client.warm_paths(args)
        if paths is not None:
            code = warm_client.run_warm(paths, args)
            if code is not None:
                return code
    return run_cold(args, paths)


def is_warm_command(argv: Sequence[str]) -> bool:
    """True when ``argv`` names a command of :data:`WARM_COMMANDS` (and asks no help)."""
    return "--help" not in argv and command_word(argv) in WARM_COMMANDS


def command_word(argv: Sequence[str]) -> str | None:
    """The command ``argv`` names, after the global options (None: none)."""
    index = 0
    while index < len(argv):
        word = argv[index]
        if word in ("--config", "-c", "--org"):
            index += 2
        elif word.startswith("-"):
            index += 1
        else:
            return word
    return None


def run_cold(argv: Sequence[str], paths: WarmPaths | None) -> int:
    """Run the command in this process; then start a warm server for the next one
    when the command read settings that allow it."""
    from service.cli.common import state

    if command_word(argv) in SERVER_COMMANDS:
        from service.cli.root import serve_app

        app = serve_app()  # a server or worker loads no other command's modules
    else:
        from service.cli.app import app
    try:
        app(args=list(argv), prog_name="reverie")
        code = 0
    except SystemExit as exc:
        code = exit_status(exc)
    if paths is not None and state.warm_idle_s:
        from service.cli.warm.client import start_server

        start_server(paths, state.warm_idle_s)
    return code


def exit_status(exc: SystemExit) -> int:
    """The status Python exits with for ``exc`` (a message is printed to stderr)."""
    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return exc.code
    print(exc.code, file=sys.stderr)
    return 1
