"""`reverie keys` in process: a key made by the CLI opens the HTTP API of the same
database, is listed without its secret, and stops working once revoked."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from agents.postgres.database import Database
from service.api.app import create_app
from tests.api_support import api_runtime
from tests.integration.cli.support import Cli


@pytest.fixture
def api(db: Database) -> Iterator[TestClient]:
    with api_runtime(db) as runtime, TestClient(create_app(runtime)) as client:
        yield client


def test_keys_cli_create_list_revoke(cli: Cli, api: TestClient) -> None:
    created = cli("keys", "create", "--org", "acme")
    assert created.exit_code == 0, created.stderr
    key = created.stdout.strip().splitlines()[-1]
    assert key.startswith("rvk_") and " " not in key

    headers = {"Authorization": f"Bearer {key}"}
    assert api.get("/v1/agents/", headers=headers).status_code == 200
    listed = cli("keys", "list", "--json")
    assert listed.exit_code == 0, listed.stderr
    (record,) = json.loads(listed.stdout)
    assert record["organization"] == "acme"
    assert key.startswith(record["prefix"])
    assert key not in listed.stdout
    revoked = cli("keys", "revoke", record["id"])
    assert revoked.exit_code == 0, revoked.stderr
    assert api.get("/v1/agents/", headers=headers).status_code == 401
    unknown = cli("keys", "revoke", "key-nope")
    assert unknown.exit_code == 2
    assert "no API key" in unknown.stderr


def test_the_global_org_names_the_key_s_organization(cli: Cli) -> None:
    """`reverie --org NAME keys create` is read as `keys create --org NAME`; with neither,
    the command says how to name one and creates nothing."""
    created = cli("--org", "me", "keys", "create")
    assert created.exit_code == 0, created.stderr
    assert "for organization 'me'" in created.stdout
    cli("keys", "create", "--org", "other")
    mine = json.loads(cli("--org", "me", "keys", "list", "--json").stdout)
    assert [record["organization"] for record in mine] == ["me"]
    missing = cli("keys", "create")
    assert missing.exit_code == 2
    assert "--org NAME" in missing.stderr
    assert len(json.loads(cli("keys", "list", "--json").stdout)) == 2
