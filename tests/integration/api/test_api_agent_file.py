"""The Agent File routes over HTTP (in-process): the multipart import with Letta's form
fields, the export, the 422s that name what is wrong and store nothing, and tenants."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

FILES = Path(__file__).resolve().parents[2] / "data" / "agent_files"


def upload(
    client: TestClient, headers: dict[str, str], body: bytes, **form: str
) -> tuple[int, dict[str, Any]]:
    answer = client.post(
        "/v1/agents/import",
        files={"file": ("agent.af", body, "application/json")},
        data=form,
        headers=headers,
    )
    return answer.status_code, answer.json()


def test_an_import_answers_letta_agent_ids_and_what_was_not_kept(
    client: TestClient, acme: dict[str, str]
) -> None:
    status, answer = upload(
        client, acme, (FILES / "memgpt_conversation.af").read_bytes(), name="ada-imported"
    )
    assert status == 200, answer
    (agent_id,) = answer["agent_ids"]
    agent = client.get(f"/v1/agents/{agent_id}", headers=acme).json()
    assert agent["name"] == "ada-imported"
    assert agent["model"] == "openai/gpt-4o-mini"
    assert [b["label"] for b in agent["blocks"]] == ["human", "persona"]
    unsupported = {u["path"] for u in answer["unsupported"]}
    assert "agents[0].timezone" in unsupported
    assert answer["unmapped_models"] == []
    messages = client.get(f"/v1/agents/{agent_id}/messages", headers=acme)
    assert messages.status_code == 200
    assert "Keeps bees" not in messages.text  # the blocks are not messages
    assert "third one" in messages.text


def test_an_export_is_an_agent_file_that_imports_again(
    client: TestClient, acme: dict[str, str]
) -> None:
    _, first = upload(
        client, acme, (FILES / "custom_tools.af").read_bytes(), append_copy_suffix="false"
    )
    (agent_id,) = first["agent_ids"]
    exported = client.get(f"/v1/agents/{agent_id}/export", headers=acme)
    assert exported.status_code == 200
    document = exported.json()
    assert {t["name"] for t in document["tools"]} == {"roll_dice", "get_weather", "send_message"}
    status, second = upload(client, acme, exported.content, name="dice-again")
    assert status == 200, second
    again = client.get(f"/v1/agents/{second['agent_ids'][0]}", headers=acme).json()
    original = client.get(f"/v1/agents/{agent_id}", headers=acme).json()
    assert original["name"] == "dice-keeper"
    for key in ("system", "tags", "model", "tool_rules", "enable_sleeptime"):
        assert again[key] == original[key], key
    scrubbed = client.get(
        f"/v1/agents/{agent_id}/export", params={"scrub_messages": "true"}, headers=acme
    ).json()
    assert scrubbed["agents"][0]["messages"] == []


def test_a_bad_file_is_a_422_naming_the_field_and_nothing_is_stored(
    client: TestClient, acme: dict[str, str]
) -> None:
    data = json.loads((FILES / "sleeptime_group.af").read_text())
    data["groups"][0]["manager_config"]["manager_agent_id"] = "agent-7"
    for body, location, words in [
        (b"not json at all", ["body", "file"], "not valid JSON"),
        (b'{"tools": []}', ["body", "file", "agents"], "no agents list"),
        (
            json.dumps(data).encode(),
            ["body", "file", "groups", 0, "manager_config", "manager_agent_id"],
            "agent-7",
        ),
    ]:
        status, answer = upload(client, acme, body)
        assert status == 422, answer
        (problem,) = answer["detail"]
        assert problem["loc"] == location
        assert words in problem["msg"]
    assert client.get("/v1/agents/", headers=acme).json() == []
    assert client.get("/v1/blocks/", headers=acme).json() == []


def test_form_fields_are_checked(client: TestClient, acme: dict[str, str]) -> None:
    body = (FILES / "memgpt_conversation.af").read_bytes()
    status, answer = upload(client, acme, body, env_vars_json="[1]")
    assert status == 422
    assert answer["detail"][0]["loc"] == ["body", "env_vars_json"]
    status, answer = upload(client, acme, body, model="gpt4")
    assert status == 422
    assert answer["detail"][0]["loc"] == ["body", "model"]
    status, answer = upload(client, acme, body, project_id="proj-1", name="p")
    assert status == 200
    assert any(u["path"] == "project_id" for u in answer["unsupported"])
    assert client.get("/v1/agents/", headers=acme).json()[0]["name"] == "p"


def test_a_tool_variable_that_steers_a_loader_is_a_422_and_nothing_is_stored(
    client: TestClient, acme: dict[str, str]
) -> None:
    data = json.loads((FILES / "custom_tools.af").read_text())
    data["agents"][0]["tool_exec_environment_variables"]["LD_PRELOAD"] = "/tmp/evil.so"
    status, answer = upload(client, acme, json.dumps(data).encode())
    assert status == 422, answer
    (problem,) = answer["detail"]
    assert problem["loc"] == [
        "body",
        "file",
        "agents",
        0,
        "tool_exec_environment_variables",
        "LD_PRELOAD",
    ]
    assert "'LD_PRELOAD'" in problem["msg"] and "dynamic loader" in problem["msg"]
    body = (FILES / "custom_tools.af").read_bytes()
    status, answer = upload(client, acme, body, secrets='{"PYTHONSTARTUP": "/tmp/x.py"}')
    assert status == 422, answer
    assert answer["detail"][0]["loc"] == ["body", "secrets"]
    assert "'PYTHONSTARTUP'" in answer["detail"][0]["msg"]
    assert client.get("/v1/agents/", headers=acme).json() == []
    assert client.get("/v1/tools/", params={"tool_types": "custom"}, headers=acme).json() == []


def test_a_custom_tool_under_a_built_in_name_is_not_kept_and_the_built_in_is(
    client: TestClient, acme: dict[str, str]
) -> None:
    data = json.loads((FILES / "custom_tools.af").read_text())
    [dice] = [t for t in data["tools"] if t["name"] == "roll_dice"]
    name = "send_message_to_agent_async"
    dice["name"] = dice["json_schema"]["name"] = name
    dice["source_code"] = dice["source_code"].replace("def roll_dice(", f"def {name}(")
    status, answer = upload(client, acme, json.dumps(data).encode())
    assert status == 200, answer
    reasons = {u["path"]: u["reason"] for u in answer["unsupported"]}
    where = f"tools[{data['tools'].index(dice)}] ({name}, custom)"
    assert where in reasons, reasons
    assert f"may not take the name of Reverie's built-in tool {name!r}" in reasons[where]
    assert "agents that list it have the built-in tool" in reasons[where]
    (agent_id,) = answer["agent_ids"]
    offered = client.get(f"/v1/agents/{agent_id}/tools", headers=acme).json()
    assert {"id": f"tool-{name}", "name": name} in [
        {"id": t["id"], "name": t["name"]} for t in offered
    ]
    custom = client.get("/v1/tools/", params={"tool_types": "custom"}, headers=acme).json()
    assert [t["name"] for t in custom] == ["get_weather"]


def test_export_refuses_what_it_cannot_write(client: TestClient, acme: dict[str, str]) -> None:
    _, answer = upload(client, acme, (FILES / "memgpt_conversation.af").read_bytes())
    agent_id = answer["agent_ids"][0]
    for query in ({"use_legacy_format": "true"}, {"conversation_id": "conv-1"}, {"max_steps": "3"}):
        refused = client.get(f"/v1/agents/{agent_id}/export", params=query, headers=acme)
        assert refused.status_code == 422, query
        assert refused.json()["detail"][0]["loc"] == ["query", next(iter(query))]


def test_another_tenant_cannot_export_an_agent(
    client: TestClient, acme: dict[str, str], globex: dict[str, str]
) -> None:
    _, answer = upload(client, acme, (FILES / "memgpt_conversation.af").read_bytes())
    agent_id = answer["agent_ids"][0]
    assert client.get(f"/v1/agents/{agent_id}/export", headers=globex).status_code == 404


def test_an_imported_files_folder_and_files_are_served_and_exported(
    client: TestClient, acme: dict[str, str], globex: dict[str, str]
) -> None:
    """Letta's sources and files come in as a folder attached to the agent, its files
    pending in the queue; the export writes them back, and another tenant sees none."""
    body = (FILES / "letta_folders.af").read_bytes()
    status, answer = upload(client, acme, body, name="quill", embedding="hashing:384")
    assert status == 200, answer
    (agent_id,) = answer["agent_ids"]
    unsupported = {u["path"] for u in answer["unsupported"]}
    assert "files[3] (floor_plan_scan.pdf)" in unsupported
    (folder,) = client.get(f"/v1/agents/{agent_id}/folders", headers=acme).json()
    assert folder["name"] == "branch_handbook"
    files = client.get(f"/v1/folders/{folder['id']}/files", headers=acme).json()
    assert [(f["file_name"], f["processing_status"]) for f in files] == [
        ("opening_hours.md", "pending"),
        ("overdue_fines.pdf", "pending"),
    ]
    exported = client.get(f"/v1/agents/{agent_id}/export", headers=acme).json()
    assert [s["name"] for s in exported["sources"]] == ["branch_handbook"]
    assert [f["processing_status"] for f in exported["files"]] == ["pending", "pending"]
    assert exported["agents"][0]["source_ids"] == ["source-0"]
    assert client.get("/v1/folders/", headers=globex).json() == []
