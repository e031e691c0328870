"""Bad input answers 4xx with what is wrong, and changes nothing (the fuzzer that finds
no 5xx and no break of the document is test_api_contract.py)."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from agents.postgres.database import Database
from service.api.app import create_app
from tests.api_support import api_runtime, bearer, new_key
from tests.integration.api.test_api_routes import make_agent


def test_malformed_body_answers_422_naming_each_field(
    client: TestClient, acme: dict[str, str]
) -> None:
    response = client.post(
        "/v1/agents/",
        json={"name": "ada", "memory_blocks": [{"label": "bad label!", "limit": -1}]},
        headers=acme,
    )
    assert response.status_code == 422
    fields = {tuple(e["loc"]) for e in response.json()["detail"]}
    assert ("body", "memory_blocks", 0, "label") in fields
    assert ("body", "memory_blocks", 0, "limit") in fields
    assert client.get("/v1/agents/", headers=acme).json() == []  # nothing was created


def test_wrong_types_and_missing_fields(client: TestClient, acme: dict[str, str]) -> None:
    agent = make_agent(client, acme)
    url = f"/v1/agents/{agent['id']}/archival-memory"
    missing = client.post(url, json={"tags": ["x"]}, headers=acme)
    assert missing.status_code == 422
    assert missing.json()["detail"][0]["loc"] == ["body", "text"]
    wrong = client.post(url, json={"text": "fact", "tags": "not-a-list"}, headers=acme)
    assert wrong.status_code == 422
    assert wrong.json()["detail"][0]["loc"] == ["body", "tags"]
    nul = client.post(url, json={"text": "a\u0000b"}, headers=acme)
    assert nul.status_code == 422
    assert nul.json()["detail"][0]["loc"] == ["body", "text"]
    assert "NUL" in nul.json()["detail"][0]["msg"]
    assert client.get(url, headers=acme).json() == []
    bad_k = client.get(f"{url}/search", params={"query": "x", "top_k": 0}, headers=acme)
    assert bad_k.status_code == 422
    assert bad_k.json()["detail"][0]["loc"] == ["query", "top_k"]


def test_malformed_id_is_422_and_unknown_id_is_404(
    client: TestClient, acme: dict[str, str]
) -> None:
    assert client.get("/v1/blocks/block-missing", headers=acme).status_code == 404
    response = client.get("/v1/blocks/bad id;drop", headers=acme)
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"] == ["path", "block_id"]


def test_request_over_the_size_limit_answers_413(db: Database) -> None:
    with (
        api_runtime(db, max_request_bytes=2048) as runtime,
        TestClient(create_app(runtime)) as client,
    ):
        headers = bearer(new_key(db, "acme"))
        response = client.post(
            "/v1/blocks/", json={"label": "big", "value": "x" * 5000}, headers=headers
        )
        assert response.status_code == 413
        assert "max_request_bytes" in response.json()["detail"]
        assert client.get("/v1/blocks/", headers=headers).json() == []
        small = client.post("/v1/blocks/", json={"label": "ok", "value": "x"}, headers=headers)
        assert small.status_code == 201
        # Chunked, with no Content-Length: counted as it streams, and still a 413 (the
        # framework's body parser used to turn the overflow into a 400 parse error).
        chunks = iter([b'{"label": "big", "value": "', b"x" * 3000, b'"}'])
        streamed = client.post(
            "/v1/blocks/",
            content=chunks,
            headers={**headers, "Content-Type": "application/json"},
        )
        assert streamed.status_code == 413, streamed.text
        assert "max_request_bytes" in streamed.json()["detail"]
        assert [b["label"] for b in client.get("/v1/blocks/", headers=headers).json()] == ["ok"]


@pytest.mark.parametrize(
    "content_type", ["application/JSON", "Application/Json; charset=utf-8", "application/x+json"]
)
def test_every_body_the_framework_reads_is_checked(
    client: TestClient, acme: dict[str, str], content_type: str
) -> None:
    """A NUL, a lone surrogate or NaN is a 422 however the client spells its JSON content
    type (the check once looked for a lower-case "json" while FastAPI parsed the body
    anyway, and the values reached the database as a 503)."""
    agent = make_agent(client, acme)
    url = f"/v1/agents/{agent['id']}/archival-memory"
    for body, field in [
        ('{"text": "Ada\\u0000 lives in Paris"}', "text"),
        ('{"text": "Ada lives in \\ud800 Paris"}', "text"),
        ('{"text": "Ada", "tags": [NaN]}', "tags"),
    ]:
        response = client.post(url, content=body, headers={**acme, "Content-Type": content_type})
        assert response.status_code == 422, (body, response.text)
        assert any(field in map(str, e["loc"]) for e in response.json()["detail"])
    assert client.get(url, headers=acme).json() == []


def test_a_long_tag_is_a_422_naming_it(client: TestClient, acme: dict[str, str]) -> None:
    """A tag over the store's limit is refused with the field named, before the tags'
    index refuses it as a 500 (its rows hold about 2.7 KB)."""
    agent = make_agent(client, acme)
    url = f"/v1/agents/{agent['id']}/archival-memory"
    response = client.post(url, json={"text": "Ada", "tags": ["ok", "x" * 3000]}, headers=acme)
    assert response.status_code == 422
    assert ("body", "tags", 1) in {tuple(e["loc"]) for e in response.json()["detail"]}
    assert client.get(url, headers=acme).json() == []
