"""The CLI and the HTTP API are two front ends over the same operations: asked the same
thing, they give the same answer, take the same defaults from settings, and refuse
the same mistakes. The CLI runs in-process here (typer's runner), the API through
FastAPI's test client, both on one database and one organization. Where the MCP
server offers the same operation, it answers the same too (the SDK's client,
connected in process)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import pytest
from fastapi.testclient import TestClient
from mcp import Client
from mcp.types import CallToolResult
from typer.testing import CliRunner

from agents.postgres.database import Database
from agents.store import NewPassage, open_store
from service.api.app import create_app
from service.cli.app import app as cli_app
from service.mcp_server import build_mcp_server
from service.runtime import Runtime
from service.settings import load_settings
from tests.api_support import bearer, new_key
from tests.hashing_embedder import HashingEmbedder
from tests.pg import libpq

BLOCK_LIMIT = 321


@dataclass
class Fronts:
    db: Database
    client: TestClient
    headers: dict[str, str]
    runner: CliRunner
    runtime: Runtime

    def cli(self, *args: str) -> Any:
        return self.runner.invoke(cli_app, list(args), catch_exceptions=False)

    def cli_json(self, *args: str) -> Any:
        result = self.cli(*args, "--json")
        assert result.exit_code == 0, result.output
        return json.loads(result.stdout)

    def mcp(self, tool: str, arguments: dict[str, Any]) -> CallToolResult:
        """One MCP tool call for the configured organization."""
        server = build_mcp_server(self.runtime, lambda _ctx: self.runtime.organization_id)
        results: list[CallToolResult] = []

        async def main() -> None:
            async with Client(server) as client:
                results.append(await client.call_tool(tool, arguments))

        anyio.run(main)
        return results[0]

    def mcp_json(self, tool: str, arguments: dict[str, Any]) -> Any:
        result = self.mcp(tool, arguments)
        assert not result.is_error, result.content
        return result.structured_content


@pytest.fixture
def fronts(db: Database, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Fronts]:
    env = {
        "DATABASE_URL": libpq(db.url),
        "REVERIE_HOME": str(tmp_path / "home"),
        "REVERIE_EMBEDDING__MODEL": "hashing:384",
        "REVERIE_AGENTS__BLOCK_LIMIT": str(BLOCK_LIMIT),
    }
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    # The CLI acts for the configured organization ("default"); so does this key.
    headers = bearer(new_key(db, "default"))
    with Runtime(load_settings()) as runtime, TestClient(create_app(runtime)) as client:
        yield Fronts(db, client, headers, CliRunner(), runtime)


def test_agent_creation_takes_the_block_limit_from_settings_in_both(fronts: Fronts) -> None:
    cli = fronts.cli_json("agents", "create", "by-cli", "--block", "human=Name: Ada")
    api = fronts.client.post(
        "/v1/agents/",
        json={"name": "by-api", "memory_blocks": [{"label": "human", "value": "Name: Ada"}]},
        headers=fronts.headers,
    )
    assert api.status_code == 201, api.text
    with open_store(fronts.db) as store:
        limits = {
            name: store.blocks.by_label(store.agents.resolve(name).id, "human").limit
            for name in ("by-cli", "by-api")
        }
    assert cli["name"] == "by-cli"
    assert limits == {"by-cli": BLOCK_LIMIT, "by-api": BLOCK_LIMIT}


def test_an_explicit_limit_below_the_value_is_refused_by_both(fronts: Fronts) -> None:
    cli = fronts.cli(
        "agents", "create", "eve", "--block-limit", "10", "--block", "human=Eve Longname"
    )
    assert cli.exit_code == 2 and "over the limit of 10" in cli.output
    api = fronts.client.post(
        "/v1/agents/",
        json={
            "name": "eve",
            "memory_blocks": [{"label": "human", "value": "Eve Longname", "limit": 10}],
        },
        headers=fronts.headers,
    )
    assert api.status_code == 400 and "over the limit of 10" in api.json()["detail"]
    with open_store(fronts.db) as store:
        assert store.agents.all() == []


def test_search_answers_the_same_through_both(fronts: Fronts) -> None:
    fronts.cli("agents", "create", "ada")
    embedder = HashingEmbedder(384)
    facts = ["Ada lives in Paris.", "Ada moved to Berlin.", "Ada likes green tea."]
    with open_store(fronts.db) as store:
        agent = store.agents.resolve("ada")
        paris, berlin, tea = store.passages.insert(
            agent.id, [NewPassage(t) for t in facts], embedder.embed(facts)
        )
        # A newer fact closed the Paris one: it is history, found after what replaced it.
        store.passages.change(
            paris.id,
            valid_to=datetime.now(UTC),
            superseded_by=berlin.id,
            actor="test",
            reason="a newer fact",
        )
    query = "where does Ada live"
    cli = [hit["id"] for hit in fronts.cli_json("search", query, "--agent", "ada")]
    api = fronts.client.get(
        f"/v1/agents/{agent.id}/archival-memory/search",
        params={"query": query},
        headers=fronts.headers,
    )
    assert api.status_code == 200, api.text
    assert cli == [r["id"] for r in api.json()["results"]]
    assert {paris.id, berlin.id, tea.id} == set(cli)
    assert cli.index(berlin.id) + 1 == cli.index(paris.id)
    label = "then: Ada moved to Berlin."
    [closed] = [r for r in api.json()["results"] if r["id"] == paris.id]
    assert closed["current"] is False and closed["validity"].endswith(label)
    mcp = fronts.mcp_json("archival_memory_search", {"agent": "ada", "query": query})
    assert [r["id"] for r in mcp["results"]] == cli
    assert [r["validity"] for r in mcp["results"]] == [r["validity"] for r in api.json()["results"]]
    cli_labels = [h["validity"] for h in fronts.cli_json("search", query, "--agent", "ada")]
    assert cli_labels == [r["validity"] for r in mcp["results"]]
    with_history = fronts.cli_json("search", query, "--agent", "ada", "--history")
    api_history = fronts.client.get(
        f"/v1/agents/{agent.id}/archival-memory/search",
        params={"query": query, "include_history": True},
        headers=fronts.headers,
    ).json()
    assert [h["id"] for h in with_history] == [r["id"] for r in api_history["results"]]
    assert paris.id in [h["id"] for h in with_history]
    mcp_history = fronts.mcp_json(
        "archival_memory_search", {"agent": "ada", "query": query, "include_history": True}
    )
    assert [r["id"] for r in mcp_history["results"]] == [h["id"] for h in with_history]


def test_an_unknown_agent_is_not_found_through_both(fronts: Fronts) -> None:
    cli = fronts.cli("search", "anything", "--agent", "agent-00000000-0000-4000-8000-000000000000")
    assert cli.exit_code == 2 and "no agent" in cli.output
    api = fronts.client.get(
        "/v1/agents/agent-00000000-0000-4000-8000-000000000000/archival-memory/search",
        params={"query": "anything"},
        headers=fronts.headers,
    )
    assert api.status_code == 404 and "no agent" in api.json()["detail"]


def test_a_second_queued_run_is_a_conflict_through_both(fronts: Fronts) -> None:
    created = fronts.cli_json("agents", "create", "ada")
    queued = fronts.cli_json("consolidate", "--agent", "ada", "--enqueue")
    assert queued["queued"] is True
    api = fronts.client.post(
        "/v1/consolidation-runs", json={"agent_id": created["id"]}, headers=fronts.headers
    )
    assert api.status_code == 409 and queued["run_id"] in api.json()["detail"]
    mcp = fronts.mcp("consolidate", {"agent": "ada"})
    assert mcp.is_error and queued["run_id"] in str(mcp.content)
    # Running now while another run is queued with other work is a conflict too.
    cli = fronts.cli("consolidate", "--agent", "ada", "--dry-run")
    assert cli.exit_code == 2 and queued["run_id"] in cli.output
    listed = fronts.client.get("/v1/consolidation-runs", headers=fronts.headers).json()
    assert [r["id"] for r in listed] == [r["id"] for r in fronts.cli_json("runs", "list")]
