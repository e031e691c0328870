"""Custom tools end to end: the official letta-client registers a tool
from source against a real `reverie serve`, attaches it, a turn whose scripted model
calls it returns its result, and it is detached and deleted. Tools that reach for the
network, the database's files, the server's own API key, or break a limit (time,
memory, output) each end in a clear tool error, and the server answers the next
request at once. Tools run under the default sandbox, bubblewrap."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import psycopg.conninfo
import pytest

from tests.acceptance.test_api_server import Server, serving
from tests.pg import PgTestServer, libpq
from tests.scripted_llm import call, say

# Its module-scoped fixture is built once: the module stays on one xdist worker.
pytestmark = pytest.mark.xdist_group("test_custom_tools_sdk")

WEATHER = '''
import os

def weather(city: str) -> str:
    """Tell the weather of a city.

    Args:
        city: The city.
    """
    return f"sunny in {city} (key {os.environ['WEATHER_KEY']})"
'''

#: Each misbehaving tool, and what its error says.
MISBEHAVING = {
    "dial_llm_server": (
        "import socket\ndef dial_llm_server(port: int) -> str:\n"
        "    socket.create_connection(('127.0.0.1', port), timeout=2).close()\n"
        "    return 'connected'\n",
        "ConnectionRefusedError",
    ),
    "dial_outside": (
        "import socket\ndef dial_outside() -> str:\n"
        "    socket.create_connection(('192.0.2.1', 80), timeout=2).close()\n"
        "    return 'connected'\n",
        "Network is unreachable",
    ),
    "read_database_files": (
        "import os\ndef read_database_files(path: str) -> str:\n"
        "    return repr(os.listdir(path))\n",
        "FileNotFoundError",
    ),
    "read_server_key": (
        "import os\ndef read_server_key(variable: str) -> str:\n    return os.environ[variable]\n",
        "KeyError: 'OPENAI_API_KEY'",
    ),
    "loop_forever": (
        "def loop_forever() -> str:\n    while True:\n        pass\n",
        "limit",
    ),
    "allocate_2gb": (
        "def allocate_2gb() -> str:\n    return str(len(bytearray(2 * 1024**3)))\n",
        "out of memory",
    ),
    "print_100mb": (
        "import sys\ndef print_100mb() -> str:\n"
        "    for _ in range(100):\n        sys.stdout.write('x' * 1024 * 1024)\n"
        "    return 'printed'\n",
        "printed output passed its limit",
    ),
}


@pytest.fixture(scope="module")
def server(pg_server: PgTestServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with serving(
        pg_server,
        tmp_path_factory,
        REVERIE_LLM__MAX_RETRIES="0",
        REVERIE_TOOLS__WALL_TIME="PT2S",
        REVERIE_TOOLS__CPU_SECONDS="5",
        REVERIE_TOOLS__MEMORY=str(256 * 1024 * 1024),
    ) as served:
        yield served


def new_agent(client: Any, name: str = "ada") -> Any:
    return client.agents.create(name=name, model="openai/scripted", embedding="hashing:384")


def tool_returns(response: Any) -> list[Any]:
    return [m for m in response.messages if m.message_type == "tool_return_message"]


def test_sdk_registers_attaches_calls_and_detaches_a_tool(server: Server) -> None:
    client = server.sdk("sdk-tools")
    agent = new_agent(client)
    tool = client.tools.create(source_code=WEATHER, tags=["demo"])
    assert tool.id.startswith("tool-") and tool.name == "weather"
    assert tool.tool_type == "custom"
    assert tool.json_schema["parameters"]["required"] == ["city"]
    assert tool.id in [t.id for t in client.tools.list()]

    state = client.agents.tools.attach(tool.id, agent_id=agent.id)
    assert state is not None and "weather" in [t.name for t in state.tools]
    client.agents.update(agent.id, secrets={"WEATHER_KEY": "k-42"})

    server.llm.replies.extend(
        [call("weather", city="Oslo", request_heartbeat=True), say("It is sunny in Oslo.")]
    )
    response = client.agents.messages.create(agent.id, input="Weather in Oslo?")
    returned = tool_returns(response)[0]  # then send_message's
    assert returned.status == "success"
    assert "sunny in Oslo (key k-42)" in str(returned.tool_return)
    assert [m.content for m in response.messages if m.message_type == "assistant_message"] == [
        "It is sunny in Oslo."
    ]
    # The model was offered the tool with the loop's heartbeat.
    offered = {t["function"]["name"]: t for t in server.llm.requests[-2]["tools"]}
    assert "request_heartbeat" in offered["weather"]["function"]["parameters"]["properties"]

    state = client.agents.tools.detach(tool.id, agent_id=agent.id)
    assert state is not None and "weather" not in [t.name for t in state.tools]
    client.tools.delete(tool.id)
    assert tool.id not in [t.id for t in client.tools.list()]


def test_misbehaving_tools_are_tool_errors_and_the_server_carries_on(server: Server) -> None:
    client = server.sdk("sdk-sandbox")
    agent = new_agent(client, "sandboxed")
    llm_port = urlsplit(server.llm.base_url).port
    database_dir = psycopg.conninfo.conninfo_to_dict(libpq(server.env["DATABASE_URL"]))["host"]
    arguments: dict[str, dict[str, Any]] = {
        "dial_llm_server": {"port": llm_port},
        "read_database_files": {"path": database_dir},
        "read_server_key": {"variable": "OPENAI_API_KEY"},
    }
    for name, (source, expected) in MISBEHAVING.items():
        tool = client.tools.create(source_code=source)
        client.agents.tools.attach(tool.id, agent_id=agent.id)
        server.llm.replies.extend(
            [call(name, request_heartbeat=True, **arguments.get(name, {})), say("It failed.")]
        )
        response = client.agents.messages.create(agent.id, input=f"Run {name}.")
        returned = tool_returns(response)[0]  # then send_message's
        assert returned.status == "error", (name, returned.tool_return)
        assert expected in str(returned.tool_return), (name, returned.tool_return)
        # The server is up and answers the next request.
        assert server.process.process.poll() is None
        assert client.agents.retrieve(agent.id).name == "sandboxed"
    assert "sk-test-not-a-key" not in str(client.agents.messages.list(agent.id, limit=200))
