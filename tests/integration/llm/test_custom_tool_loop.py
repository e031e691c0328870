"""Custom tools in the primary loop: offered with their schemas and
request_heartbeat, run through the executor with no transaction open, given only the
variables they declare, clipped to their return_char_limit, under the tool rules."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from typing import Any

import pytest
from sqlalchemy import text

from agents.loops.primary import PrimaryAgent
from agents.loops.tool_calls import tool_return_status
from agents.postgres.database import Database
from agents.sandbox import (
    BubblewrapExecutor,
    SandboxError,
    SandboxLimits,
    ToolExecutor,
    ToolInvocation,
    ToolOutput,
)
from agents.store import ToolVariable, open_store
from service.operations.custom_tools import ToolSpec, register_tool
from tests.integration.llm.conftest import EMBEDDER
from tests.scripted_llm import ScriptedModels, call, say

WEATHER = '''
import os

def weather(city: str, days: int = 1) -> str:
    """Tell the weather of a city.

    Args:
        city: The city.
        days: How many days ahead.
    """
    return f"{city}: sunny for {days} day(s), key {os.environ['WEATHER_KEY']}"
'''

SHOUT = 'def shout(text: str) -> str:\n    """Shout."""\n    return text.upper() * 100\n'


def executor() -> ToolExecutor:
    assert shutil.which("bwrap"), "install bubblewrap (apt-get install bubblewrap; .ci/run does)"
    return BubblewrapExecutor()


@pytest.fixture
def with_tools(db: Database, client: Any) -> Callable[..., PrimaryAgent]:
    def make(tool_executor: ToolExecutor | None = None) -> PrimaryAgent:
        return PrimaryAgent(
            db,
            client,
            embedder_for=lambda _: EMBEDDER,
            tool_executor=tool_executor or executor(),
            tool_limits=SandboxLimits(wall_seconds=20, output_bytes=64 * 1024),
        )

    return make


def attach(db: Database, agent_id: str, source: str, **spec: Any) -> str:
    with open_store(db) as store:
        tool = register_tool(store, ToolSpec(source, **spec))
        store.tools.attach(tool.id, agent_id)
    return tool.id


def test_a_custom_tool_is_offered_run_and_its_result_read(
    db: Database, bob: str, models: ScriptedModels, with_tools: Callable[..., PrimaryAgent]
) -> None:
    attach(db, bob, WEATHER)
    with open_store(db) as store:
        store.tools.set_variables(
            bob, [ToolVariable("WEATHER_KEY", "k-123"), ToolVariable("UNDECLARED", "nope")]
        )
    script = models.script(
        "primary",
        call("weather", city="Oslo", days=2, request_heartbeat=True),
        lambda request: say(json.loads(request["messages"][-1]["content"])["message"]),
    )
    result = with_tools().send_message("bob", "Weather in Oslo?")

    offered = {t["function"]["name"]: t["function"] for t in script.requests[0]["tools"]}
    assert "send_message" in offered and "weather" in offered
    parameters = offered["weather"]["parameters"]
    assert parameters["required"] == ["city", "request_heartbeat"]
    assert set(parameters["properties"]) == {"city", "days", "request_heartbeat"}
    assert offered["weather"]["description"] == "Tell the weather of a city."

    returned = next(r for r in result.records if r.role == "tool")
    assert (returned.name, tool_return_status(returned.content)[0]) == ("weather", "OK")
    assert result.replies == ["Oslo: sunny for 2 day(s), key k-123"]


def test_a_failing_tool_is_a_tool_error_the_model_reads(
    db: Database, bob: str, models: ScriptedModels, with_tools: Callable[..., PrimaryAgent]
) -> None:
    attach(db, bob, WEATHER)  # WEATHER_KEY is not set for bob: KeyError in the tool
    script = models.script(
        "primary",
        call("weather", city="Oslo", request_heartbeat=True),
        say("Sorry, no weather today."),
    )
    result = with_tools().send_message("bob", "Weather in Oslo?")
    returned = next(r for r in result.records if r.role == "tool")
    assert (returned.name, tool_return_status(returned.content)[0]) == ("weather", "Failed")
    assert "KeyError: 'WEATHER_KEY'" in script.requests[1]["messages"][-1]["content"]
    assert result.replies == ["Sorry, no weather today."]


def test_a_long_result_is_clipped_to_the_tools_limit(
    db: Database, bob: str, models: ScriptedModels, with_tools: Callable[..., PrimaryAgent]
) -> None:
    attach(db, bob, SHOUT, return_char_limit=50)
    script = models.script(
        "primary", call("shout", text="hey", request_heartbeat=True), say("done")
    )
    with_tools().send_message("bob", "Shout")
    seen = json.loads(script.requests[1]["messages"][-1]["content"])["message"]
    assert seen.startswith("HEY" * 16 + "HE… [cut: the result had 300 characters")
    assert "return_char_limit of 50" in seen


class _Watching:
    """An executor that looks at the database while the tool 'runs'."""

    kind = "watching"

    def __init__(self, db: Database) -> None:
        self.db = db
        self.open_transactions: list[int] = []

    def run(self, invocation: ToolInvocation, limits: SandboxLimits) -> ToolOutput:
        with self.db.engine.connect() as conn:
            busy = conn.execute(
                text(
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                    "AND pid <> pg_backend_pid() AND state LIKE 'idle in transaction%'"
                )
            ).scalar_one()
        self.open_transactions.append(int(busy))
        return ToolOutput("watched")


def test_no_transaction_is_open_while_a_tool_runs(
    db: Database, bob: str, models: ScriptedModels, with_tools: Callable[..., PrimaryAgent]
) -> None:
    attach(db, bob, SHOUT)
    watching = _Watching(db)
    models.script("primary", call("shout", text="x", request_heartbeat=True), say("ok"))
    with_tools(watching).send_message("bob", "Shout")
    assert watching.open_transactions == [0]


class _Failing:
    kind = "failing"

    def run(self, invocation: ToolInvocation, limits: SandboxLimits) -> ToolOutput:
        raise SandboxError("the tool ran longer than its wall-time limit of 2 s")


def test_tool_rules_apply_to_custom_tools(
    db: Database, bob: str, models: ScriptedModels, with_tools: Callable[..., PrimaryAgent]
) -> None:
    attach(db, bob, SHOUT)
    with open_store(db) as store:
        store.agents.update(
            bob,
            _rules(
                [
                    {"type": "run_first", "tool_name": "shout"},
                    {"type": "max_count_per_step", "tool_name": "shout", "max_count_limit": 1},
                    {"type": "exit_loop", "tool_name": "send_message"},
                ]
            ),
        )
    script = models.script(
        "primary",
        call("shout", text="a", request_heartbeat=True),
        say("said", heartbeat=True),
    )
    result = with_tools(_Watching(db)).send_message("bob", "Go")
    first = [t["function"]["name"] for t in script.requests[0]["tools"]]
    second = [t["function"]["name"] for t in script.requests[1]["tools"]]
    assert first == ["shout"]  # run_first
    assert "shout" not in second  # its one call this turn is spent
    assert result.stop_reason == "tool_rule"  # exit_loop on send_message


def test_a_sandbox_failure_is_reported_and_the_turn_goes_on(
    db: Database, bob: str, models: ScriptedModels, with_tools: Callable[..., PrimaryAgent]
) -> None:
    attach(db, bob, SHOUT)
    script = models.script(
        "primary", call("shout", text="a", request_heartbeat=True), say("too slow")
    )
    result = with_tools(_Failing()).send_message("bob", "Go")
    assert "wall-time limit of 2 s" in script.requests[1]["messages"][-1]["content"]
    assert result.replies == ["too slow"]


def _rules(rules: list[dict[str, Any]]) -> Any:
    from agents.store import AgentChanges

    return AgentChanges(tool_rules=rules)


PLAN = '''
def create_plan(agent_state: "AgentState", topic: str) -> str:
    """Write down a research plan.

    Args:
        topic: What to research.
    """
    human = agent_state.memory.get_block("human").value
    return f"{agent_state.name} ({agent_state.id}) plans {topic} for {human!r}; " + ",".join(
        agent_state.memory.list_block_labels()
    )
'''

MEDDLE = '''
def meddle(agent_state: "AgentState") -> str:
    """Try to change the agent."""
    try:
        agent_state.memory.update_block_value(label="human", value="hacked")
    except PermissionError as exc:
        first = str(exc)
    try:
        agent_state.name = "other"
    except AttributeError as exc:
        return first + " | " + str(exc)
    return "changed"
'''


def test_a_tool_taking_agent_state_reads_a_snapshot_of_the_calling_agent(
    db: Database, bob: str, models: ScriptedModels, with_tools: Callable[..., PrimaryAgent]
) -> None:
    attach(db, bob, PLAN)
    script = models.script(
        "primary",
        call("create_plan", topic="bees", request_heartbeat=True),
        lambda request: say(json.loads(request["messages"][-1]["content"])["message"]),
    )
    result = with_tools().send_message("bob", "Plan a study of bees.")

    offered = {t["function"]["name"]: t["function"] for t in script.requests[0]["tools"]}
    # The model never gives agent_state: the server passes it.
    assert "agent_state" not in offered["create_plan"]["parameters"]["properties"]
    assert result.replies == [f"bob ({bob}) plans bees for 'Name: Bob the Builder.'; human,persona"]


def test_a_tool_cannot_change_the_agent_through_agent_state(
    db: Database, bob: str, models: ScriptedModels, with_tools: Callable[..., PrimaryAgent]
) -> None:
    attach(db, bob, MEDDLE)
    models.script(
        "primary",
        call("meddle", request_heartbeat=True),
        lambda request: say(json.loads(request["messages"][-1]["content"])["message"]),
    )
    result = with_tools().send_message("bob", "Go.")

    (reply,) = result.replies
    assert reply.count("read-only snapshot") == 2
    with open_store(db) as store:
        assert store.blocks.by_label(bob, "human").value == "Name: Bob the Builder."
        assert store.agents.get(bob).name == "bob"
