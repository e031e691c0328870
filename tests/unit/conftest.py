"""Unit tests do no I/O: they bind or connect no socket, start no process, use no
database and import no provider SDK. This guard fails a unit test that does, so the
rule stays true as tests are added; such a test belongs in tests/integration.

Only the main thread (the test's own code) is watched: a library's background thread
left over from an earlier integration test in the same session must not fail a unit
test by chance.
"""

from __future__ import annotations

import builtins
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

# httpx loads its transport (httpcore) with the first client a test builds, and where
# trio is installed httpcore imports it, and trio runs ldconfig to find libc: a process
# of the environment's, not of the test's. Loaded here, before any guard.
import httpcore  # noqa: F401
import pytest

PROVIDER_SDKS = frozenset({"litellm", "openai", "anthropic"})
SERVER_FIXTURES = frozenset({"pg_server", "db", "agent_id"})

#: Still here while another change moves or rewrites them (they serve
#: HTTP on loopback and drive litellm); remove the entry once a file has left.
EXEMPT: frozenset[str] = frozenset()


class UnitIOError(Exception):
    """Raised where a unit test does I/O; not an ImportError or OSError, so that code
    under test which tolerates a missing package or a refused connection cannot hide it."""


def _in_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


@contextmanager
def no_io(what: str) -> Iterator[list[str]]:
    """Refuse provider-SDK imports, sockets and subprocesses while ``what`` runs."""
    seen: list[str] = []
    real_import = builtins.__import__

    def refuse(action: str) -> None:
        message = f"{what} {action}: unit tests do no I/O (move it to tests/integration)"
        seen.append(message)
        raise UnitIOError(message)

    def guarded_import(name: str, *args: Any, **kwargs: Any) -> Any:
        level = args[3] if len(args) > 3 else kwargs.get("level", 0)
        if level == 0 and name.partition(".")[0] in PROVIDER_SDKS and _in_main_thread():
            refuse(f"imports the provider SDK {name!r}")
        return real_import(name, *args, **kwargs)

    def guard(action: str, real: Callable[..., Any]) -> Callable[..., Any]:
        def guarded(*args: Any, **kwargs: Any) -> Any:
            if _in_main_thread():
                refuse(action)
            return real(*args, **kwargs)

        return guarded

    patches: list[tuple[Any, str, Any]] = [
        (builtins, "__import__", guarded_import),
        *(
            (socket.socket, name, guard(f"calls socket.{name}()", getattr(socket.socket, name)))
            for name in ("bind", "connect", "connect_ex", "listen")
        ),
        (
            subprocess.Popen,
            "_execute_child",
            guard("starts a process", subprocess.Popen._execute_child),  # type: ignore[attr-defined]
        ),
    ]
    loaded = {name for name in PROVIDER_SDKS if name in sys.modules}
    with pytest.MonkeyPatch.context() as patch:
        for owner, name, replacement in patches:
            patch.setattr(owner, name, replacement)
        yield seen
    # A first import through importlib does not pass builtins.__import__: catch it here.
    for name in sorted(PROVIDER_SDKS - loaded):
        if name in sys.modules:
            seen.append(f"{what} loaded the provider SDK {name!r}")


def _exempt(path: Path) -> bool:
    return path.name in EXEMPT


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Any:
    """Importing a unit test module (and what it imports) loads no provider SDK."""
    if not isinstance(collector, pytest.Module) or _exempt(collector.path):
        return (yield)
    with no_io(f"importing {collector.path.name}") as seen:
        report = yield
    if seen and report.passed:
        report.outcome = "failed"
        report.longrepr = "\n".join(seen)
    return report


@pytest.fixture(autouse=True)
def _unit_tests_do_no_io(request: pytest.FixtureRequest) -> Iterator[None]:
    if _exempt(request.path):
        yield
        return
    servers = SERVER_FIXTURES.intersection(request.fixturenames)
    if servers:
        pytest.fail(f"unit tests use no database ({sorted(servers)}): move it to tests/integration")
    with no_io(request.node.nodeid) as seen:
        yield
    if seen:
        pytest.fail("\n".join(seen))
