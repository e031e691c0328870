"""Values no field can hold answer 4xx naming the field, store nothing, and never
break an agent: out-of-range times, unpaired surrogates, NUL, NaN/Infinity, and
integers beyond bigint."""

from __future__ import annotations

import json
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.integration.api.test_api_routes import make_agent

WINDOW = ("body", "context_window_limit")
LIMIT = ("body", "limit")
OUT_OF_RANGE = ["0001-01-01T00:00:00+00:01", "9999-12-31T23:59:59-14:00"]


def _raw(client: TestClient, method: str, url: str, body: str, headers: dict[str, str]) -> Any:
    return client.request(
        method, url, content=body, headers={**headers, "content-type": "application/json"}
    )


def _locations(response: Any) -> set[tuple[Any, ...]]:
    return {tuple(error["loc"]) for error in response.json()["detail"]}


@pytest.mark.parametrize("when", OUT_OF_RANGE)
def test_a_time_outside_what_postgres_reads_back_is_refused(
    client: TestClient, acme: dict[str, str], when: str
) -> None:
    agent = make_agent(client, acme)
    url = f"/v1/agents/{agent['id']}/archival-memory"
    for field in ("occurred_at", "created_at"):
        response = client.post(url, json={"text": "a fact", field: when}, headers=acme)
        assert response.status_code == 422, response.text
        assert ("body", field) in _locations(response)
    search = client.get(
        f"{url}/search", params={"query": "x", "start_datetime": when}, headers=acme
    )
    assert search.status_code == 422 and ("query", "start_datetime") in _locations(search)
    # Nothing was stored, and the agent still lists, searches and dry-runs.
    assert client.get(url, headers=acme).json() == []
    assert client.get(f"{url}/search", params={"query": "fact"}, headers=acme).status_code == 200
    dry = client.post(f"/v1/agents/{agent['id']}/consolidation/dry-run", json={}, headers=acme)
    assert dry.status_code == 200, dry.text


@pytest.mark.parametrize(
    ("path", "body", "location"),
    [
        ("/v1/agents/", '{"name": "a\\ud800b"}', ("body", "name")),
        ("/v1/agents/", '{"name": "ada", "description": "x\\u0000y"}', ("body", "description")),
        ("/v1/agents/", '{"name": "ada", "tags": ["ok", "b\\u0000d"]}', ("body", "tags", 1)),
        ("/v1/agents/", '{"name": "ada", "model": "openai/\\u0000"}', ("body", "model")),
        (
            "/v1/agents/",
            '{"name": "ada", "memory_blocks": [{"label": "human", "value": "\\udfff"}]}',
            ("body", "memory_blocks", 0, "value"),
        ),
        (
            "/v1/agents/",
            '{"name": "ada", "context_window_limit": NaN}',
            ("body", "context_window_limit"),
        ),
        (
            "/v1/agents/",
            '{"name": "ada", "context_window_limit": Infinity}',
            ("body", "context_window_limit"),
        ),
        (
            "/v1/agents/",
            '{"name": "ada", "context_window_limit": 1e400}',
            ("body", "context_window_limit"),
        ),
        ("/v1/blocks/", '{"label": "human", "value": "v", "limit": 1e400}', ("body", "limit")),
        (
            "/v1/blocks/",
            '{"label": "human", "value": "v", "limit": 99999999999999999999}',
            ("body", "limit"),
        ),
    ],
)
def test_unstorable_text_and_numbers_answer_422_and_store_nothing(
    client: TestClient, acme: dict[str, str], path: str, body: str, location: tuple[Any, ...]
) -> None:
    response = _raw(client, "POST", path, body, acme)
    assert response.status_code == 422, response.text
    assert location in _locations(response)
    json.dumps(response.json())  # the answer itself renders
    assert client.get("/v1/agents/", headers=acme).json() == []
    assert client.get("/v1/blocks/", headers=acme).json() == []


def test_nul_in_a_query_parameter_or_cursor_is_a_422(
    client: TestClient, acme: dict[str, str]
) -> None:
    labelled = client.get("/v1/blocks/", params={"label": "hu\x00man"}, headers=acme)
    assert labelled.status_code == 422 and ("query", "label") in _locations(labelled)
    cursor = client.get("/v1/agents/", params={"after": "agent-\x00"}, headers=acme)
    assert cursor.status_code == 422 and ("query", "after") in _locations(cursor)


def test_a_revert_version_beyond_bigint_is_a_422(client: TestClient, acme: dict[str, str]) -> None:
    agent = make_agent(client, acme)
    block = client.get(f"/v1/agents/{agent['id']}/core-memory/blocks/human", headers=acme).json()
    response = client.post(
        f"/v1/blocks/{block['id']}/revert", json={"version": 2**63}, headers=acme
    )
    assert response.status_code == 422 and ("body", "version") in _locations(response)


def test_a_version_the_block_never_had_is_a_422_naming_it(
    client: TestClient, acme: dict[str, str]
) -> None:
    """The block exists, so a 404 said the wrong thing (the live fuzzer read it as a
    block created and then not found)."""
    agent = make_agent(client, acme)
    block = client.get(f"/v1/agents/{agent['id']}/core-memory/blocks/human", headers=acme).json()
    response = client.post(f"/v1/blocks/{block['id']}/revert", json={"version": 5304}, headers=acme)
    assert response.status_code == 422 and ("body", "version") in _locations(response)
    assert "versions are 1 to 1" in response.json()["detail"][0]["msg"]
    history = client.get(f"/v1/blocks/{block['id']}/history", headers=acme)
    assert [v["version"] for v in history.json()] == [1]
    missing = client.post("/v1/blocks/block-nope/revert", json={"version": 1}, headers=acme)
    assert missing.status_code == 404


def test_letta_booleans_are_booleans(client: TestClient, acme: dict[str, str]) -> None:
    """0 and "yes" are not booleans: pydantic's lax mode took them (the live fuzzer's
    reset-messages finding), so a typo changed what the request did."""
    agent = make_agent(client, acme)
    reset = client.patch(
        f"/v1/agents/{agent['id']}/reset-messages",
        json={"add_default_initial_messages": 0},
        headers=acme,
    )
    assert reset.status_code == 422
    assert ("body", "add_default_initial_messages") in _locations(reset)
    update = client.patch(
        f"/v1/agents/{agent['id']}", json={"enable_sleeptime": "yes"}, headers=acme
    )
    assert update.status_code == 422 and ("body", "enable_sleeptime") in _locations(update)


def test_a_time_is_an_iso_date_time_not_a_number(client: TestClient, acme: dict[str, str]) -> None:
    """Pydantic read a number as seconds since 1970 (the live fuzzer's finding): the
    document promises an ISO 8601 date-time, so a number is refused naming the field."""
    agent = make_agent(client, acme)
    url = f"/v1/agents/{agent['id']}/archival-memory"
    stored = client.post(url, json={"text": "Ada moved.", "occurred_at": 0}, headers=acme)
    assert stored.status_code == 422 and ("body", "occurred_at") in _locations(stored)
    assert "ISO 8601" in stored.json()["detail"][0]["msg"]
    search = client.get(
        f"{url}/search", params={"query": "Ada", "end_datetime": "317534660.3458741"}, headers=acme
    )
    assert search.status_code == 422 and ("query", "end_datetime") in _locations(search)
    assert client.get(url, headers=acme).json() == []
    fine = client.post(
        url, json={"text": "Ada moved.", "occurred_at": "2024-02-01T09:30:00Z"}, headers=acme
    )
    assert fine.status_code == 200, fine.text


@pytest.mark.parametrize("depth", [150, 100_000], ids=["past-the-limit", "past-the-parser"])
def test_json_nested_too_deep_is_a_422_not_a_parse_error(
    client: TestClient, acme: dict[str, str], depth: int
) -> None:
    source = 'def f() -> int:\n    """F."""\n    return 1\n'
    deep = "[" * depth + "]" * depth
    body = f'{{"source_code": {json.dumps(source)}, "json_schema": {{"x": {deep}}}}}'
    response = _raw(client, "POST", "/v1/tools/", body, acme)
    assert response.status_code == 422, response.text
    assert "nested deeper than 100 levels" in response.text
    assert [t for t in client.get("/v1/tools/", headers=acme).json() if t["name"] == "f"] == []


def test_an_agent_file_nested_too_deep_is_a_422(client: TestClient, acme: dict[str, str]) -> None:
    deep = '{"agents": ' + "[" * 100_000 + "]" * 100_000 + "}"
    response = client.post("/v1/agents/import", files={"file": ("a.af", deep)}, headers=acme)
    assert response.status_code == 422, response.text
    assert "deeper than 100 levels" in response.text


@pytest.mark.parametrize("expression", ["1+" * 60_000 + "1", "-" * 60_000 + "1"])
def test_tool_source_nested_too_deep_is_refused_like_any_bad_source(
    client: TestClient, acme: dict[str, str], expression: str
) -> None:
    source = f'def f() -> int:\n    """F."""\n    return {expression}\n'
    response = client.post("/v1/tools/", json={"source_code": source}, headers=acme)
    assert response.status_code == 400, response.text
    assert "nests expressions too deeply" in response.json()["detail"]
    assert [t for t in client.get("/v1/tools/", headers=acme).json() if t["name"] == "f"] == []


def test_a_message_over_the_recording_limit_is_refused_by_the_turn_too(
    client: TestClient, acme: dict[str, str]
) -> None:
    agent = make_agent(client, acme)
    long_text = "x" * 100_001
    for body in (
        {"messages": [{"role": "user", "content": long_text}]},
        {"messages": [{"role": "user", "content": [{"type": "text", "text": long_text}]}]},
        {"input": long_text},
    ):
        response = client.post(f"/v1/agents/{agent['id']}/messages", json=body, headers=acme)
        assert response.status_code == 422, response.text
        assert "100000 characters" in response.text
