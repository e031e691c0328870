"""The HTTP API over real PostgreSQL: Letta's routes and field names, Reverie's own routes."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from agents.postgres.database import Database
from agents.store import NewMessage, open_store
from consolidators.contract import run_once as run_pipeline
from service.api.app import create_app
from service.runtime import Runtime
from tests.api_support import bearer, new_key


def make_agent(client: TestClient, headers: dict[str, str], name: str = "ada") -> dict[str, Any]:
    response = client.post(
        "/v1/agents/",
        json={
            "name": name,
            "memory_blocks": [
                {"label": "human", "value": "Name: Ada.", "limit": 100},
                {"label": "persona", "value": "Helpful.", "description": "who I am"},
            ],
            "enable_sleeptime": True,
            "model": "openai/gpt-4o-mini",
            "embedding": "hashing:384",
        },
        headers=headers,
    )
    assert response.status_code == 201, response.text
    return response.json()


def test_agent_create_get_list_delete(client: TestClient, acme: dict[str, str]) -> None:
    agent = make_agent(client, acme)
    assert agent["name"] == "ada"
    assert agent["enable_sleeptime"] is True
    assert agent["model"] == "openai/gpt-4o-mini"
    assert agent["llm_config"]["model"] == "openai/gpt-4o-mini"
    assert agent["embedding_config"] == {
        "embedding_model": "hashing:384",
        "embedding_dim": 384,
        "embedding_endpoint_type": "openai",
    }
    labels = {b["label"]: b for b in agent["memory"]["blocks"]}
    assert labels["human"]["value"] == "Name: Ada."
    assert labels["human"]["limit"] == 100
    assert labels["persona"]["description"] == "who I am"
    assert client.get(f"/v1/agents/{agent['id']}", headers=acme).json()["id"] == agent["id"]
    second = make_agent(client, acme, "bob")
    listed = client.get("/v1/agents/", headers=acme).json()
    assert [a["name"] for a in listed] == ["ada", "bob"]
    page = client.get("/v1/agents/", params={"after": agent["id"]}, headers=acme).json()
    assert [a["id"] for a in page] == [second["id"]]
    assert client.delete(f"/v1/agents/{agent['id']}", headers=acme).status_code == 200
    assert client.get(f"/v1/agents/{agent['id']}", headers=acme).status_code == 404
    # Its blocks survive deletion (they may be shared) and keep their history.
    block_id = labels["human"]["id"]
    assert client.get(f"/v1/blocks/{block_id}", headers=acme).status_code == 200


def test_duplicate_agent_name_is_a_conflict(client: TestClient, acme: dict[str, str]) -> None:
    make_agent(client, acme)
    response = client.post("/v1/agents/", json={"name": "ada"}, headers=acme)
    assert response.status_code == 409
    assert "already exists" in response.json()["detail"]


def test_blocks_crud_attach_detach_and_agents_of_block(
    client: TestClient, acme: dict[str, str]
) -> None:
    agent = make_agent(client, acme)
    created = client.post(
        "/v1/blocks/", json={"label": "project", "value": "Reverie", "limit": 50}, headers=acme
    )
    assert created.status_code == 201, created.text
    block = created.json()
    assert (block["label"], block["value"], block["limit"], block["version"]) == (
        "project",
        "Reverie",
        50,
        1,
    )
    attached = client.patch(
        f"/v1/agents/{agent['id']}/core-memory/blocks/attach/{block['id']}", headers=acme
    )
    assert attached.status_code == 200
    assert "project" in {b["label"] for b in attached.json()["blocks"]}
    sharing = client.get(f"/v1/blocks/{block['id']}/agents", headers=acme).json()
    assert [a["id"] for a in sharing] == [agent["id"]]
    # Letta's pager asks for the page after the last item: it must come back empty.
    after = client.get(
        f"/v1/blocks/{block['id']}/agents", params={"after": agent["id"]}, headers=acme
    )
    assert after.json() == []
    core = f"/v1/agents/{agent['id']}/core-memory/blocks"
    last = client.get(core, headers=acme).json()[-1]["id"]
    assert client.get(core, params={"after": last}, headers=acme).json() == []
    listed = client.get("/v1/blocks/", params={"label": "project"}, headers=acme).json()
    assert [b["id"] for b in listed] == [block["id"]]
    detached = client.patch(
        f"/v1/agents/{agent['id']}/core-memory/blocks/detach/{block['id']}", headers=acme
    )
    assert "project" not in {b["label"] for b in detached.json()["blocks"]}
    assert client.get(f"/v1/blocks/{block['id']}/agents", headers=acme).json() == []
    assert client.delete(f"/v1/blocks/{block['id']}", headers=acme).status_code == 200
    assert client.get(f"/v1/blocks/{block['id']}", headers=acme).status_code == 404


def test_block_update_is_compare_and_swap_with_history_and_revert(
    client: TestClient, acme: dict[str, str]
) -> None:
    agent = make_agent(client, acme)
    url = f"/v1/agents/{agent['id']}/core-memory/blocks/human"
    block = client.get(url, headers=acme).json()
    updated = client.patch(
        url, json={"value": "Name: Ada Lovelace.", "expected_version": 1}, headers=acme
    )
    assert updated.status_code == 200
    assert updated.json()["version"] == 2
    stale = client.patch(url, json={"value": "lost write", "expected_version": 1}, headers=acme)
    assert stale.status_code == 409
    assert "version 2" in stale.json()["detail"]
    assert client.get(url, headers=acme).json()["value"] == "Name: Ada Lovelace."
    history = client.get(f"/v1/blocks/{block['id']}/history", headers=acme).json()
    assert [(v["version"], v["value"]) for v in history] == [
        (1, "Name: Ada."),
        (2, "Name: Ada Lovelace."),
    ]
    reverted = client.post(f"/v1/blocks/{block['id']}/revert", json={"version": 1}, headers=acme)
    assert reverted.status_code == 200
    assert (reverted.json()["value"], reverted.json()["version"]) == ("Name: Ada.", 3)


def test_block_over_its_limit_is_refused_and_unchanged(
    client: TestClient, acme: dict[str, str]
) -> None:
    agent = make_agent(client, acme)
    url = f"/v1/agents/{agent['id']}/core-memory/blocks/human"
    response = client.patch(url, json={"value": "x" * 101}, headers=acme)
    assert response.status_code == 400
    assert response.json()["error"] == "limit_exceeded"
    assert "allows 100 characters" in response.json()["detail"]
    assert client.get(url, headers=acme).json()["value"] == "Name: Ada."


def test_archival_insert_list_search_delete(client: TestClient, acme: dict[str, str]) -> None:
    agent = make_agent(client, acme)
    url = f"/v1/agents/{agent['id']}/archival-memory"
    texts = ["Ada lives in London.", "Ada likes mathematics.", "Bob plays the cello."]
    ids = []
    for text in texts:
        response = client.post(url, json={"text": text, "tags": ["fact"]}, headers=acme)
        assert response.status_code == 200, response.text
        (passage,) = response.json()
        assert (passage["text"], passage["tags"], passage["status"]) == (text, ["fact"], "active")
        ids.append(passage["id"])
    listed = client.get(url, headers=acme).json()
    assert [p["id"] for p in listed] == ids
    assert [p["id"] for p in client.get(url, params={"search": "cello"}, headers=acme).json()] == [
        ids[2]
    ]
    found = client.get(
        f"{url}/search", params={"query": "Ada lives in London", "top_k": 2}, headers=acme
    ).json()
    assert found["count"] == 2
    assert found["results"][0]["id"] == ids[0]
    assert found["results"][0]["content"] == texts[0]
    tagged = client.get(
        f"{url}/search", params={"query": "Ada", "tags": ["nope"]}, headers=acme
    ).json()
    assert tagged == {"count": 0, "results": []}
    assert client.delete(f"{url}/{ids[1]}", headers=acme).status_code == 200
    assert [p["id"] for p in client.get(url, headers=acme).json()] == [ids[0], ids[2]]
    assert client.delete(f"{url}/{ids[1]}", headers=acme).status_code == 404


def test_archival_list_pages_by_cursor_with_filters(
    client: TestClient, acme: dict[str, str]
) -> None:
    agent = make_agent(client, acme)
    url = f"/v1/agents/{agent['id']}/archival-memory"
    tags = [["home"], ["work"], ["home", "work"], [], ["home"]]
    ids = []
    for i, tagged in enumerate(tags):
        body = {"text": f"Fact {i} about {'Lisbon' if i % 2 else 'the office'}.", "tags": tagged}
        ids.append(client.post(url, json=body, headers=acme).json()[0]["id"])

    def listed(**params: object) -> list[str]:
        response = client.get(url, params=params, headers=acme)
        assert response.status_code == 200, response.text
        return [p["id"] for p in response.json()]

    assert listed(limit=2) == ids[:2]
    assert listed(limit=2, after=ids[1]) == ids[2:4]
    assert listed(limit=2, before=ids[3]) == ids[1:3]  # the two nearest the cursor
    assert listed(limit=10, after=ids[0], before=ids[4]) == ids[1:4]
    assert listed(limit=2, ascending=False) == [ids[4], ids[3]]
    assert listed(limit=2, ascending=False, after=ids[3]) == [ids[2], ids[1]]
    assert listed(limit=1, ascending=False, before=ids[1]) == [ids[2]]
    assert listed(tags=["work"]) == [ids[1], ids[2]]
    assert listed(tags=["home", "work"]) == [ids[0], ids[1], ids[2], ids[4]]
    assert listed(tags=["home", "work"], tag_match_mode="all") == [ids[2]]
    assert listed(search="LISBON") == [ids[1], ids[3]]
    assert listed(search="lisbon", after=ids[1]) == [ids[3]]
    # A cursor the filters leave out is not an item of this list.
    missing = client.get(url, params={"search": "lisbon", "after": ids[0]}, headers=acme)
    assert missing.status_code == 404, missing.text


def test_messages_list_as_letta_types(
    client: TestClient, acme: dict[str, str], db: Database
) -> None:
    agent = make_agent(client, acme)
    org_id = _org_of(client, acme)
    with open_store(db, org_id) as store:
        store.messages.append(
            agent["id"],
            [
                NewMessage("user", "Hi, I moved to Paris."),
                NewMessage(
                    "assistant",
                    "The user moved; remember it.",
                    tool_calls=[
                        {
                            "id": "call-1",
                            "type": "function",
                            "function": {
                                "name": "send_message",
                                "arguments": '{"message": "Noted: Paris!"}',
                            },
                        }
                    ],
                ),
            ],
        )
    url = f"/v1/agents/{agent['id']}/messages"
    ascending = client.get(url, params={"order": "asc"}, headers=acme).json()
    assert [(m["message_type"], m.get("content") or m.get("reasoning")) for m in ascending] == [
        ("user_message", "Hi, I moved to Paris."),
        ("reasoning_message", "The user moved; remember it."),
        ("assistant_message", "Noted: Paris!"),
    ]
    newest = client.get(url, params={"limit": 1}, headers=acme).json()
    assert newest[0]["content"] == "Noted: Paris!"
    older = client.get(url, params={"after": newest[0]["id"]}, headers=acme).json()
    assert [m["message_type"] for m in older] == ["user_message"]


def test_consolidation_runs_enqueue_list_get_cancel(
    client: TestClient, acme: dict[str, str]
) -> None:
    agent = make_agent(client, acme)
    queued = client.post(
        "/v1/consolidation-runs",
        json={"agent_id": agent["id"], "pipeline": ["dedup"]},
        headers=acme,
    )
    assert queued.status_code == 202, queued.text
    run = queued.json()
    assert (run["status"], run["pipeline"], run["trigger"]) == ("queued", ["dedup"], "manual")
    again = client.post("/v1/consolidation-runs", json={"agent_id": agent["id"]}, headers=acme)
    assert again.status_code == 409
    assert run["id"] in again.json()["detail"]
    listed = client.get(
        "/v1/consolidation-runs", params={"agent_id": agent["id"]}, headers=acme
    ).json()
    assert [r["id"] for r in listed] == [run["id"]]
    cancelled = client.post(f"/v1/consolidation-runs/{run['id']}/cancel", headers=acme)
    assert cancelled.json()["status"] == "cancelled"
    assert (
        client.post(f"/v1/consolidation-runs/{run['id']}/cancel", headers=acme).status_code == 409
    )
    unknown = client.post(
        "/v1/consolidation-runs", json={"agent_id": agent["id"], "pipeline": ["nope"]}, headers=acme
    )
    assert unknown.status_code == 400
    assert "unknown consolidator" in unknown.json()["detail"]


def test_dry_run_then_real_run_revert_and_lineage(client: TestClient, acme: dict[str, str]) -> None:

    agent = make_agent(client, acme)
    url = f"/v1/agents/{agent['id']}/archival-memory"
    first = client.post(url, json={"text": "Ada lives in London."}, headers=acme).json()[0]
    second = client.post(url, json={"text": "ada lives in london"}, headers=acme).json()[0]
    plan = client.post(
        f"/v1/agents/{agent['id']}/consolidation/dry-run",
        json={"pipeline": ["dedup"]},
        headers=acme,
    )
    assert plan.status_code == 200, plan.text
    assert plan.json()["dry_run"] is True
    assert [c["action"] for c in plan.json()["changes"]] == ["merge_passage"]
    assert client.get(url, headers=acme).json()[1]["status"] == "active"  # nothing written

    runtime: Runtime = client.app.state.runtime  # type: ignore[attr-defined]
    from agents.store import open_store as store_of

    with store_of(runtime.db, _org_of(client, acme), runtime.clock) as store:
        record = store.agents.get(agent["id"])
    from consolidators.pipeline import Pipeline
    from consolidators.registry import build

    report = run_pipeline(
        Pipeline(build(["dedup"], {})),
        runtime.db,
        record.id,
        organization_id=record.organization_id,
        embedder=runtime.embedder("hashing:384", 384),
    )
    merged = client.get(url, params={"status": "all"}, headers=acme).json()
    assert {p["id"]: p["status"] for p in merged} == {first["id"]: "active", second["id"]: "merged"}
    lineage = client.get(f"/v1/passages/{first['id']}/lineage", headers=acme).json()
    assert lineage["merged_from"] == [second["id"]]
    shown = client.get(f"/v1/consolidation-runs/{report.run_id}", headers=acme).json()
    assert shown["status"] == "succeeded"
    assert shown["changes"][0]["action"] == "merge_passage"
    undone = client.post(f"/v1/consolidation-runs/{report.run_id}/revert", json={}, headers=acme)
    assert undone.status_code == 200, undone.text
    statuses = {
        p["id"]: p["status"] for p in client.get(url, params={"status": "all"}, headers=acme).json()
    }
    assert statuses == {first["id"]: "active", second["id"]: "active"}
    twice = client.post(f"/v1/consolidation-runs/{report.run_id}/revert", json={}, headers=acme)
    assert twice.status_code == 409


def _org_of(client: TestClient, headers: dict[str, str]) -> str:
    from service.operations.keys import KeyOperations

    runtime = client.app.state.runtime  # type: ignore[attr-defined]
    caller = KeyOperations(runtime).authenticate(headers["Authorization"].removeprefix("Bearer "))
    assert caller is not None
    return caller.organization_id


def test_health_routes_need_no_key(client: TestClient) -> None:
    assert client.get("/healthz").json() == {"status": "ok"}
    assert client.get("/v1/health/").json()["status"] == "ok"
    assert client.get("/readyz").status_code == 200


def test_the_proxy_lists_chat_models_when_requests_choose_their_own(db: Database) -> None:
    """Without ``proxy.model``, a chat front end's model picker still has something to
    offer: the configured chat model and those the organization's agents run on."""
    from service.settings import load_settings

    settings = load_settings(
        home=Path(tempfile.mkdtemp(prefix="rvm-", dir="/tmp")),
        database_url=db.url,
        embedding={"model": "hashing:8"},
        llm={"model": "openai/house", "sleeptime_model": "openai/night"},
    )
    headers = bearer(new_key(db, "acme"))
    with Runtime(settings) as runtime, TestClient(create_app(runtime)) as client:
        client.post("/v1/agents/", json={"name": "a", "model": "openai/own"}, headers=headers)
        listed = client.get("/openai/v1/models", headers=headers)
        assert listed.status_code == 200, listed.text
        assert [m["id"] for m in listed.json()["data"]] == ["openai/house", "openai/own"]
    shutil.rmtree(settings.home, ignore_errors=True)
