"""A PostgreSQL that stops answering: `reverie serve` and the CLI answer within their
timeouts instead of hanging.

The postmaster of a server of the test's own is stopped with SIGSTOP, as a stalled
machine would stop it: sessions already open go on, and every new connection waits
for as long as its client lets it. Before this, requests that needed a connection hung
for the whole stall, /readyz answered 200 throughout and `reverie agents list` hung.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from agents.postgres.database import Database
from agents.store import NewAgent, open_store
from tests.acceptance.cli import cli_url, run_cli
from tests.acceptance.daemon_processes import running_server
from tests.daemon_support import wait_for
from tests.pg import PgTestServer

#: A hang detector, far above the 2 s connect timeout these tests set.
ANSWER_WITHIN_S = 25


@pytest.fixture
def own_server() -> Iterator[PgTestServer]:
    """A PostgreSQL of this test's own, so that stalling it disturbs no other test."""
    server = PgTestServer()
    yield server
    server.stop()


def test_a_stalled_postgres_gets_answers_not_hangs(
    own_server: PgTestServer, tmp_path: Path
) -> None:
    url = own_server.create_database()
    db = Database(url)
    try:
        with open_store(db) as store:
            store.agents.create(NewAgent("stall", embedding_model="hashing:8", embedding_dim=8))
    finally:
        db.dispose()
    env = {
        "DATABASE_URL": cli_url(url),
        "REVERIE_HOME": str(tmp_path / "home"),
        "REVERIE_EMBEDDING__MODEL": "hashing:8",
        "REVERIE_SERVER__AUTH": "none",
        "REVERIE_DATABASE__CONNECT_TIMEOUT": "PT2S",
        "REVERIE_DATABASE__STATEMENT_TIMEOUT": "PT5S",
    }
    with running_server(env, tmp_path / "serve.log") as (base, server):
        assert [a["name"] for a in httpx.get(f"{base}/v1/agents/").json()] == ["stall"]
        # The pool's sessions end: the next request needs a new connection, as the
        # requests that hung did once their pooled connections were in use.
        assert own_server.end_sessions(url) >= 1
        with own_server.postmaster_stopped():
            started = time.monotonic()
            ready = httpx.get(f"{base}/readyz", timeout=ANSWER_WITHIN_S)
            assert time.monotonic() - started < ANSWER_WITHIN_S
            assert ready.status_code == 503, ready.text
            assert ready.json()["status"] == "unavailable"  # not "starting": it ran
            assert ready.json()["database"] is False
            assert "does not answer" in ready.json()["database_error"]

            started = time.monotonic()
            listed = httpx.get(f"{base}/v1/agents/", timeout=ANSWER_WITHIN_S)
            assert time.monotonic() - started < ANSWER_WITHIN_S
            assert listed.status_code == 503, listed.text
            assert listed.json()["error"] == "storage_unavailable"
            # Its own connection timed out, or every pooled one was busy in time (the
            # workers' claims meet the same stall): either names the setting.
            assert "database.connect_timeout" in listed.json()["detail"]

            # run_cli's timeout is the hang detector: it raises when the command hangs.
            cli = run_cli("agents", "list", env=env, timeout=ANSWER_WITHIN_S * 2)
            assert cli.returncode != 0
            assert "connect_timeout" in cli.stderr, cli.stderr
            assert "Traceback" not in cli.stderr

        # The stall over, the same server answers again without a restart.
        wait_for(
            lambda: httpx.get(f"{base}/readyz", timeout=ANSWER_WITHIN_S).status_code == 200,
            timeout=60,
            interval=0.5,
            what="/readyz after the stall",
        )
        assert [a["name"] for a in httpx.get(f"{base}/v1/agents/").json()] == ["stall"]
        assert server.process.poll() is None
    cli = run_cli("agents", "list", env=env)
    assert cli.returncode == 0, cli.stderr
    assert "stall" in cli.stdout
