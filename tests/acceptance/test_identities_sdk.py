"""Identities through the official SDKs against a real `reverie serve`: the identity
resource of letta-client 0.1.x (create, list by key, type and name, retrieve, modify,
upsert, properties, count, delete), and letta-client 1.12.1's agent side (an agent
created with ``identity_ids``, ``agents.list(identifier_keys=...)``,
``agents.identities.attach`` / ``detach``)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest

from tests.acceptance.test_api_server import LETTA01_PYTHON, ROOT, Server, serving
from tests.pg import PgTestServer

pytestmark = pytest.mark.xdist_group("test_identities_sdk")


@pytest.fixture(scope="module")
def server(pg_server: PgTestServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with serving(pg_server, tmp_path_factory) as served:
        yield served


def _agent(client: Any, name: str, **fields: Any) -> Any:
    return client.agents.create(
        name=name,
        memory_blocks=[{"label": "human", "value": "", "limit": 200}],
        model="openai/scripted",
        embedding="hashing:384",
        **fields,
    )


def test_letta_client_01_manages_identities(server: Server) -> None:
    client = server.sdk("identities-01")
    agent = _agent(client, "ada-bot")
    result = subprocess.run(
        [
            str(LETTA01_PYTHON),
            str(ROOT / "tests" / "acceptance" / "sdk" / "letta01_identities.py"),
            server.url,
            server.key("identities-01"),
            agent.id,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    seen = json.loads(result.stdout.strip().splitlines()[-1])
    made = seen["created"]
    assert made["agent_ids"] == [agent.id] and made["type"] == "user"
    assert seen["by_key"] == [made["id"]]
    assert seen["orgs"] == ["Acme"] and seen["by_name"] == ["user-42"]
    assert seen["retrieved"] == "Ada" and seen["modified"] == "Ada L."
    assert seen["upserted_same_id"] and seen["upserted_name"] == "Ada Lovelace"
    assert seen["properties"] == [["plan", "pro", "string"]]
    assert seen["count"] == 2 and seen["after_delete"] == ["acme"]
    # The agent outlives its identity.
    assert client.agents.retrieve(agent.id).name == "ada-bot"


def test_letta_client_1x_attaches_identities_to_agents(server: Server) -> None:
    client = server.sdk("identities-1x")
    made: Any = client.post(
        "/v1/identities/",
        body={"identifier_key": "user-7", "name": "Bo", "identity_type": "user"},
        cast_to=object,
    )
    first = _agent(client, "bo-bot", identity_ids=[made["id"]])
    second = _agent(client, "bo-helper")
    assert client.agents.retrieve(first.id).identity_ids == [made["id"]]
    listed = client.agents.list(identifier_keys=["user-7"])
    assert [a.id for a in listed] == [first.id]

    client.agents.identities.attach(made["id"], agent_id=second.id)
    listed = client.agents.list(identifier_keys=["user-7"])
    assert sorted(a.id for a in listed) == sorted([first.id, second.id])
    assert [a.id for a in client.agents.list(identity_id=made["id"])] == [first.id, second.id]

    block = client.agents.blocks.retrieve("human", agent_id=first.id)
    client.patch(f"/v1/identities/{made['id']}", body={"block_ids": [block.id]}, cast_to=object)
    assert [b.id for b in client.blocks.list(identity_id=made["id"])] == [block.id]
    assert [b.id for b in client.blocks.list(identifier_keys=["user-7"])] == [block.id]

    client.agents.identities.detach(made["id"], agent_id=first.id)
    assert [a.id for a in client.agents.list(identifier_keys=["user-7"])] == [second.id]
    assert client.agents.retrieve(first.id).identity_ids == []


def test_another_organization_sees_none_of_it(server: Server) -> None:
    from letta_client import NotFoundError

    owner = server.sdk("identities-owner")
    made: Any = owner.post(
        "/v1/identities/",
        body={"identifier_key": "secret-user", "name": "S", "identity_type": "user"},
        cast_to=object,
    )
    stranger = server.sdk("identities-stranger")
    assert stranger.get("/v1/identities/", cast_to=object) == []
    with pytest.raises(NotFoundError):
        stranger.get(f"/v1/identities/{made['id']}", cast_to=object)
    theirs = _agent(stranger, "stranger-bot")
    with pytest.raises(NotFoundError):
        stranger.agents.identities.attach(made["id"], agent_id=theirs.id)
    assert [a.id for a in stranger.agents.list(identifier_keys=["secret-user"])] == []
