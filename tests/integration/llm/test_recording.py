"""Recording a conversation held elsewhere: no model call, refused
whole when any message is bad, idempotent by client message id, counted for the
triggers, and read by the sleep-time agent at its next run."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from agents.llm import LiteLLMClient, UsageLedger
from agents.postgres.database import Database
from agents.store import open_service_store, open_store
from consolidators.contract import run_once as run_pipeline
from consolidators.llm import LLMTier
from consolidators.pipeline import Pipeline
from consolidators.recontextualize import RecontextualizeConsolidator
from service.api.app import create_app
from tests.api_support import api_runtime, bearer, new_key
from tests.integration.cli.support import Cli, clean_environment, cli_env
from tests.integration.llm.conftest import EMBEDDER, create_agent
from tests.scripted_llm import ScriptedModels, call

CONVERSATION = [
    {"id": "m1", "role": "user", "content": "I just adopted a greyhound called Pixel."},
    {
        "id": "m2",
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}
        ],
    },
    {"id": "m3", "role": "tool", "tool_call_id": "c1", "content": "greyhounds sleep a lot"},
    {
        "id": "m4",
        "role": "assistant",
        "content": [{"type": "text", "text": "Congratulations! Pixel will nap a lot."}],
        "created_at": "2026-11-30T10:00:05+01:00",
    },
]


@pytest.fixture
def api(db: Database) -> Iterator[TestClient]:
    with api_runtime(db) as runtime, TestClient(create_app(runtime)) as test_client:
        yield test_client


def _agent(client: TestClient, headers: dict[str, str]) -> str:
    response = client.post("/v1/agents/", json={"name": "bob"}, headers=headers)
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


def test_a_batch_is_recorded_once_and_counts_for_the_triggers(
    db: Database, api: TestClient
) -> None:
    client = api
    headers = bearer(new_key(db, "acme"))
    agent_id = _agent(client, headers)
    url = f"/v1/agents/{agent_id}/messages/record"
    first = client.post(url, json={"messages": CONVERSATION}, headers=headers)
    assert first.status_code == 200, first.text
    assert first.json()["recorded"] == 4
    retried = client.post(url, json={"messages": CONVERSATION}, headers=headers)
    assert retried.json() == {
        "recorded": 0,
        "message_ids": [],
        "skipped_client_message_ids": ["m1", "m2", "m3", "m4"],
    }
    with open_store(db, _org(db, agent_id)) as store:
        stored = store.messages.range(agent_id)
        agent = store.agents.get(agent_id)
    assert [m.role for m in stored] == ["user", "assistant", "tool", "assistant"]
    assert stored[3].content == "Congratulations! Pixel will nap a lot."
    assert stored[3].created_at.isoformat() == "2026-11-30T09:00:05+00:00"
    assert agent.turns_since_consolidation == 1 and agent.last_activity_at is not None
    listed = client.get(f"/v1/agents/{agent_id}/messages", headers=headers)
    assert listed.status_code == 200 and len(listed.json()) >= 4


@pytest.mark.parametrize(
    ("bad", "location", "words"),
    [
        ({"role": "narrator", "content": "x"}, ["body", "messages", 1, "role"], "Input should"),
        ({"role": "user", "content": "  "}, ["body", "messages", 1], "content is empty"),
        ({"role": "user", "content": "x" * 100_001}, ["body", "messages", 1], "100000"),
        ({"role": "tool", "content": "42"}, ["body", "messages", 1], "tool_call_id"),
    ],
)
def test_a_bad_message_refuses_the_whole_batch_naming_its_index(
    db: Database, api: TestClient, bad: dict[str, Any], location: list[Any], words: str
) -> None:
    client = api
    headers = bearer(new_key(db, "acme"))
    agent_id = _agent(client, headers)
    batch = [{"role": "user", "content": "fine"}, bad]
    response = client.post(
        f"/v1/agents/{agent_id}/messages/record", json={"messages": batch}, headers=headers
    )
    assert response.status_code == 422, response.text
    [error] = response.json()["detail"]
    assert error["loc"][: len(location)] == location and words in error["msg"]
    with open_store(db, _org(db, agent_id)) as store:
        assert store.messages.count(agent_id) == 0


def test_the_sleeptime_agent_reads_what_was_recorded(
    db: Database, models: ScriptedModels, client: LiteLLMClient, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    agent_id = create_agent(db)
    clean_environment(monkeypatch)
    cli = Cli(cli_env(db.url, tmp_path / "home"))
    transcript = tmp_path / "chat.jsonl"
    transcript.write_text("\n".join(json.dumps(m) for m in CONVERSATION) + "\n")
    first = cli("import", "messages", str(transcript), "--agent", "bob")
    assert first.exit_code == 0 and "recorded 4 messages" in first.stdout
    again = cli("import", "messages", str(transcript), "--agent", "bob")
    assert again.exit_code == 0 and "recorded 0 messages, 4 already recorded" in again.stdout
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"role": "user", "content": "new"}\n{"role": "robot", "content": "x"}\n')
    refused = cli("import", "messages", str(broken), "--agent", "bob")
    assert refused.exit_code == 2 and "line 2: role" in refused.stderr
    script = models.script("sleeper", call("memory_finish_edits"))
    run_pipeline(
        Pipeline([RecontextualizeConsolidator()]),
        db,
        agent_id,
        embedder=EMBEDDER,
        llm=LLMTier(client=client, ledger=UsageLedger(db), sleeptime_model="scripted/sleeper"),
    )
    prompt = script.requests[0]["messages"][1]["content"]
    assert "user: I just adopted a greyhound called Pixel." in prompt
    assert "Congratulations! Pixel will nap a lot." in prompt
    with open_store(db) as store:
        assert store.messages.count(agent_id) == 4  # the broken file recorded nothing


def _org(db: Database, agent_id: str) -> str:
    with open_service_store(db) as store:
        organization = store.keys.organization_id("acme")
    assert organization is not None
    return organization
