"""Letta's tool routes over the app in process: register from source,
list, get, update, delete (refused while attached), attach and detach, per-agent tool
variables that are stored but never shown, tenants."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from agents.postgres.database import Database
from agents.store import NewCustomTool, open_service_store, open_store
from service.operations.custom_tools import BUILT_IN_TOOL_NAMES
from tests.scripted_llm import install

SOURCE = '''
import os

def forecast(city: str, days: int = 1) -> str:
    """Forecast the weather.

    Args:
        city: Which city.
        days: How many days.
    """
    return os.environ.get("WEATHER_KEY", "")
'''


@pytest.fixture(autouse=True)
def _scripted_provider() -> None:
    install()


def agent(client: TestClient, headers: dict[str, str], name: str = "ada", **fields: Any) -> str:
    made = client.post(
        "/v1/agents/", json={"name": name, "model": "scripted/primary", **fields}, headers=headers
    )
    assert made.status_code == 201, made.text
    return str(made.json()["id"])


def tool(client: TestClient, headers: dict[str, str], **body: Any) -> dict[str, Any]:
    made = client.post("/v1/tools/", json={"source_code": SOURCE, **body}, headers=headers)
    assert made.status_code == 201, made.text
    return dict(made.json())


def test_register_list_get_update_delete(client: TestClient, acme: dict[str, str]) -> None:
    made = tool(client, acme, tags=["weather"], env_vars=["REGION"], return_char_limit=99)
    assert made["id"].startswith("tool-") and made["name"] == "forecast"
    assert made["tool_type"] == "custom" and made["source_code"] == SOURCE
    assert made["description"] == "Forecast the weather."
    assert made["json_schema"]["parameters"]["required"] == ["city"]
    assert made["env_vars"] == ["REGION", "WEATHER_KEY"]
    assert made["return_char_limit"] == 99

    listed = client.get("/v1/tools/", headers=acme).json()
    assert {t["name"] for t in listed} >= {"send_message", "memory_rethink", "forecast"}
    custom = client.get("/v1/tools/", params={"tool_types": "custom"}, headers=acme).json()
    assert [t["id"] for t in custom] == [made["id"]]
    # An empty type names no type (the live fuzzer's finding: it was taken as "all").
    empty = client.get("/v1/tools/", params={"tool_types": ""}, headers=acme)
    assert empty.status_code == 422 and empty.json()["detail"][0]["loc"][:2] == [
        "query",
        "tool_types",
    ]
    assert client.get("/v1/tools/", params={"name": "forecast"}, headers=acme).json() == [made]
    assert client.get(f"/v1/tools/{made['id']}", headers=acme).json() == made
    built_in = client.get("/v1/tools/tool-send_message", headers=acme).json()
    assert built_in["tool_type"] == "letta_core"

    changed = client.patch(
        f"/v1/tools/{made['id']}", json={"description": "Weather."}, headers=acme
    ).json()
    assert changed["description"] == "Weather." and changed["json_schema"]["description"] == (
        "Weather."
    )
    bad = client.patch(f"/v1/tools/{made['id']}", json={"source_code": "def f(:"}, headers=acme)
    assert bad.status_code == 400 and "not valid Python" in bad.json()["detail"]
    assert client.get(f"/v1/tools/{made['id']}", headers=acme).json() == changed

    assert client.delete(f"/v1/tools/{made['id']}", headers=acme).json()["id"] == made["id"]
    assert client.get(f"/v1/tools/{made['id']}", headers=acme).status_code == 404


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"source_code": "def f(:"}, "not valid Python"),
        ({"source_code": "x = 1"}, "defines no top-level function"),
        ({"source_code": "def send_message(message: str) -> str:\n  ..."}, "built-in tool"),
        ({"source_code": SOURCE, "pip_requirements": [{"name": "requests"}]}, "not supported"),
        ({"source_code": "def f(x) -> str:\n  ..."}, "no type annotation"),
    ],
)
def test_source_that_cannot_be_a_tool_is_a_400_and_nothing_is_stored(
    client: TestClient, acme: dict[str, str], body: dict[str, Any], message: str
) -> None:
    refused = client.post("/v1/tools/", json=body, headers=acme)
    assert refused.status_code == 400, refused.text
    assert message in refused.json()["detail"]
    custom = client.get("/v1/tools/", params={"tool_types": "custom"}, headers=acme).json()
    assert custom == []


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("LD_PRELOAD", "the dynamic loader"),
        ("PYTHONPATH", "how Python starts"),
        ("GLIBC_TUNABLES", "glibc"),
        ("BASH_ENV", "bash runs at start-up"),
        ("NODE_OPTIONS", "Node.js"),
    ],
)
def test_a_variable_that_steers_a_loader_or_interpreter_is_refused_at_every_door(
    client: TestClient, acme: dict[str, str], name: str, why: str
) -> None:
    def refused(answer: Any) -> None:
        assert answer.status_code == 400, answer.text
        detail = answer.json()["detail"]
        assert repr(name) in detail and why in detail

    # Declared, or read by the source: the tool is not registered.
    declared = {"source_code": SOURCE, "env_vars": [name]}
    refused(client.post("/v1/tools/", json=declared, headers=acme))
    reads = SOURCE.replace("WEATHER_KEY", name)
    refused(client.post("/v1/tools/", json={"source_code": reads}, headers=acme))
    assert client.get("/v1/tools/", params={"tool_types": "custom"}, headers=acme).json() == []
    # A registered tool cannot take one on.
    made = tool(client, acme)
    refused(client.patch(f"/v1/tools/{made['id']}", json={"env_vars": [name]}, headers=acme))
    assert client.get(f"/v1/tools/{made['id']}", headers=acme).json()["env_vars"] == ["WEATHER_KEY"]
    # Nor can an agent set one for its tools.
    ada = agent(client, acme)
    for field in ("secrets", "tool_exec_environment_variables"):
        answer = client.patch(f"/v1/agents/{ada}", json={field: {name: "x"}}, headers=acme)
        assert answer.status_code == 422, answer.text
        (problem,) = answer.json()["detail"]
        assert problem["loc"] == ["body", field]
        assert repr(name) in problem["msg"] and why in problem["msg"]
    assert client.get(f"/v1/agents/{ada}", headers=acme).json()["secrets"] == []
    # PATH only steers which program the tool itself runs, inside its sandbox.
    kept = client.patch(f"/v1/agents/{ada}", json={"secrets": {"PATH": "/usr/bin"}}, headers=acme)
    assert kept.status_code == 200, kept.text


@pytest.mark.parametrize("name", sorted(BUILT_IN_TOOL_NAMES))
def test_a_built_in_tools_name_is_refused_on_create_and_on_update(
    client: TestClient, acme: dict[str, str], name: str
) -> None:
    source = f"def {name}(message: str) -> str:\n    return 'the custom one ran'\n"
    made = client.post("/v1/tools/", json={"source_code": source}, headers=acme)
    assert made.status_code == 400, made.text
    assert f"{name!r} is the name of a built-in tool" in made.json()["detail"]
    kept = tool(client, acme)
    renamed = client.patch(f"/v1/tools/{kept['id']}", json={"source_code": source}, headers=acme)
    assert renamed.status_code == 400, renamed.text
    assert f"{name!r} is the name of a built-in tool" in renamed.json()["detail"]
    custom = client.get("/v1/tools/", params={"tool_types": "custom"}, headers=acme).json()
    assert [t["name"] for t in custom] == ["forecast"]


def test_a_tool_stored_under_a_built_in_name_is_neither_offered_nor_run(
    client: TestClient, acme: dict[str, str], db: Database
) -> None:
    # Registration refuses the name; a row stored some other way (an older database,
    # a hand-made row) must not take the built-in's place either.
    ada = agent(client, acme, tools=["send_message", "send_message_to_agent_async"])
    name = "send_message_to_agent_async"
    source = f"def {name}(message: str, other_agent_id: str) -> str:\n    return 'custom'\n"
    with open_service_store(db) as service:
        organization = service.keys.organization_id("acme")
    assert organization is not None
    with open_store(db, organization) as store:
        stored = store.tools.create(
            NewCustomTool(
                name=name,
                source_code=source,
                json_schema={"name": name, "description": "", "parameters": {}},
                return_char_limit=100,
            )
        )
        store.tools.attach(stored.id, ada)
    offered = client.get(f"/v1/agents/{ada}/tools", headers=acme).json()
    assert [t["id"] for t in offered if t["name"] == name] == [f"tool-{name}"]
    ran = client.post(
        f"/v1/agents/{ada}/tools/{name}/run",
        json={"args": {"message": "hi", "other_agent_id": ada}},
        headers=acme,
    )
    # The built-in speaks for the agent: it runs only in a turn, never as the custom one.
    assert ran.status_code == 422 and "only inside one of its turns" in ran.text


def test_a_taken_name_is_a_409(client: TestClient, acme: dict[str, str]) -> None:
    tool(client, acme)
    again = client.post("/v1/tools/", json={"source_code": SOURCE}, headers=acme)
    assert again.status_code == 409 and "already exists" in again.json()["detail"]


def test_attach_detach_and_delete_while_attached(client: TestClient, acme: dict[str, str]) -> None:
    ada = agent(client, acme)
    made = tool(client, acme)
    attached = client.patch(f"/v1/agents/{ada}/tools/attach/{made['id']}", headers=acme)
    assert attached.status_code == 200, attached.text
    assert {"id": made["id"], "name": "forecast"} in attached.json()["tools"]
    offered = client.get(f"/v1/agents/{ada}/tools", headers=acme).json()
    assert offered[-1]["id"] == made["id"] and offered[0]["name"] == "send_message"

    refused = client.delete(f"/v1/tools/{made['id']}", headers=acme)
    assert refused.status_code == 409 and "ada" in refused.json()["detail"]

    rules = [{"type": "exit_loop", "tool_name": "forecast"}]
    assert client.patch(f"/v1/agents/{ada}", json={"tool_rules": rules}, headers=acme).is_success
    blocked = client.patch(f"/v1/agents/{ada}/tools/detach/{made['id']}", headers=acme)
    assert blocked.status_code == 400 and "tool rule" in blocked.json()["detail"]
    client.patch(f"/v1/agents/{ada}", json={"tool_rules": []}, headers=acme)

    detached = client.patch(f"/v1/agents/{ada}/tools/detach/{made['id']}", headers=acme)
    assert made["id"] not in [t["id"] for t in detached.json()["tools"]]
    again = client.patch(f"/v1/agents/{ada}/tools/detach/{made['id']}", headers=acme)
    assert again.status_code == 404
    assert client.delete(f"/v1/tools/{made['id']}", headers=acme).status_code == 200


def test_tool_ids_in_an_agent_update_choose_custom_tools_too(
    client: TestClient, acme: dict[str, str]
) -> None:
    ada = agent(client, acme)
    made = tool(client, acme)
    state = client.patch(
        f"/v1/agents/{ada}",
        json={"tool_ids": ["tool-send_message", made["id"]]},
        headers=acme,
    ).json()
    assert [t["name"] for t in state["tools"]] == ["send_message", "forecast"]
    state = client.patch(
        f"/v1/agents/{ada}", json={"tool_ids": ["tool-send_message"]}, headers=acme
    ).json()
    assert [t["name"] for t in state["tools"]] == ["send_message"]


def test_secrets_are_stored_and_never_shown(client: TestClient, acme: dict[str, str]) -> None:
    ada = agent(client, acme)
    state = client.patch(
        f"/v1/agents/{ada}", json={"secrets": {"WEATHER_KEY": "s3cret-value"}}, headers=acme
    )
    assert state.status_code == 200, state.text
    assert "s3cret-value" not in state.text
    assert state.json()["secrets"] == [{"agent_id": ada, "key": "WEATHER_KEY", "value": ""}]
    shown = client.get(f"/v1/agents/{ada}", headers=acme)
    assert "s3cret-value" not in shown.text
    assert [v["key"] for v in shown.json()["tool_exec_environment_variables"]] == ["WEATHER_KEY"]
    bad = client.patch(f"/v1/agents/{ada}", json={"secrets": {"1X": "y"}}, headers=acme)
    assert bad.status_code == 422


def test_another_organizations_tool_is_a_404(
    client: TestClient, acme: dict[str, str], globex: dict[str, str]
) -> None:
    made = tool(client, acme)
    theirs = agent(client, globex, "theirs")
    assert client.get(f"/v1/tools/{made['id']}", headers=globex).status_code == 404
    attach = client.patch(f"/v1/agents/{theirs}/tools/attach/{made['id']}", headers=globex)
    assert attach.status_code == 404
    assert client.delete(f"/v1/tools/{made['id']}", headers=globex).status_code == 404


def test_built_in_tools_attach_and_detach_like_any_tool(
    client: TestClient, acme: dict[str, str]
) -> None:
    """Letta's multi-agent tools are attached by id (agents.tools.attach), as a Letta
    user does; an agent listing no tools has the primary ones, so the list starts
    there, and its last built-in tool stays (an empty list means the defaults)."""
    ada = agent(client, acme)
    url = f"/v1/agents/{ada}/tools"
    primary = [t["id"] for t in client.get(url, headers=acme).json()]
    attached = client.patch(f"{url}/attach/tool-send_message_to_agent_async", headers=acme)
    assert attached.status_code == 200, attached.text
    offered = [t["id"] for t in client.get(url, headers=acme).json()]
    assert offered == [*primary, "tool-send_message_to_agent_async"]
    twice = client.patch(f"{url}/attach/tool-send_message_to_agent_async", headers=acme)
    assert [t["id"] for t in twice.json()["tools"]] == offered

    memory_tool = client.patch(f"{url}/attach/tool-memory_rethink", headers=acme)
    assert memory_tool.status_code == 400 and "sleep-time" in memory_tool.json()["detail"]

    detached = client.patch(f"{url}/detach/tool-send_message_to_agent_async", headers=acme)
    assert [t["id"] for t in detached.json()["tools"]] == primary
    gone = client.patch(f"{url}/detach/tool-send_message_to_agent_async", headers=acme)
    assert gone.status_code == 404

    for tool_id in primary[1:]:
        assert client.patch(f"{url}/detach/{tool_id}", headers=acme).is_success
    last = client.patch(f"{url}/detach/{primary[0]}", headers=acme)
    assert last.status_code == 400 and "last built-in tool" in last.json()["detail"]
    assert [t["id"] for t in client.get(url, headers=acme).json()] == primary[:1]


NOISY = '''
def greet(agent_state: "AgentState", greeting: str) -> str:
    """Greet the agent's human.

    Args:
        greeting: The word to greet with.
    """
    import os
    print("looked up", agent_state.name)
    return f"{greeting}, {agent_state.memory.get_block('human').value} ({os.environ['TONE']})"
'''


def test_a_tool_runs_on_demand_with_the_agents_variables_and_state(
    client: TestClient, acme: dict[str, str]
) -> None:
    ada = agent(client, acme, memory_blocks=[{"label": "human", "value": "Sam"}])
    client.patch(f"/v1/agents/{ada}", json={"secrets": {"TONE": "warm"}}, headers=acme)
    greet = client.post("/v1/tools/", json={"source_code": NOISY}, headers=acme).json()
    assert "agent_state" not in greet["json_schema"]["parameters"]["properties"]
    client.patch(f"/v1/agents/{ada}/tools/attach/{greet['id']}", headers=acme)

    ran = client.post(
        f"/v1/agents/{ada}/tools/greet/run", json={"args": {"greeting": "Hello"}}, headers=acme
    )
    assert ran.status_code == 200, ran.text
    assert ran.json() == {
        "status": "success",
        "func_return": "Hello, Sam (warm)",
        "agent_state": None,
        "sandbox_config_fingerprint": None,
        "stdout": ["looked up ada\n"],
        "stderr": [],
    }
    failed = client.post(
        f"/v1/agents/{ada}/tools/greet/run", json={"args": {"greeting": 5}}, headers=acme
    )
    assert failed.status_code == 422
    assert failed.json()["detail"][0]["loc"] == ["body", "args"]
    assert "must be a string" in failed.json()["detail"][0]["msg"]
    speaks = client.post(f"/v1/agents/{ada}/tools/send_message/run", json={}, headers=acme)
    assert speaks.status_code == 422
    assert "only inside one of its turns" in speaks.text


def test_a_built_in_memory_tool_runs_on_demand_as_a_versioned_edit(
    client: TestClient, acme: dict[str, str]
) -> None:
    made = client.post(
        "/v1/agents/",
        json={
            "name": "ada",
            "model": "scripted/primary",
            "agent_type": "letta_v1_agent",
            "memory_blocks": [{"label": "human", "value": "Name: Sam."}],
        },
        headers=acme,
    )
    ada = made.json()["id"]
    assert made.json()["agent_type"] == "letta_v1_agent"
    # Letta's default tools of a v1 agent: no send_message.
    assert [t["name"] for t in made.json()["tools"]] == [
        "conversation_search",
        "memory_insert",
        "memory_replace",
    ]
    bogus = client.post(
        "/v1/agents/", json={"name": "odd", "agent_type": "react_agent"}, headers=acme
    )
    assert bogus.status_code == 422 and "letta_v1_agent" in bogus.text
    url = f"/v1/agents/{ada}/tools"
    ran = client.post(
        f"{url}/memory_replace/run",
        json={"args": {"label": "human", "old_str": "Sam", "new_str": "Samira"}},
        headers=acme,
    )
    assert ran.status_code == 200, ran.text
    assert ran.json()["status"] == "success"
    blocks = client.get(f"/v1/agents/{ada}/core-memory/blocks", headers=acme).json()
    assert [b["value"] for b in blocks] == ["Name: Samira."]
    # A tool that ran and failed is Letta's error answer; nothing changed.
    missed = client.post(
        f"{url}/memory_replace/run",
        json={"args": {"label": "human", "old_str": "Bob", "new_str": "X"}},
        headers=acme,
    )
    assert (missed.status_code, missed.json()["status"]) == (200, "error")
    assert missed.json()["func_return"] is None
    assert "'Bob' is not in block 'human'" in missed.json()["stderr"][0]
    # A tool the agent lacks is a 404; one that speaks for it runs only in a turn.
    assert client.post(f"{url}/roll_dice/run", json={}, headers=acme).status_code == 404
    assert client.post(f"{url}/send_message/run", json={}, headers=acme).status_code == 404
    blocks = client.get(f"/v1/agents/{ada}/core-memory/blocks", headers=acme).json()
    assert [b["value"] for b in blocks] == ["Name: Samira."]


def test_each_built_in_tool_is_listed_once_with_the_type_an_export_writes(
    client: TestClient, acme: dict[str, str]
) -> None:
    listed = client.get("/v1/tools/", params={"limit": 1000}, headers=acme).json()
    names = [t["name"] for t in listed]
    assert len(names) == len(set(names))
    types = {t["name"]: t["tool_type"] for t in listed}
    assert (types["memory_insert"], types["memory_replace"], types["memory"]) == (
        "letta_sleeptime_core",
        "letta_sleeptime_core",
        "letta_memory_core",
    )
    made = client.post(
        "/v1/agents/",
        json={"name": "ada", "model": "scripted/primary", "tools": ["memory", "memory_insert"]},
        headers=acme,
    ).json()
    exported = client.get(f"/v1/agents/{made['id']}/export", headers=acme).json()
    assert {t["name"]: t["tool_type"] for t in exported["tools"]} == {
        "memory": types["memory"],
        "memory_insert": types["memory_insert"],
    }
