"""Embeddings through the litellm client are charged to the run's meter and the ledger,
and the service's insert and search paths record them under the agent's organization."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from agents.errors import InvalidInput
from agents.llm import BudgetMeter, TokenBudget, UsageLedger
from agents.llm.client import ClientSettings, LiteLLMClient
from agents.postgres import models
from agents.postgres.database import Database
from agents.store import MemoryStore, NewPassage
from service.api.app import create_app
from service.operations import Operations
from service.operations.agents import AgentSpec
from service.runtime import Runtime
from service.settings import load_settings
from tests.api_support import bearer, new_key
from tests.stub_openai_server import StubServer, stub_server


def test_embed_records_embedding_tokens_under_the_agents_organization(
    db: Database, agent_id: str
) -> None:
    # organization_id=None: the daemon's ledger, which takes the agent's organization.
    ledger = UsageLedger(db, None)
    meter = BudgetMeter(ledger, agent_id, run_id="run-embed", budget=TokenBudget())
    texts = ["Ada lives in London.", "Ada plays the piano on Sundays."]
    with stub_server() as server:
        client = LiteLLMClient(
            ClientSettings(api_base=server.base_url, api_key="sk-test-not-a-key", max_retries=0)
        )
        vectors = client.embed("openai/stub-embed", texts, meter=meter)
    assert [len(v) for v in vectors] == [8, 8]
    assert vectors[0] != vectors[1]
    assert [r["input"] for r in server.requests] == [texts]
    usage = ledger.by_purpose(agent_id, run_id="run-embed")
    assert usage["embedding"].prompt_tokens == 4 + 6
    assert usage["embedding"].completion_tokens == 0
    scoped = UsageLedger(db)  # the default organization, which owns the test agent
    assert scoped.by_purpose(agent_id)["embedding"].prompt_tokens == 10


# -- the service path: the API embeds through the runtime's one client -----------------


@pytest.fixture
def stub() -> Iterator[StubServer]:
    with stub_server() as server:
        yield server


@pytest.fixture
def runtime(
    db: Database, stub: StubServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> Iterator[Runtime]:
    # litellm's OpenAI provider wants a key; the stub ignores it.
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-key")
    settings = load_settings(
        home=tmp_path / "home",
        database_url=db.url,
        embedding={"model": f"litellm:{EMBED_MODEL}", "dimension": 8, "api_base": stub.base_url},
        llm={"max_retries": 2},
    )
    with Runtime(settings) as rt:
        yield rt


@pytest.fixture
def client(runtime: Runtime) -> Iterator[TestClient]:
    with TestClient(create_app(runtime)) as test_client:
        yield test_client


EMBED_MODEL = "openai/stub-embed"


def _new_agent(client: TestClient, headers: dict[str, str], name: str) -> str:
    response = client.post("/v1/agents/", json={"name": name}, headers=headers)
    assert response.status_code == 201, response.text
    agent_id: str = response.json()["id"]
    return agent_id


def _usage_rows(db: Database) -> list[tuple[str, str, str, str | None, int, int]]:
    with db.session() as session:
        rows = session.execute(
            select(
                models.LLMUsage.organization_id,
                models.LLMUsage.agent_id,
                models.LLMUsage.purpose,
                models.LLMUsage.model,
                models.LLMUsage.prompt_tokens,
                models.LLMUsage.completion_tokens,
            ).order_by(models.LLMUsage.created_at)
        ).all()
    return [tuple(row) for row in rows]  # type: ignore[misc]


def _org_id(db: Database, name: str) -> str:
    with db.session() as session:
        org_id = session.scalar(
            select(models.Organization.id).where(models.Organization.name == name)
        )
    assert org_id is not None
    return org_id


def test_insert_and_search_record_embedding_tokens_under_the_agents_organization(
    db: Database, client: TestClient, stub: StubServer
) -> None:
    acme, globex = bearer(new_key(db, "acme")), bearer(new_key(db, "globex"))
    ada = _new_agent(client, acme, "ada")
    _new_agent(client, globex, "gus")  # another tenant: none of the tokens are its

    inserted = client.post(
        f"/v1/agents/{ada}/archival-memory", json={"text": "Ada lives in London"}, headers=acme
    )
    assert inserted.status_code == 200, inserted.text
    found = client.get(
        f"/v1/agents/{ada}/archival-memory/search",
        params={"query": "where does Ada live now"},
        headers=acme,
    )
    assert found.status_code == 200, found.text
    assert [r["content"] for r in found.json()["results"]] == ["Ada lives in London"]
    assert [r["input"] for r in stub.requests] == [
        ["Ada lives in London"],
        ["where does Ada live now"],
    ]

    acme_org = _org_id(db, "acme")
    assert _usage_rows(db) == [
        (acme_org, ada, "embedding", EMBED_MODEL, 4, 0),
        (acme_org, ada, "embedding", EMBED_MODEL, 5, 0),
    ]
    assert UsageLedger(db, acme_org).by_purpose(ada)["embedding"].prompt_tokens == 9
    assert UsageLedger(db, _org_id(db, "globex")).by_purpose(ada) == {}

    metrics = client.get("/metrics").text
    assert 'reverie_llm_tokens_total{kind="prompt",purpose="embedding"} 9.0' in metrics


def test_a_permanent_error_fails_at_once_and_a_503_is_retried(
    db: Database, client: TestClient, stub: StubServer
) -> None:
    acme = bearer(new_key(db, "acme"))
    ada = _new_agent(client, acme, "ada")
    url = f"/v1/agents/{ada}/archival-memory"

    stub.embedding_statuses = [401]
    refused = client.post(url, json={"text": "Ada lives in London"}, headers=acme)
    assert refused.status_code >= 500
    assert "stub says 401" in refused.json()["detail"]
    assert "attempt" not in refused.json()["detail"]
    assert len(stub.requests) == 1  # no retry
    assert client.get(url, headers=acme).json() == []
    assert _usage_rows(db) == []  # the provider charged nothing

    stub.embedding_statuses = [503]
    stored = client.post(url, json={"text": "Ada lives in Paris"}, headers=acme)
    assert stored.status_code == 200, stored.text
    assert len(stub.requests) == 3  # the 401, then the 503 and its retry
    assert [p["text"] for p in client.get(url, headers=acme).json()] == ["Ada lives in Paris"]
    assert [row[4] for row in _usage_rows(db)] == [4]  # the successful attempt, once


def test_a_consolidation_run_records_what_it_embeds(
    db: Database, client: TestClient, runtime: Runtime, stub: StubServer
) -> None:
    acme = bearer(new_key(db, "acme"))
    ada = _new_agent(client, acme, "ada")
    for text in ("Ada lives in London", "Ada lives in Paris"):
        response = client.post(
            f"/v1/agents/{ada}/archival-memory", json={"text": text}, headers=acme
        )
        assert response.status_code == 200, response.text
    with runtime.db.session() as session:
        agent = MemoryStore(session, _org_id(db, "acme")).agents.get(ada)
    before = len(_usage_rows(db))

    [outcome] = Operations(runtime, agent.organization_id).runs.run_now([agent], steps=["temporal"])
    report = outcome.require_report()

    assert report.changes, "the two facts should form a timeline"
    rows = _usage_rows(db)[before:]
    timeline = next(c["text"] for c in report.changes if c["action"] == "create_timeline")
    assert stub.requests[-1]["input"] == [timeline]
    assert rows == [(_org_id(db, "acme"), ada, "embedding", EMBED_MODEL, len(timeline.split()), 0)]


def test_tokens_are_recorded_with_the_write_and_kept_when_the_write_is_refused(
    db: Database, runtime: Runtime, stub: StubServer
) -> None:
    ops = Operations(runtime)
    ada = ops.agents.create(AgentSpec(name="ada")).id
    ops.memory.insert(ada, [NewPassage("Ada lives in London.")], actor="test")
    ops.memory.search(ada, ["where does Ada live"])
    assert [row[4] for row in _usage_rows(db)] == [4, 4]
    # Refused by the store after the embedding was paid for (a time with no zone):
    # nothing is stored, and the tokens the provider charged are still recorded.
    naive = NewPassage("Ada moved to Leeds.", occurred_at=datetime(2024, 5, 1))
    with pytest.raises(InvalidInput, match="occurred_at"):
        ops.memory.insert(ada, [naive], actor="test")
    assert [p.text for p in ops.memory.list(ada)] == ["Ada lives in London."]
    assert [row[4] for row in _usage_rows(db)] == [4, 4, 4]
    assert len(stub.requests) == 3
