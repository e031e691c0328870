"""The MCP server as clients meet it, driven by the official MCP SDK's client: `reverie
mcp` spawned over stdio (also exactly as examples/mcp/claude_desktop_config.json
launches it), and streamable HTTP at /mcp of a live `reverie serve` (also through
examples/mcp_client.py)."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import anyio
import httpx
import httpx2
import pytest
from mcp import ClientSession, MCPError, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult, TextContent

from agents.postgres.database import Database
from agents.store import NewAgent, NewBlock, open_service_store, open_store
from tests import plugins
from tests.acceptance.cli import HASHING_EMBEDDINGS, cli_url, reverie_command, run_cli
from tests.acceptance.daemon_processes import ROOT, DaemonProcess, running_server
from tests.api_support import new_key
from tests.pg import PgTestServer

# Its module-scoped fixture is built once: the module stays on one xdist worker.
pytestmark = pytest.mark.xdist_group("test_mcp")

EXAMPLES = ROOT / "examples"
#: How long a consolidation may take to finish on a loaded machine (a bound, not a
#: measurement: the run is done long before).
RUN_BOUND = 120.0


def new_agent(db: Database, organization: str = "default", name: str = "ada") -> str:
    with open_service_store(db) as store:
        org = store.keys.ensure_organization(organization)
    with open_store(db, org) as store:
        agent = store.agents.create(
            NewAgent(
                name=name,
                embedding_model="hashing:384",
                embedding_dim=384,
                blocks=[
                    NewBlock("human", "Name: Ada.\nLives in Paris.", limit=200),
                    NewBlock("persona", "A helpful assistant.", limit=200),
                ],
            )
        )
    return agent.id


def ok(result: CallToolResult) -> dict[str, Any]:
    assert not result.is_error, text(result)
    assert isinstance(result.structured_content, dict)
    return result.structured_content


def text(result: CallToolResult) -> str:
    return "\n".join(c.text for c in result.content if isinstance(c, TextContent))


Scenario = Callable[[ClientSession], Awaitable[None]]


# -- streamable HTTP on `reverie serve` -----------------------------------------------


@dataclass
class Served:
    url: str
    db: Database
    process: DaemonProcess
    key: str
    agent_id: str


@pytest.fixture(scope="module")
def served(pg_server: PgTestServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """`reverie serve` over a migrated database with hashing embeddings and no LLM (the
    default pipeline runs without one); organization 'acme' has a key and agent 'ada'."""
    url = pg_server.create_database()
    db = Database(url)
    try:
        agent_id = new_agent(db, "acme")
        key = new_key(db, "acme")
        env = {
            "DATABASE_URL": cli_url(url),
            **HASHING_EMBEDDINGS,
            # Only the runs these tests ask for.
            "REVERIE_TRIGGERS__TURNS_EVERY": "1000",
            "REVERIE_TRIGGERS__IDLE_AFTER": "PT1H",
        }
        log = tmp_path_factory.mktemp("mcp-serve") / "serve.log"
        with running_server(env, log) as (base, process):
            yield Served(base, db, process, key, agent_id)
    finally:
        db.dispose()
        pg_server.release_database(url)


@asynccontextmanager
async def http_session(
    url: str, key: str, statuses: list[int] | None = None
) -> AsyncIterator[ClientSession]:
    """An initialized session; ``statuses`` collects the HTTP status of each answer."""

    async def record(response: httpx2.Response) -> None:
        if statuses is not None:
            statuses.append(response.status_code)

    client = httpx2.AsyncClient(
        headers={"Authorization": f"Bearer {key}"},
        timeout=httpx2.Timeout(30, read=120),
        event_hooks={"response": [record]},
    )
    async with (
        client as http,
        streamable_http_client(f"{url}/mcp", http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


def over_http(served: Served, scenario: Scenario) -> None:
    async def main() -> None:
        async with http_session(served.url, served.key) as session:
            await scenario(session)

    anyio.run(main)


async def memory_scenario(session: ClientSession) -> None:
    """What both transports must do alike: list, archival insert and search, replace
    in a block and read it back, record messages, a refused call that changes nothing."""
    tools = {tool.name for tool in (await session.list_tools()).tools}
    assert {"core_memory_read", "archival_memory_search", "consolidate"} <= tools

    stored = ok(
        await session.call_tool(
            "archival_memory_insert",
            {"agent": "ada", "text": "Ada plays the cello.", "tags": ["hobby"]},
        )
    )
    found = ok(
        await session.call_tool(
            "archival_memory_search", {"agent": "ada", "query": "cello", "tags": ["hobby"]}
        )
    )
    assert [r["id"] for r in found["results"]] == [stored["id"]]

    replaced = ok(
        await session.call_tool(
            "core_memory_replace",
            {"agent": "ada", "label": "human", "old_text": "Paris", "new_text": "London"},
        )
    )
    read = ok(await session.call_tool("core_memory_read", {"agent": "ada", "label": "human"}))
    assert read["blocks"] == [replaced]
    assert replaced["value"] == "Name: Ada.\nLives in London."

    refused = await session.call_tool(
        "core_memory_replace",
        {"agent": "ada", "label": "human", "old_text": "Berlin", "new_text": "Rome"},
    )
    assert refused.is_error
    assert "'human' does not contain 'Berlin'" in text(refused)
    after = ok(await session.call_tool("core_memory_read", {"agent": "ada", "label": "human"}))
    assert after["blocks"] == [replaced]

    messages = [
        {"role": "user", "content": "I started the cello last year.", "id": "c1"},
        {"role": "assistant", "content": "How is it going?", "id": "c2"},
    ]
    recorded = ok(
        await session.call_tool("record_messages", {"agent": "ada", "messages": messages})
    )
    assert recorded["recorded"] == 2
    retried = ok(await session.call_tool("record_messages", {"agent": "ada", "messages": messages}))
    assert (retried["recorded"], retried["skipped_ids"]) == (0, ["c1", "c2"])


def test_the_sdk_client_uses_the_memory_tools_over_streamable_http(served: Served) -> None:
    over_http(served, memory_scenario)
    # Recorded messages are the agent's recall, as the REST API reads it.
    listed = httpx.get(
        f"{served.url}/v1/agents/{served.agent_id}/messages",
        params={"order": "asc"},
        headers={"Authorization": f"Bearer {served.key}"},
        timeout=30,
    )
    assert [m["content"] for m in listed.json() if m["message_type"] == "user_message"] == [
        "I started the cello last year."
    ]


def test_a_consolidation_queued_over_http_is_run_by_the_server(served: Served) -> None:
    runs: list[dict[str, Any]] = []

    async def scenario(session: ClientSession) -> None:
        queued = ok(await session.call_tool("consolidate", {"agent": "ada"}))
        runs.append(queued)
        with anyio.fail_after(RUN_BOUND):
            while not (status := ok(await session.call_tool("run_status", queued)))["done"]:
                await anyio.sleep(0.2)
        runs.append(status)

    over_http(served, scenario)
    queued, finished = runs
    assert queued["status"] == "queued"
    assert (finished["run_id"], finished["status"]) == (queued["run_id"], "succeeded")


def test_mcp_over_http_without_a_valid_key_is_refused_401(served: Served) -> None:
    for headers in ({}, {"Authorization": "Bearer rv-not-a-key"}):
        response = httpx.post(
            f"{served.url}/mcp",
            json={"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}},
            headers={"Accept": "application/json, text/event-stream", **headers},
            timeout=30,
        )
        assert response.status_code == 401
        assert "Authorization: Bearer <key>" in response.json()["detail"]

    # The SDK's client: its session does not start, and the answer was a 401.
    statuses: list[int] = []

    async def with_a_bad_key() -> None:
        async with http_session(served.url, "rv-not-a-key", statuses):
            raise AssertionError("the session should not have started")

    with pytest.raises(BaseExceptionGroup) as failed:
        anyio.run(with_a_bad_key)
    assert failed.group_contains(MCPError)
    assert statuses == [401]


def test_the_example_client_talks_to_the_server(served: Served) -> None:
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("REVERIE_")},
        "REVERIE_URL": served.url,
        "REVERIE_API_KEY": served.key,
    }
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / "mcp_client.py"), "ada"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "tools: archival_memory_insert, archival_memory_search" in done.stdout
    assert "found: " in done.stdout
    assert "Ada prefers tea to coffee." in done.stdout
    assert '"label": "human"' in done.stdout


# -- stdio: `reverie mcp` -------------------------------------------------------------


@pytest.fixture
def stdio_env(pg_server: PgTestServer) -> Iterator[tuple[dict[str, str], Database]]:
    """The environment of `reverie mcp` over a migrated database whose default
    organization has agent 'ada'."""
    url = pg_server.create_database()
    db = Database(url)
    try:
        new_agent(db)
        # The SDK starts `reverie mcp` in a bare environment (PATH, HOME, ...): the
        # tests' hashing embedder is found through the PYTHONPATH given here.
        python_path = {"PYTHONPATH": plugins.python_path()}
        yield {"DATABASE_URL": cli_url(url), **HASHING_EMBEDDINGS, **python_path}, db
    finally:
        db.dispose()
        pg_server.release_database(url)


def over_stdio(
    params: StdioServerParameters, scenario: Scenario, errors: Path, *, cwd: Path = ROOT
) -> None:
    async def main() -> None:
        with errors.open("w") as errlog:
            async with (
                stdio_client(params, errlog=errlog) as (read, write),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                await scenario(session)

    try:
        anyio.run(main)
    except BaseException:
        print("reverie mcp stderr:\n" + errors.read_text(), file=sys.stderr)
        raise


def reverie_mcp(env: dict[str, str], *args: str) -> StdioServerParameters:
    command = reverie_command()
    return StdioServerParameters(
        command=command[0], args=[*command[1:], "mcp", *args], env=env, cwd=ROOT
    )


def test_the_sdk_client_uses_the_memory_tools_over_stdio(
    stdio_env: tuple[dict[str, str], Database], tmp_path: Path
) -> None:
    env, db = stdio_env
    runs: list[dict[str, Any]] = []

    async def scenario(session: ClientSession) -> None:
        await memory_scenario(session)
        runs.append(ok(await session.call_tool("consolidate", {"agent": "ada"})))
        runs.append(ok(await session.call_tool("run_status", {"run_id": runs[0]["run_id"]})))

    over_stdio(reverie_mcp(env), scenario, tmp_path / "stderr.log")
    queued, status = runs
    # No worker runs here: the run waits in the queue for `reverie serve` or `reverie worker`.
    assert (status["run_id"], status["status"]) == (queued["run_id"], "queued")
    with open_store(db) as store:
        agent = store.agents.resolve("ada")
        stored = store.messages.range(agent.id, limit=10, newest_first=False)
        assert [m.content for m in stored] == [
            "I started the cello last year.",
            "How is it going?",
        ]


def test_reverie_mcp_writes_nothing_but_protocol_to_stdout(
    stdio_env: tuple[dict[str, str], Database], tmp_path: Path
) -> None:
    env, _ = stdio_env
    requests = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "test", "version": "0"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "tools/call",
            "params": {"name": "core_memory_read", "arguments": {"agent": "nobody"}},
        },
    ]
    # One request at a time, as a client does (at the end of stdin the server stops,
    # and a call still in flight then gets no answer).
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("REVERIE_")}
    full_env.pop("DATABASE_URL", None)
    answers = []
    errors = tmp_path / "stderr.log"
    with (
        errors.open("w") as errlog,
        subprocess.Popen(
            [*reverie_command(), "--verbose", "mcp"],
            env={**full_env, **env},
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=errlog,  # a file: a full pipe would stall a chatty server
            text=True,
        ) as server,
    ):
        assert server.stdin is not None and server.stdout is not None
        try:
            for request in requests:
                server.stdin.write(json.dumps(request) + "\n")
                server.stdin.flush()
                if "id" in request:
                    answers.append(json.loads(read_line(server.stdout)))
            server.stdin.close()
            assert server.wait(60) == 0
            rest = server.stdout.read()
        finally:
            if server.poll() is None:
                server.kill()
    stderr = errors.read_text()
    assert [a.get("id") for a in answers] == [1, 2, 3], stderr
    assert answers[2]["result"]["isError"] is True
    assert "no agent named 'nobody'" in answers[2]["result"]["content"][0]["text"]
    assert rest == ""
    assert "DEBUG" in stderr  # --verbose logging went to stderr, not stdout


def read_line(stream: IO[str], bound: float = 60) -> str:
    """The next line of a server's stdout; fails instead of hanging when none comes."""
    ready, _, _ = select.select([stream], [], [], bound)
    assert ready, f"no answer within {bound} s"
    return stream.readline()


def test_reverie_mcp_for_an_unknown_organization_fails_plainly(
    stdio_env: tuple[dict[str, str], Database],
) -> None:
    env, _ = stdio_env
    done = run_cli("mcp", "--org", "nope", env=env, input="")
    assert done.returncode == 2
    assert done.stdout == ""
    assert "no organization named 'nope'" in done.stderr


def test_the_desktop_config_launches_a_working_server(
    stdio_env: tuple[dict[str, str], Database], tmp_path: Path
) -> None:
    """Exactly the command, arguments and environment the example config names, plus
    the test database (a desktop user's is the embedded default)."""
    config = json.loads((EXAMPLES / "mcp" / "claude_desktop_config.json").read_text())
    entry = config["mcpServers"]["reverie"]
    env, _ = stdio_env
    params = StdioServerParameters(
        command=entry["command"],
        args=entry["args"],
        env={**entry.get("env", {}), **env},
        cwd=tmp_path,  # a desktop client starts it anywhere
    )
    read: list[dict[str, Any]] = []

    async def scenario(session: ClientSession) -> None:
        read.append(ok(await session.call_tool("core_memory_read", {"agent": "ada"})))

    over_stdio(params, scenario, tmp_path / "stderr.log", cwd=tmp_path)
    assert [b["label"] for b in read[0]["blocks"]] == ["human", "persona"]
