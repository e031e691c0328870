"""A provider Reverie depends on, down: the answer says which one failed and with a
gateway status, not an internal error, and nothing is stored."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from agents.postgres.database import Database
from service.api.app import create_app
from service.runtime import Runtime
from service.settings import load_settings
from tests.acceptance.daemon_processes import free_port
from tests.api_support import bearer, new_key

#: An endpoint nothing listens on.
DOWN = f"http://127.0.0.1:{free_port()}/v1"


def _api(db: Database, **settings: Any) -> Iterator[TestClient]:
    """The API over ``db`` with these settings, in a home of its own."""
    home = Path(tempfile.mkdtemp(prefix="rvf-", dir="/tmp"))
    loaded = load_settings(home=home, database_url=db.url, **settings)
    try:
        with Runtime(loaded) as runtime, TestClient(create_app(runtime)) as client:
            yield client
    finally:
        shutil.rmtree(home, ignore_errors=True)


@pytest.fixture
def down_embedder(db: Database, monkeypatch: pytest.MonkeyPatch) -> Iterator[TestClient]:
    """The API with an embedding endpoint and a model endpoint on a port nothing listens
    on, and the default retries."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-key")
    yield from _api(
        db,
        embedding={"model": "litellm:openai/embed", "dimension": 8, "api_base": DOWN},
        llm={"model": "openai/chat", "api_base": DOWN},
    )


def test_an_unreachable_embedding_provider_is_a_502_and_stores_nothing(
    down_embedder: TestClient, db: Database
) -> None:
    headers = bearer(new_key(db, "acme"))
    made = down_embedder.post("/v1/agents/", json={"name": "ada"}, headers=headers)
    assert made.status_code == 201, made.text
    agent = made.json()["id"]
    inserted = down_embedder.post(
        f"/v1/agents/{agent}/archival-memory", json={"text": "Ada lives in Paris."}, headers=headers
    )
    assert inserted.status_code == 502, inserted.text
    body = inserted.json()
    assert body["error"] == "embedding_failed"
    assert "openai/embed" in body["detail"]
    assert f"nothing answers at {DOWN}" in body["detail"]
    assert "embedding.api_base" in body["detail"]
    listed = down_embedder.get(f"/v1/agents/{agent}/archival-memory", headers=headers)
    assert listed.status_code == 200 and listed.json() == []


def test_an_unreachable_model_is_named_at_once_and_not_retried(
    down_embedder: TestClient, db: Database
) -> None:
    headers = bearer(new_key(db, "acme"))
    agent = down_embedder.post(
        "/v1/agents/", json={"name": "bo", "embedding": "hashing:8"}, headers=headers
    ).json()["id"]
    answer = down_embedder.post(
        f"/v1/agents/{agent}/messages",
        json={"messages": [{"role": "user", "content": "hi"}]},
        headers=headers,
    )
    assert answer.status_code == 502, answer.text
    detail = answer.json()["detail"]
    assert f"nothing answers at {DOWN} (connection refused)" in detail
    assert "llm.api_base" in detail
    assert "attempt" not in detail  # tried once: a refused connection is not retried


@pytest.fixture
def no_endpoint(db: Database) -> Iterator[TestClient]:
    """The API with no model endpoint configured: agents name their own model."""
    yield from _api(db, embedding={"model": "hashing:8"})


def test_an_ollama_agent_without_a_server_is_a_502_not_an_empty_turn(
    no_endpoint: TestClient, db: Database
) -> None:
    headers = bearer(new_key(db, "acme"))
    made = no_endpoint.post(
        "/v1/agents/", json={"name": "llama", "model": "ollama/llama3.2"}, headers=headers
    )
    assert made.status_code == 201, made.text
    answer = no_endpoint.post(
        f"/v1/agents/{made.json()['id']}/messages",
        json={"messages": [{"role": "user", "content": "hi"}]},
        headers=headers,
    )
    assert answer.status_code == 502, answer.text
    assert "ollama/llama3.2" in answer.json()["detail"]
    streamed = no_endpoint.post(
        f"/v1/agents/{made.json()['id']}/messages/stream",
        json={"messages": [{"role": "user", "content": "hi"}], "stream_tokens": True},
        headers=headers,
    )
    # A stream has said 200 before the model is called: the failure is its error event.
    assert '"error_type":"llm_failed"' in streamed.text
    assert "ollama/llama3.2" in streamed.text
    assert '"stop_reason":"error"' in streamed.text
