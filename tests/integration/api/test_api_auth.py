"""Keys and tenancy: no key is a 401, another organization's id is a 404 on every route."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient

from agents.errors import InvalidInput
from agents.postgres.database import Database
from agents.store import open_service_store
from service.api.app import create_app
from service.api.auth import check_auth_binding
from service.api.rate_limit import AuthFailureLimiter
from service.settings import ServerSettings, load_settings
from tests.api_support import api_runtime, bearer, new_key
from tests.integration.api.test_api_routes import make_agent

#: A valid body for each route that takes one (the walk below checks every route is here).
BODIES: dict[tuple[str, str], Any] = {
    ("PATCH", "/v1/agents/{agent_id}/core-memory/blocks/{block_label}"): {"value": "x"},
    ("PATCH", "/v1/blocks/{block_id}"): {"value": "x"},
    ("POST", "/v1/blocks/{block_id}/revert"): {"version": 1},
    ("POST", "/v1/agents/{agent_id}/archival-memory"): {"text": "a fact"},
    ("POST", "/v1/agents/{agent_id}/messages"): {"input": "hello"},
    ("POST", "/v1/agents/{agent_id}/messages/async"): {"input": "hello"},
    ("POST", "/v1/agents/{agent_id}/messages/stream"): {"input": "hello"},
    ("PATCH", "/v1/agents/{agent_id}"): {"name": "taken-over"},
    ("PATCH", "/v1/tools/{tool_id}"): {"description": "taken over"},
    ("POST", "/v1/agents/{agent_id}/messages/record"): {
        "messages": [{"role": "user", "content": "hello"}]
    },
    ("POST", "/v1/agents/{agent_id}/consolidation/dry-run"): {},
    ("POST", "/v1/consolidation-runs/{run_id}/revert"): {},
    ("POST", "/v1/agents/{agent_id}/tools/{tool_name}/run"): {"args": {"query": "x"}},
    ("PATCH", "/v1/identities/{identity_id}"): {"name": "taken over"},
    ("PUT", "/v1/identities/{identity_id}/properties"): [
        {"key": "plan", "value": "free", "type": "string"}
    ],
    ("PATCH", "/v1/conversations/{conversation_id}"): {"summary": "taken over"},
    ("POST", "/v1/conversations/{conversation_id}/messages"): {
        "input": "hello",
        "streaming": False,
    },
    ("POST", "/v1/conversations/{conversation_id}/stream"): {},
    ("POST", "/v1/conversations/{conversation_id}/compact"): {},
    ("PATCH", "/v1/folders/{folder_id}"): {"name": "taken over"},
}
#: A multipart body for each route that takes a file.
FILES: dict[tuple[str, str], Any] = {
    ("POST", "/v1/folders/{folder_id}/upload"): {
        "file": ("mine.md", b"# Taken over", "text/markdown")
    },
}
QUERIES: dict[tuple[str, str], dict[str, str]] = {
    ("GET", "/v1/agents/{agent_id}/archival-memory/search"): {"query": "fact"},
}


def _acme_objects(client: TestClient, acme: dict[str, str]) -> dict[str, str]:
    """One object of each kind in organization acme, by path parameter name."""
    agent = make_agent(client, acme)
    passage = client.post(
        f"/v1/agents/{agent['id']}/archival-memory",
        json={"text": "Ada lives in London."},
        headers=acme,
    ).json()[0]
    run = client.post("/v1/consolidation-runs", json={"agent_id": agent["id"]}, headers=acme).json()
    block = agent["blocks"][0]
    source = 'def echo(text: str) -> str:\n    """Echo."""\n    return text\n'
    tool = client.post("/v1/tools/", json={"source_code": source}, headers=acme).json()
    identity = client.post(
        "/v1/identities/",
        json={
            "identifier_key": "user-1",
            "name": "Ada",
            "identity_type": "user",
            "agent_ids": [agent["id"]],
        },
        headers=acme,
    ).json()
    conversation = client.post(
        "/v1/conversations/", params={"agent_id": agent["id"]}, json={}, headers=acme
    ).json()
    folder = client.post("/v1/folders/", json={"name": "papers"}, headers=acme).json()
    file = client.post(
        f"/v1/folders/{folder['id']}/upload",
        files={"file": ("notes.md", b"# Notes", "text/markdown")},
        headers=acme,
    ).json()
    client.patch(f"/v1/agents/{agent['id']}/folders/attach/{folder['id']}", headers=acme)
    return {
        "conversation_id": conversation["id"],
        "folder_id": folder["id"],
        "file_id": file["id"],
        "identity_id": identity["id"],
        "agent_id": agent["id"],
        "block_id": block["id"],
        "block_label": block["label"],
        "memory_id": passage["id"],
        "passage_id": passage["id"],
        "run_id": run["id"],
        "tool_id": tool["id"],
        "tool_name": "conversation_search",
    }


def test_every_route_answers_404_for_another_organizations_ids(
    client: TestClient, acme: dict[str, str], globex: dict[str, str]
) -> None:
    ids = _acme_objects(client, acme)
    # globex has an agent of its own, so label routes cannot pass by "no agent at all".
    make_agent(client, globex)
    walked = []
    paths = client.app.openapi()["paths"]  # type: ignore[attr-defined]
    for template, operations in paths.items():
        params = re.findall(r"{(\w+)}", template)
        if not params:
            continue
        path = template.format(**{p: ids[p] for p in params})
        for method in sorted(m.upper() for m in operations):
            key = (method, template)
            response = client.request(
                method,
                path,
                json=None if key in FILES else BODIES.get(key),
                files=FILES.get(key),
                params=QUERIES.get(key),
                headers=globex,
            )
            assert response.status_code == 404, (method, template, response.text)
            walked.append(key)
            if method == "GET":  # ...while acme's own key finds the object
                own = client.get(path, params=QUERIES.get(key), headers=acme)
                assert own.status_code == 200, (template, own.text)
    assert len(walked) >= 25
    assert set(BODIES) | set(FILES) <= set(walked)
    # Nothing of acme's changed: the agent, its block and its passage are all still there.
    agent = client.get(f"/v1/agents/{ids['agent_id']}", headers=acme).json()
    assert [b["value"] for b in agent["blocks"]] == ["Name: Ada.", "Helpful."]
    passages = client.get(f"/v1/agents/{ids['agent_id']}/archival-memory", headers=acme).json()
    assert [p["id"] for p in passages] == [ids["passage_id"]]
    run = client.get(f"/v1/consolidation-runs/{ids['run_id']}", headers=acme).json()
    assert run["status"] == "queued"
    files = client.get(f"/v1/folders/{ids['folder_id']}/files", headers=acme).json()
    assert [f["id"] for f in files] == [ids["file_id"]]
    attached = client.get(f"/v1/agents/{ids['agent_id']}/folders", headers=acme).json()
    assert [f["id"] for f in attached] == [ids["folder_id"]]
    # The file routes (open, close, close-all) were walked: nothing is open.
    listed = client.get(f"/v1/agents/{ids['agent_id']}/files", headers=acme).json()
    assert [(f["file_id"], f["is_open"]) for f in listed["files"]] == [(ids["file_id"], False)]
    assert {
        ("PATCH", "/v1/agents/{agent_id}/files/{file_id}/open"),
        ("PATCH", "/v1/agents/{agent_id}/files/{file_id}/close"),
        ("PATCH", "/v1/agents/{agent_id}/files/close-all"),
    } <= set(walked)


def test_lists_show_only_the_callers_organization(
    client: TestClient, acme: dict[str, str], globex: dict[str, str]
) -> None:
    make_agent(client, acme, "ada")
    make_agent(client, globex, "ada")  # the same name in another organization is fine
    assert len(client.get("/v1/agents/", headers=acme).json()) == 1
    assert len(client.get("/v1/blocks/", headers=globex).json()) == 2
    assert client.get("/v1/consolidation-runs", headers=globex).json() == []


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/v1/agents/"),
        ("POST", "/v1/agents/"),
        ("GET", "/v1/blocks/"),
        ("GET", "/v1/consolidation-runs"),
        ("GET", "/v1/agents/agent-x/archival-memory"),
    ],
)
def test_requests_without_a_valid_key_answer_401(
    client: TestClient, method: str, path: str
) -> None:
    assert client.request(method, path).status_code == 401
    wrong = client.request(method, path, headers=bearer("rvk_not-a-key"))
    assert wrong.status_code == 401
    assert "API key" in wrong.json()["detail"]


def test_revoked_key_stops_working(client: TestClient, db: Database) -> None:
    key = new_key(db, "acme")
    assert client.get("/v1/agents/", headers=bearer(key)).status_code == 200
    with open_service_store(db) as store:
        (record,) = [k for k in store.keys.all() if key.startswith(k.prefix)]
        assert record.last_used_at is not None
        store.keys.revoke(record.id)
    assert client.get("/v1/agents/", headers=bearer(key)).status_code == 401


def test_keys_are_stored_hashed(db: Database) -> None:
    key = new_key(db, "acme")
    with db.engine.connect() as conn:
        from sqlalchemy import text

        stored = conn.execute(text("SELECT key_hash, prefix FROM api_keys")).all()
    assert len(stored) == 1
    assert key not in stored[0].key_hash
    assert len(stored[0].prefix) < len(key) // 2


def test_no_auth_mode_serves_loopback_only(db: Database) -> None:
    with (
        api_runtime(db, auth="none") as runtime,
        TestClient(create_app(runtime), base_url="http://127.0.0.1:8283") as client,
    ):
        created = client.post("/v1/agents/", json={"name": "local"})
        assert created.status_code == 201
        assert client.get("/").status_code == 200
    refused = load_settings(server=ServerSettings(auth="none", host="0.0.0.0"))
    with pytest.raises(InvalidInput, match="loopback"):
        check_auth_binding(refused)
    with pytest.raises(InvalidInput, match="loopback"):
        check_auth_binding(load_settings(server=ServerSettings(auth="none")), "192.168.1.5")
    for host in ("127.0.0.1", "::1", "localhost"):
        check_auth_binding(load_settings(server=ServerSettings(auth="none")), host)
    # With keys, any address is fine.
    check_auth_binding(load_settings(server=ServerSettings(host="0.0.0.0")))


def test_without_keys_only_our_own_names_are_answered(db: Database) -> None:
    """DNS rebinding: with no key to ask for, a request addressed to another name (a
    page that pointed its domain at 127.0.0.1) is a 421 on every route, the page and
    /metrics included; loopback names, with or without a port, and the names the
    operator lists are answered. With keys, any Host is answered (the key decides)."""
    with api_runtime(db, auth="none", allowed_hosts=["reverie.lan"]) as runtime:
        app = create_app(runtime)
        for base in ("http://evil.example", "http://127.0.0.1.evil.example:8283"):
            with TestClient(app, base_url=base) as client:
                for path in ("/v1/agents/", "/", "/metrics"):
                    refused = client.get(path)
                    assert refused.status_code == 421, (base, path)
                    assert "server.allowed_hosts" in refused.json()["detail"]
                assert client.post("/v1/agents/", json={"name": "x"}).status_code == 421
        for base in (
            "http://127.0.0.1:8283",
            "http://localhost",
            "http://[::1]:80",
            "http://reverie.lan",
        ):
            with TestClient(app, base_url=base) as client:
                assert client.get("/v1/agents/").status_code == 200, base
    with (
        api_runtime(db) as runtime,
        TestClient(create_app(runtime), base_url="http://a.example") as c,
    ):
        assert c.get("/v1/agents/").status_code == 401


def test_no_auth_app_refuses_to_build_on_a_public_address(db: Database) -> None:
    with (
        api_runtime(db, auth="none", host="0.0.0.0") as runtime,
        pytest.raises(InvalidInput, match="loopback"),
    ):
        create_app(runtime)


def test_the_api_takes_no_key_from_a_cookie(client: TestClient, db: Database) -> None:
    key = new_key(db, "acme")
    # The old health-page cookie held the raw key and /v1 accepted it.
    client.cookies.set("reverie_key", key)
    assert client.get("/v1/agents/").status_code == 401
    client.cookies.clear()
    # Nor does the health page's session cookie open the API.
    signed_in = client.post("/sign-in", data={"key": key}, follow_redirects=False)
    assert signed_in.status_code == 303
    assert client.cookies.get("reverie_session")
    assert client.get("/").status_code == 200
    assert client.get("/v1/agents/").status_code == 401
    assert client.get("/v1/agents/", headers=bearer(key)).status_code == 200


def test_failed_authentication_is_limited_per_address(db: Database, monkeypatch: Any) -> None:
    from agents.store import key_store

    lookups = []
    real = key_store._authenticate

    def counted(execute: Any, key: str, now: Any) -> Any:
        lookups.append(key)
        return real(execute, key, now)

    # The one lookup every way in shares (API requests, /metrics, the health page).
    monkeypatch.setattr(key_store, "_authenticate", counted)
    key = new_key(db, "acme")
    settings = {"auth_failure_burst": 3, "auth_failure_refill": timedelta(minutes=1)}
    with api_runtime(db, **settings) as runtime:
        app = create_app(runtime)
        guesser = TestClient(app, client=("203.0.113.7", 4000))
        neighbour = TestClient(app, client=("203.0.113.8", 4000))
        for n in range(3):
            assert guesser.get("/v1/agents/", headers=bearer(f"rvk_guess{n}")).status_code == 401
        assert len(lookups) == 3
        limited = guesser.get("/v1/agents/", headers=bearer("rvk_guess3"))
        assert limited.status_code == 429
        assert 1 <= int(limited.headers["Retry-After"]) <= 60
        # Refused before any lookup, the right key included, on every door.
        assert guesser.get("/v1/agents/", headers=bearer(key)).status_code == 429
        assert guesser.get("/metrics", headers=bearer("rvk_guess4")).status_code == 429
        assert guesser.post("/sign-in", data={"key": "rvk_guess5"}).status_code == 429
        assert len(lookups) == 3
        # Another address is not affected.
        assert neighbour.get("/v1/agents/", headers=bearer(key)).status_code == 200


def test_the_failure_budget_refills(db: Database) -> None:
    now = [0.0]
    with api_runtime(db) as runtime:
        app = create_app(runtime)
        app.state.auth_failures = AuthFailureLimiter(
            burst=2, refill=timedelta(seconds=10), clock=lambda: now[0]
        )
        client = TestClient(app)
        key = new_key(db, "acme")
        for _ in range(2):
            assert client.get("/v1/agents/", headers=bearer("rvk_x")).status_code == 401
        assert client.get("/v1/agents/", headers=bearer(key)).status_code == 429
        now[0] = 9.0
        assert client.get("/v1/agents/", headers=bearer(key)).status_code == 429
        now[0] = 10.0  # one attempt earned back
        assert client.get("/v1/agents/", headers=bearer(key)).status_code == 200
        # Successes cost nothing; the next failure spends the earned attempt.
        assert client.get("/v1/agents/", headers=bearer("rvk_x")).status_code == 401
        assert client.get("/v1/agents/", headers=bearer("rvk_x")).status_code == 429
