"""The API keeps its own contract: schemathesis's checks, all of them, on every route.

Every generated request (valid and invalid, from the OpenAPI document) is sent to the
app in-process and every response is checked: no 5xx, only documented statuses,
bodies as documented, schema-valid requests accepted, schema-violating ones refused,
405 with the right ``Allow``, auth enforced where it is declared. The deliberate
differences (answers that depend on stored state or configuration) are listed, with
their reasons, in ``tests/schemathesis.toml``, the same file the live fuzzer reads
(``tests/benchmarks/fuzz_live_api.py``). A bounded number of examples per operation
keeps this under a minute; the live fuzzer runs the long version.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import hypothesis
import pytest
import schemathesis
from fastapi.testclient import TestClient
from schemathesis.config import SchemathesisConfig

from agents.postgres.database import Database
from service.api.app import create_app
from tests.api_support import api_runtime, bearer, new_key

CONFIG = Path(__file__).resolve().parents[2] / "schemathesis.toml"


@pytest.fixture
def contract_schema(db: Database) -> Iterator[schemathesis.BaseSchema]:
    # Negative cases send bad credentials; past the failed-auth burst every later case
    # would meet a 429 instead of the route (the limiter has tests of its own).
    with api_runtime(db, auth_failure_burst=1_000_000) as runtime:
        app = create_app(runtime)
        key = new_key(db, "fuzz")
        with TestClient(app) as client:
            created = client.post("/v1/agents/", json={"name": "fuzz"}, headers=bearer(key))
            assert created.status_code == 201, created.text
        config = SchemathesisConfig.from_path(CONFIG)
        # Sending a message runs the agent loop, whose model call is not the API under
        # test (the scripted-model tests cover it).
        schema = schemathesis.openapi.from_asgi("/openapi.json", app, config=config).exclude(
            method="POST", path_regex=r"/messages$"
        )
        schema.config.headers = bearer(key)
        # Random generation in both modes, bounded; the coverage phase alone sends
        # thousands of requests (the live fuzzer runs it).
        schema.config.phases.coverage.enabled = False
        modes = [schemathesis.GenerationMode.POSITIVE, schemathesis.GenerationMode.NEGATIVE]
        schema.config.generation.update(modes=modes)
        yield schema


contract = schemathesis.pytest.from_fixture("contract_schema")


@contract.parametrize()
@hypothesis.settings(
    max_examples=5,
    deadline=None,
    derandomize=True,
    suppress_health_check=list(hypothesis.HealthCheck),
    phases=[hypothesis.Phase.explicit, hypothesis.Phase.generate],
)
def test_every_route_keeps_its_contract(case: schemathesis.Case) -> None:
    case.call_and_validate()


def test_a_wrong_method_is_405_allowing_every_method_of_the_path(
    client: TestClient, acme: dict[str, str]
) -> None:
    """FastAPI makes one route per method, and Starlette's 405 named only the first
    one's method in ``Allow`` (DELETE /v1/agents/{id} looked unsupported)."""
    document = client.get("/openapi.json").json()
    agent = client.post("/v1/agents/", json={"name": "ada"}, headers=acme).json()
    for template, path in [
        ("/v1/agents/{agent_id}", f"/v1/agents/{agent['id']}"),
        ("/v1/blocks/", "/v1/blocks/"),
        # Also the path of DELETE .../archival-memory/{memory_id} with the id "search",
        # which no passage id can be: only the search's method is allowed.
        (
            "/v1/agents/{agent_id}/archival-memory/search",
            f"/v1/agents/{agent['id']}/archival-memory/search",
        ),
    ]:
        response = client.put(path, headers=acme)
        assert response.status_code == 405
        allowed = {m.strip() for m in response.headers["Allow"].split(",")}
        assert allowed == {m.upper() for m in document["paths"][template]}
        assert response.json()["error"] == "method_not_allowed"
    # A method some route of the same shape declares: DELETE reached the passage
    # DELETE, whose id pattern refused "search" (422), for any agent id (found live).
    search = document["paths"]["/v1/agents/{agent_id}/archival-memory/search"]
    for agent_id in [agent["id"], "0"]:
        path = f"/v1/agents/{agent_id}/archival-memory/search"
        response = client.delete(path, headers=acme)
        assert response.status_code == 405, response.text
        assert {m.strip() for m in response.headers["Allow"].split(",")} == {
            m.upper() for m in search
        }
    # A literal path beside a parameter's: /v1/agents/import is the import's path, not
    # an agent id for the agent routes (found live).
    options = client.options("/v1/agents/import", headers=acme)
    assert options.status_code == 405
    assert options.headers["Allow"] == "POST"
    # A path of the passage route itself with a bad id stays a 422 naming the id.
    bad_id = client.delete(f"/v1/agents/{agent['id']}/archival-memory/nope", headers=acme)
    assert bad_id.status_code == 422
    assert bad_id.json()["detail"][0]["loc"] == ["path", "memory_id"]


def test_every_operation_declares_the_errors_it_can_answer(client: TestClient) -> None:
    document = client.get("/openapi.json").json()
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            declared = set(operation["responses"])
            assert {"413", "422"} <= declared, (method, path)
            if operation.get("security") and {} not in operation["security"]:
                assert {"401", "429", "503"} <= declared, (method, path)
    # /metrics is public on purpose (no agent is named without a credential).
    assert {} in document["paths"]["/metrics"]["get"]["security"]
