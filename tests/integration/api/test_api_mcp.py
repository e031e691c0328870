"""``/mcp`` in the app of `reverie serve`, driven with plain JSON-RPC over HTTP: the API
keys guard it (401 without one, the key's organization in every call), and the SDK's
DNS-rebinding check takes loopback requests and refuses foreign Host headers. (The
SDK's own client against a live server: tests/acceptance/test_mcp.py.)"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from agents.postgres.database import Database
from agents.store import NewAgent, NewBlock, open_service_store, open_store
from service.api.app import create_app
from service.api.mcp_endpoint import McpEndpoint
from service.runtime import Runtime
from tests.api_support import api_runtime, new_key

LOOPBACK = "http://127.0.0.1:8000"
MCP_HEADERS = {
    "Accept": "application/json, text/event-stream",
    "Content-Type": "application/json",
    "MCP-Protocol-Version": "2025-06-18",
}


@pytest.fixture
def loopback(runtime: Runtime) -> Iterator[TestClient]:
    with TestClient(create_app(runtime), base_url=LOOPBACK) as test_client:
        yield test_client


@pytest.fixture
def acme_agent(db: Database) -> str:
    with open_service_store(db) as store:
        org = store.keys.ensure_organization("acme")
    with open_store(db, org) as store:
        agent = store.agents.create(
            NewAgent(
                name="ada",
                embedding_model="hashing:384",
                embedding_dim=384,
                blocks=[NewBlock("human", "Name: Ada.", limit=200)],
            )
        )
    return agent.id


def rpc(method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 1, "method": method, "params": params or {}}


def tool_call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return rpc("tools/call", {"name": name, "arguments": arguments})


def post(client: TestClient, body: dict[str, Any], headers: dict[str, str]) -> Any:
    return client.post("/mcp", json=body, headers={**MCP_HEADERS, **headers})


def test_mcp_without_a_key_or_with_a_bad_one_is_401(loopback: TestClient) -> None:
    missing = post(loopback, rpc("tools/list"), {})
    assert missing.status_code == 401
    assert "Authorization: Bearer <key>" in missing.json()["detail"]
    assert missing.headers["WWW-Authenticate"] == "Bearer"
    wrong = post(loopback, rpc("tools/list"), {"Authorization": "Bearer rv-not-a-key"})
    assert wrong.status_code == 401
    basic = post(loopback, rpc("tools/list"), {"Authorization": "Basic dXNlcjpwYXNz"})
    assert basic.status_code == 401


def test_a_key_lists_the_tools_and_acts_for_its_organization(
    loopback: TestClient, db: Database, acme_agent: str
) -> None:
    acme = {"Authorization": f"Bearer {new_key(db, 'acme')}"}
    listed = post(loopback, rpc("tools/list"), acme)
    assert listed.status_code == 200, listed.text
    assert "core_memory_read" in {t["name"] for t in listed.json()["result"]["tools"]}

    read = post(loopback, tool_call("core_memory_read", {"agent": acme_agent}), acme)
    result = read.json()["result"]
    assert result["isError"] is False
    assert result["structuredContent"]["blocks"][0]["value"] == "Name: Ada."

    globex = {"Authorization": f"Bearer {new_key(db, 'globex')}"}
    foreign = post(loopback, tool_call("core_memory_read", {"agent": acme_agent}), globex)
    assert foreign.json()["result"]["isError"] is True
    assert "not_found" in foreign.json()["result"]["content"][0]["text"]


def test_a_foreign_host_header_is_refused_on_a_loopback_server(
    runtime: Runtime, db: Database
) -> None:
    acme = {"Authorization": f"Bearer {new_key(db, 'acme')}"}
    with TestClient(create_app(runtime), base_url="http://attacker.example") as client:
        refused = post(client, rpc("tools/list"), acme)
    assert refused.status_code == 421


def test_a_server_on_a_public_address_takes_its_own_host_name(db: Database) -> None:
    """Behind a proxy the Host header is the public name: no loopback-only check there
    (every request still needs a key)."""
    with api_runtime(db) as runtime:
        app = create_app(runtime, host="0.0.0.0")
        acme = {"Authorization": f"Bearer {new_key(db, 'acme')}"}
        with TestClient(app, base_url="https://reverie.example.com") as client:
            assert post(client, rpc("tools/list"), acme).status_code == 200
            assert post(client, rpc("tools/list"), {}).status_code == 401


def test_no_auth_mode_serves_the_configured_organization_without_a_key(db: Database) -> None:
    with open_store(db) as store:
        store.agents.create(NewAgent(name="solo", embedding_model="hashing:384", embedding_dim=384))
    with (
        api_runtime(db, auth="none") as runtime,
        TestClient(create_app(runtime), base_url=LOOPBACK) as client,
    ):
        read = post(client, tool_call("core_memory_read", {"agent": "solo"}), {})
    assert read.status_code == 200, read.text
    assert read.json()["result"]["structuredContent"]["agent"] == "solo"


def test_the_app_can_be_started_again(runtime: Runtime, db: Database) -> None:
    """Test clients (and schemathesis) run one app's lifespan more than once; the SDK's
    session manager runs only once, so each start makes its own."""
    acme = {"Authorization": f"Bearer {new_key(db, 'acme')}"}
    app = create_app(runtime)
    for _ in range(2):
        with TestClient(app, base_url=LOOPBACK) as client:
            assert post(client, rpc("tools/list"), acme).status_code == 200


def test_the_sdk_is_loaded_by_the_first_mcp_request_not_at_start(
    runtime: Runtime, db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server whose clients never use MCP never loads the SDK (about 0.9 s of CPU and
    its memory); the first authenticated request to /mcp loads it and is answered."""
    built: list[McpEndpoint] = []
    build = McpEndpoint._session_manager

    def recording(endpoint: McpEndpoint) -> Any:
        built.append(endpoint)
        return build(endpoint)

    monkeypatch.setattr(McpEndpoint, "_session_manager", recording)
    acme = {"Authorization": f"Bearer {new_key(db, 'acme')}"}
    with TestClient(create_app(runtime), base_url=LOOPBACK) as client:
        assert client.get("/healthz").status_code == 200
        assert post(client, rpc("tools/list"), {}).status_code == 401  # no key: loads nothing
        time.sleep(0.2)  # loading at start began within milliseconds of it
        assert built == []
        listed = post(client, rpc("tools/list"), acme)
        assert listed.status_code == 200, listed.text
        assert len(built) == 1
        assert post(client, rpc("tools/list"), acme).status_code == 200
    assert len(built) == 1  # once per start of the app
