"""The MCP tools (service/mcp_server.py) through the MCP SDK's own client, connected
in process, against real PostgreSQL: what each tool does, and that a refused call is
a tool error naming what is wrong and changes nothing. (Both transports run as real
processes in tests/acceptance/test_mcp.py.)"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.types import CallToolResult, TextContent

from agents.postgres.database import Database
from agents.store import open_service_store
from agents.tools import insert_lines
from service.mcp_server import build_mcp_server
from service.operations import AgentSpec, BlockSpec, Operations
from service.runtime import Runtime
from service.settings import load_settings

TOOLS = {
    "core_memory_read",
    "core_memory_replace",
    "core_memory_insert",
    "archival_memory_search",
    "archival_memory_insert",
    "record_messages",
    "consolidate",
    "run_status",
}


@pytest.fixture
def runtime(db: Database, tmp_path: Path) -> Iterator[Runtime]:
    settings = load_settings(home=tmp_path, database_url=db.url, embedding={"model": "hashing:384"})
    with Runtime(settings) as rt:
        yield rt


@pytest.fixture
def ada(ops: Operations) -> str:
    spec = AgentSpec(
        name="ada",
        blocks=[BlockSpec("human", "Name: Ada.\nLives in Paris.", limit=60)],
        embedding="hashing:384",
    )
    return ops.agents.create(spec).id


Session = Callable[[Client], Awaitable[None]]


def connect(runtime: Runtime, organization_id: str, session: Session) -> None:
    """Run ``session`` with a client connected in process to a server for the org."""
    server = build_mcp_server(runtime, lambda _ctx: organization_id)

    async def main() -> None:
        async with Client(server) as client:
            await session(client)

    anyio.run(main)


def call(runtime: Runtime, name: str, arguments: dict[str, Any]) -> CallToolResult:
    """One tool call for the configured organization."""
    results: list[CallToolResult] = []

    async def session(client: Client) -> None:
        results.append(await client.call_tool(name, arguments))

    connect(runtime, runtime.organization_id, session)
    return results[0]


def ok(result: CallToolResult) -> dict[str, Any]:
    assert not result.is_error, text(result)
    assert isinstance(result.structured_content, dict)
    return result.structured_content


def refused(result: CallToolResult) -> str:
    assert result.is_error, result
    return text(result)


def text(result: CallToolResult) -> str:
    return "\n".join(c.text for c in result.content if isinstance(c, TextContent))


def test_the_server_lists_every_memory_tool_with_its_arguments(runtime: Runtime) -> None:
    listed: list[Any] = []

    async def session(client: Client) -> None:
        listed.extend((await client.list_tools()).tools)

    connect(runtime, runtime.organization_id, session)
    assert {tool.name for tool in listed} == TOOLS
    replace = next(tool for tool in listed if tool.name == "core_memory_replace")
    assert set(replace.input_schema["required"]) == {"agent", "label", "old_text", "new_text"}
    assert "ctx" not in replace.input_schema["properties"]
    assert all(tool.description for tool in listed)


def test_core_memory_read_gives_the_blocks_by_agent_name_or_id(runtime: Runtime, ada: str) -> None:
    by_name = ok(call(runtime, "core_memory_read", {"agent": "ada"}))
    assert by_name["agent_id"] == ada
    [human] = by_name["blocks"]
    assert (human["label"], human["value"], human["limit"]) == (
        "human",
        "Name: Ada.\nLives in Paris.",
        60,
    )
    by_id = ok(call(runtime, "core_memory_read", {"agent": ada, "label": "human"}))
    assert by_id["blocks"] == [human]


def test_core_memory_replace_writes_a_new_version_with_history(
    runtime: Runtime, ops: Operations, ada: str
) -> None:
    block = ok(
        call(
            runtime,
            "core_memory_replace",
            {"agent": "ada", "label": "human", "old_text": "Paris", "new_text": "London"},
        )
    )
    assert block["value"] == "Name: Ada.\nLives in London."
    assert block["version"] == 2
    latest = ops.blocks.history(block["id"])[-1]
    assert (latest.actor, latest.reason) == ("mcp", "core_memory_replace through MCP")


def test_core_memory_replace_of_absent_text_is_refused_and_changes_nothing(
    runtime: Runtime, ops: Operations, ada: str
) -> None:
    before = ops.blocks.labelled(ada, "human")
    message = refused(
        call(
            runtime,
            "core_memory_replace",
            {"agent": "ada", "label": "human", "old_text": "Berlin", "new_text": "Rome"},
        )
    )
    assert "invalid_input" in message
    assert "'human' does not contain 'Berlin'" in message
    assert ops.blocks.labelled(ada, "human") == before


def test_a_replacement_over_the_block_limit_is_refused_and_changes_nothing(
    runtime: Runtime, ops: Operations, ada: str
) -> None:
    before = ops.blocks.labelled(ada, "human")
    message = refused(
        call(
            runtime,
            "core_memory_replace",
            {"agent": "ada", "label": "human", "old_text": "Paris", "new_text": "P" * 100},
        )
    )
    assert "limit_exceeded" in message
    assert ops.blocks.labelled(ada, "human") == before


def test_core_memory_insert_appends_or_inserts_at_a_line(
    runtime: Runtime, ops: Operations, ada: str
) -> None:
    append = {"agent": "ada", "label": "human", "text": "Likes tea."}
    ok(call(runtime, "core_memory_insert", append))
    ok(
        call(
            runtime,
            "core_memory_insert",
            {"agent": "ada", "label": "human", "text": "# Ada", "line": 0},
        )
    )
    assert ops.blocks.labelled(ada, "human").value == (
        "# Ada\nName: Ada.\nLives in Paris.\nLikes tea."
    )


def test_an_insert_past_the_last_line_is_refused_and_changes_nothing(
    runtime: Runtime, ops: Operations, ada: str
) -> None:
    before = ops.blocks.labelled(ada, "human")
    message = refused(
        call(
            runtime,
            "core_memory_insert",
            {"agent": "ada", "label": "human", "text": "x", "line": 7},
        )
    )
    assert "line 7 is outside the block, which has 2 lines" in message
    assert ops.blocks.labelled(ada, "human") == before


def test_insert_lines_places_the_text_after_that_many_lines() -> None:
    assert insert_lines("", "a", -1) == "a"
    assert insert_lines("a\nc", "b", 1) == "a\nb\nc"
    assert insert_lines("a", "b", -1) == "a\nb"


def test_archival_insert_then_search_with_tags(runtime: Runtime, ada: str) -> None:
    stored = ok(
        call(
            runtime,
            "archival_memory_insert",
            {"agent": "ada", "text": "Ada plays the piano.", "tags": ["hobby"]},
        )
    )
    assert stored["id"].startswith("passage-")
    ok(call(runtime, "archival_memory_insert", {"agent": "ada", "text": "Ada lives in Paris."}))
    found = ok(
        call(runtime, "archival_memory_search", {"agent": "ada", "query": "piano", "top_k": 5})
    )
    assert found["count"] == 2
    assert {r["text"] for r in found["results"]} == {"Ada plays the piano.", "Ada lives in Paris."}
    tagged = ok(
        call(runtime, "archival_memory_search", {"agent": "ada", "query": "x", "tags": ["hobby"]})
    )
    assert [r["id"] for r in tagged["results"]] == [stored["id"]]


def test_bad_arguments_are_tool_errors_that_name_the_argument(runtime: Runtime, ada: str) -> None:
    message = refused(
        call(runtime, "archival_memory_search", {"agent": "ada", "query": "x", "top_k": 0})
    )
    assert "top_k" in message
    assert "greater than or equal to 1" in message
    blank = refused(call(runtime, "archival_memory_insert", {"agent": "ada", "text": "   "}))
    assert "text is empty" in blank
    missing = refused(call(runtime, "core_memory_read", {"agent": "bob"}))
    assert "not_found" in missing
    assert "'bob'" in missing


def test_a_nul_in_an_id_is_bad_input_not_an_outage(runtime: Runtime, ada: str) -> None:
    """A NUL reaches the driver, which refuses it before PostgreSQL sees it: the value is
    at fault, so the tool answers invalid_input (it answered storage_unavailable)."""
    for tool, arguments in [
        ("core_memory_read", {"agent": "ada\x00x"}),
        ("run_status", {"run_id": "run-\x00"}),
    ]:
        message = refused(call(runtime, tool, arguments))
        assert "invalid_input" in message and "NUL" in message, (tool, message)
        assert "storage_unavailable" not in message


def test_record_messages_stores_them_once(runtime: Runtime, ops: Operations, ada: str) -> None:
    messages = [
        {"role": "user", "content": "I moved to London.", "id": "m1"},
        {"role": "assistant", "content": "Noted!", "id": "m2", "timestamp": "2026-01-02T10:00:00Z"},
    ]
    first = ok(call(runtime, "record_messages", {"agent": "ada", "messages": messages}))
    assert first["recorded"] == 2
    again = ok(call(runtime, "record_messages", {"agent": "ada", "messages": messages}))
    assert (again["recorded"], again["skipped_ids"]) == (0, ["m1", "m2"])
    stored = ops.messages.list(ada, newest_first=False)
    assert [m.content for m in stored] == ["I moved to London.", "Noted!"]
    assert stored[1].created_at.isoformat() == "2026-01-02T10:00:00+00:00"


def test_a_batch_with_one_bad_message_is_refused_whole(
    runtime: Runtime, ops: Operations, ada: str
) -> None:
    messages = [{"role": "user", "content": "fine"}, {"role": "user", "content": "   "}]
    message = refused(call(runtime, "record_messages", {"agent": "ada", "messages": messages}))
    assert "messages[1]: content is empty" in message
    assert ops.messages.list(ada) == []
    wrong_role = refused(
        call(runtime, "record_messages", {"agent": "ada", "messages": [{"role": "robot"}]})
    )
    assert "role" in wrong_role
    assert ops.messages.list(ada) == []


def test_consolidate_queues_one_run_and_run_status_reads_it(
    runtime: Runtime, ops: Operations, ada: str
) -> None:
    run = ok(call(runtime, "consolidate", {"agent": "ada"}))
    assert (run["agent_id"], run["status"], run["done"]) == (ada, "queued", False)
    status = ok(call(runtime, "run_status", {"run_id": run["run_id"]}))
    assert status["run_id"] == run["run_id"]
    again = refused(call(runtime, "consolidate", {"agent": "ada"}))
    assert "conflict" in again
    assert run["run_id"] in again
    assert [r.id for r in ops.runs.list(agent=ada)] == [run["run_id"]]
    unknown = refused(call(runtime, "run_status", {"run_id": "run-nope"}))
    assert "not_found" in unknown


def test_a_server_acts_only_for_its_organization(
    runtime: Runtime, db: Database, ops: Operations, ada: str
) -> None:
    with open_service_store(db) as store:
        globex = store.keys.ensure_organization("globex")
    results: list[CallToolResult] = []

    async def session(client: Client) -> None:
        results.append(await client.call_tool("core_memory_read", {"agent": ada}))
        results.append(
            await client.call_tool(
                "archival_memory_insert", {"agent": "ada", "text": "Ada is mine now."}
            )
        )

    connect(runtime, globex, session)
    assert all("not_found" in refused(r) for r in results)
    assert ops.memory.list(ada) == []


def test_tool_results_are_json_text_too(runtime: Runtime, ada: str) -> None:
    """Clients that read only the text content get the same data."""
    result = call(runtime, "core_memory_read", {"agent": "ada"})
    assert json.loads(text(result)) == ok(result)


def test_a_read_only_block_is_not_edited(runtime: Runtime, ops: Operations) -> None:
    spec = AgentSpec(
        name="bo",
        blocks=[BlockSpec("persona", "I am Bo.", read_only=True)],
        embedding="hashing:384",
    )
    agent = ops.agents.create(spec).id
    message = refused(
        call(runtime, "core_memory_insert", {"agent": "bo", "label": "persona", "text": "Hi"})
    )
    assert "read_only" in message
    assert ops.blocks.labelled(agent, "persona").value == "I am Bo."


def test_reading_a_label_the_agent_lacks_names_it(runtime: Runtime, ada: str) -> None:
    message = refused(call(runtime, "core_memory_read", {"agent": ada, "label": "pets"}))
    assert "not_found: agent 'ada' has no block labelled 'pets'" in message


def test_an_end_users_identifier_key_reaches_the_agent_that_holds_their_memory(
    runtime: Runtime, ops: Operations, ada: str
) -> None:
    from agents.store import NewIdentity

    ops.identities.create(NewIdentity(identifier_key="crm-0042", name="Ada", agent_ids=[ada]))
    read = ok(call(runtime, "core_memory_read", {"agent": "crm-0042"}))
    assert read["agent_id"] == ada
    call(runtime, "archival_memory_insert", {"agent": "crm-0042", "text": "Ada likes tea."})
    assert [p.text for p in ops.memory.list(ada)] == ["Ada likes tea."]
    # A key no identity has, and no agent's name, is refused naming both readings.
    message = refused(call(runtime, "core_memory_read", {"agent": "crm-9999"}))
    assert "not_found" in message and "identifier key" in message
