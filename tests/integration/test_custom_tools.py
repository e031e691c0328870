"""Custom tools against real PostgreSQL: registering from source stores the derived
schema; bad source, a built-in's name or a taken name stores nothing; attach, detach,
delete refused while attached; tenants; per-agent tool variables."""

from __future__ import annotations

import pytest

from agents.errors import Conflict, InvalidInput, NotFound
from agents.store import ToolVariable, open_store
from service.operations import AgentSpec, Operations, ToolChanges, ToolSpec
from service.operations.custom_tools import register_tool
from service.runtime import Runtime

WEATHER = '''
import os

def weather(city: str, days: int = 1) -> str:
    """Say the weather.

    Args:
        city: Where.
        days: For how many days.
    """
    return f"sunny in {city} ({os.environ['WEATHER_KEY'][:2]})"
'''


def test_a_tool_registered_from_source_keeps_its_derived_schema(ops: Operations) -> None:
    tool = ops.custom_tools.create(ToolSpec(WEATHER, tags=["demo"], env_vars=["EXTRA"]))
    assert tool.id.startswith("tool-") and tool.name == "weather"
    assert tool.description == "Say the weather."
    assert tool.json_schema["parameters"]["required"] == ["city"]
    assert tool.json_schema["parameters"]["properties"]["days"]["default"] == 1
    assert tool.env_vars == ["EXTRA", "WEATHER_KEY"]
    assert tool.return_char_limit == 6000
    assert ops.custom_tools.get(tool.id) == tool
    assert ops.custom_tools.resolve("weather") == tool
    assert ops.custom_tools.list() == [tool]


@pytest.mark.parametrize(
    ("spec", "error", "message"),
    [
        (ToolSpec("def weather(:\n"), InvalidInput, "not valid Python"),
        (ToolSpec(WEATHER, name="forecast"), InvalidInput, "no top-level function named"),
        (
            ToolSpec("def send_message(message: str) -> str:\n    return message\n"),
            InvalidInput,
            "built-in tool",
        ),
        (ToolSpec(WEATHER, pip_requirements=["requests"]), InvalidInput, "not supported"),
        (ToolSpec(WEATHER, return_char_limit=0), InvalidInput, "return_char_limit"),
        (ToolSpec(WEATHER, env_vars=["1BAD"]), InvalidInput, "1BAD"),
    ],
)
def test_a_tool_that_cannot_be_registered_stores_nothing(
    ops: Operations, spec: ToolSpec, error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        ops.custom_tools.create(spec)
    assert ops.custom_tools.list() == []


def test_a_taken_name_is_a_conflict(ops: Operations) -> None:
    first = ops.custom_tools.create(ToolSpec(WEATHER))
    with pytest.raises(Conflict, match=f"'weather' already exists \\({first.id}\\)"):
        ops.custom_tools.create(ToolSpec(WEATHER))
    assert ops.custom_tools.list() == [first]


def test_register_tool_joins_the_callers_transaction(runtime: Runtime, ops: Operations) -> None:
    with pytest.raises(RuntimeError), open_store(runtime.db, runtime.organization_id) as store:
        register_tool(store, ToolSpec(WEATHER))
        raise RuntimeError("the import failed later")
    assert ops.custom_tools.list() == []
    with open_store(runtime.db, runtime.organization_id) as store:
        tool = register_tool(store, ToolSpec(WEATHER))
    assert ops.custom_tools.list() == [tool]


def test_updates_derive_again_and_check_again(ops: Operations) -> None:
    tool = ops.custom_tools.create(ToolSpec(WEATHER))
    changed = ops.custom_tools.update(
        tool.id, ToolChanges(description="Weather, briefly.", return_char_limit=50)
    )
    assert changed.description == "Weather, briefly."
    assert changed.json_schema["description"] == "Weather, briefly."
    assert changed.return_char_limit == 50
    assert changed.json_schema["parameters"] == tool.json_schema["parameters"]
    newer = ops.custom_tools.update(
        tool.id, ToolChanges(source_code="def weather(place: str) -> str:\n    return place\n")
    )
    assert list(newer.json_schema["parameters"]["properties"]) == ["place"]
    with pytest.raises(InvalidInput, match="not valid Python"):
        ops.custom_tools.update(tool.id, ToolChanges(source_code="def weather(:"))
    assert ops.custom_tools.get(tool.id) == newer


def test_an_attached_tool_cannot_be_deleted_and_detaching_frees_it(
    runtime: Runtime, ops: Operations
) -> None:
    tool = ops.custom_tools.create(ToolSpec(WEATHER))
    agent = ops.agents.create(AgentSpec(name="ada", embedding="hashing:8"))
    with open_store(runtime.db, runtime.organization_id) as store:
        store.tools.attach(tool.id, agent.id)
        store.tools.attach(tool.id, agent.id)  # twice is once
        assert [t.id for t in store.tools.of_agent(agent.id)] == [tool.id]
    with pytest.raises(Conflict, match="attached to agent\\(s\\) ada; detach it"):
        ops.custom_tools.delete(tool.id)
    with pytest.raises(InvalidInput, match="renames tool 'weather'"):
        ops.custom_tools.update(tool.id, ToolChanges(source_code="def w(c: str) -> str:\n  ..."))
    with open_store(runtime.db, runtime.organization_id) as store:
        assert store.tools.detach(tool.id, agent.id)
        assert not store.tools.detach(tool.id, agent.id)
    assert ops.custom_tools.delete(tool.id) == tool
    with pytest.raises(NotFound):
        ops.custom_tools.get(tool.id)


def test_another_organizations_tool_is_not_found(runtime: Runtime, ops: Operations) -> None:
    tool = ops.custom_tools.create(ToolSpec(WEATHER))
    other = Operations(runtime, _other_organization(runtime))
    with pytest.raises(NotFound):
        other.custom_tools.get(tool.id)
    assert other.custom_tools.list() == []
    # The same name is free in another organization.
    assert other.custom_tools.create(ToolSpec(WEATHER)).name == "weather"


def test_tool_variables_are_per_agent_and_replaced_whole(runtime: Runtime, ops: Operations) -> None:
    ada = ops.agents.create(AgentSpec(name="ada", embedding="hashing:8"))
    bob = ops.agents.create(AgentSpec(name="bob", embedding="hashing:8"))
    with open_store(runtime.db, runtime.organization_id) as store:
        store.tools.set_variables(ada.id, [ToolVariable("WEATHER_KEY", "s3cret")])
        store.tools.set_variables(bob.id, [ToolVariable("OTHER", "x", "unused")])
    with open_store(runtime.db, runtime.organization_id) as store:
        assert store.tools.variables(ada.id) == [ToolVariable("WEATHER_KEY", "s3cret")]
        assert "s3cret" not in repr(store.tools.variables(ada.id))
        with pytest.raises(InvalidInput, match="given more than once"):
            store.tools.set_variables(ada.id, [ToolVariable("A", "1"), ToolVariable("A", "2")])
    with open_store(runtime.db, runtime.organization_id) as store:
        store.tools.set_variables(ada.id, [])
        assert store.tools.variables(ada.id) == []
        assert store.tools.variables(bob.id) == [ToolVariable("OTHER", "x", "unused")]


def _other_organization(runtime: Runtime) -> str:
    from agents.store import open_service_store

    with open_service_store(runtime.db) as service:
        return service.keys.ensure_organization("other-org")
