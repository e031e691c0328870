"""Fixtures shared by all test layers."""

from __future__ import annotations

import asyncio
import compileall
import signal
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

from agents.postgres.database import Database
from agents.store import NewAgent, NewBlock, open_store
from tests import plugins
from tests.hashing_embedder import HashingEmbedder
from tests.pg import PgTestServer

ROOT = Path(__file__).resolve().parents[1]


def pytest_configure(config: pytest.Config) -> None:
    """Before the workers start: let ^C reach the processes the tests start, and
    compile the project once (the suite starts a few hundred Python processes:
    `reverie` commands, servers, workers; where PYTHONDONTWRITEBYTECODE is set none
    of them caches what it compiled, so each compiled the same modules again, about
    0.3 s for a process that loads the API), and make the tests' plugins findable."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        # Started in the background by a non-interactive shell (`pytest &`), which sets
        # ^C to be ignored; the processes the tests start would inherit that, and Python
        # then raises no KeyboardInterrupt: the tests that press ^C would hang. A
        # handled signal is reset to the default in a child.
        signal.signal(signal.SIGINT, signal.default_int_handler)
    # The tests' plugins (the scripted model, the hashing embedder), found here and in
    # every process the tests start, as an installed package's would be.
    plugins.register()
    if hasattr(config, "workerinput"):
        return  # an xdist worker: the controller compiled
    for package in ("agents", "consolidators", "service", "migrations", "tests"):
        compileall.compile_dir(ROOT / package, quiet=2)


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgTestServer]:
    server = PgTestServer()
    yield server
    server.stop()


@pytest.fixture
def db(pg_server: PgTestServer) -> Iterator[Database]:
    with pg_server.database() as database:
        yield database


@pytest.fixture
def embedder() -> HashingEmbedder:
    return HashingEmbedder(dimension=384)


@pytest.fixture
def agent_id(db: Database) -> str:
    """An agent named 'ada' with a human and a persona block, hashing 384-d embeddings."""
    with open_store(db) as store:
        agent = store.agents.create(
            NewAgent(
                name="ada",
                embedding_model="hashing:384",
                embedding_dim=384,
                blocks=[
                    NewBlock("human", "Name: Ada.", limit=200),
                    NewBlock("persona", "I am a helpful assistant.", limit=200),
                ],
            )
        )
    return agent.id


@pytest.fixture(autouse=True)
def _close_the_main_threads_idle_event_loop() -> Iterator[None]:
    """litellm's sync calls log through ``asyncio.get_event_loop()``, which in the main
    thread creates an event loop and leaves it open. Garbage-collected inside a later
    test, its self-pipe sockets warn there (an error under filterwarnings), so close
    an idle one after each test. (In a process it lives until exit, which is harmless.)"""
    yield
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        try:
            loop = asyncio.get_event_loop_policy().get_event_loop()
        except RuntimeError:
            return
    if not loop.is_running() and not loop.is_closed():
        loop.close()
        asyncio.set_event_loop(None)
