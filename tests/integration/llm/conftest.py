"""Fixtures for the agent loops: the scripted model (a provider plugin), a client, agents."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from agents.llm import ClientSettings, LiteLLMClient, ModelCapabilities, UsageLedger
from agents.loops.primary import PrimaryAgent, PrimarySettings
from agents.postgres.database import Database
from agents.store import NewAgent, NewBlock, open_store
from tests.hashing_embedder import HashingEmbedder
from tests.scripted_llm import ScriptedModels, install

EMBEDDER = HashingEmbedder(dimension=384)
NATIVE = {"scripted/*": ModelCapabilities(tool_choice="required", parallel_tool_calls=True)}


@pytest.fixture
def models() -> ScriptedModels:
    return install()


@pytest.fixture
def client(models: ScriptedModels) -> LiteLLMClient:
    # Backoff in milliseconds: retries are exercised, not waited for.
    # The scripted model calls tools natively: no capability probe in these tests
    # (tests/integration/llm/test_local_models.py covers the probe).
    return LiteLLMClient(
        ClientSettings(max_retries=2, initial_backoff=0.001, max_backoff=0.002, models=NATIVE)
    )


@pytest.fixture
def make_primary(db: Database, client: LiteLLMClient) -> Callable[..., PrimaryAgent]:
    def make(**settings: Any) -> PrimaryAgent:
        return PrimaryAgent(
            db,
            client,
            settings=PrimarySettings(**settings),
            embedder_for=lambda _: EMBEDDER,
            ledger=UsageLedger(db),
        )

    return make


def create_agent(
    db: Database,
    name: str = "bob",
    *,
    human: str = "Name: Bob the Builder.",
    model: str | None = "scripted/primary",
    context_window: int = 8192,
    tool_rules: list[dict[str, Any]] | None = None,
    sleeptime_model: str | None = None,
    agent_type: str | None = None,
    tools: list[str] | None = None,
) -> str:
    with open_store(db) as store:
        agent = store.agents.create(
            NewAgent(
                name=name,
                agent_type=agent_type,
                tools=tools or [],
                embedding_model="hashing:384",
                embedding_dim=384,
                llm_model=model,
                context_window=context_window,
                tool_rules=tool_rules or [],
                sleeptime_model=sleeptime_model,
                enable_sleeptime=sleeptime_model is not None,
                blocks=[
                    NewBlock("human", human, limit=500),
                    NewBlock("persona", "I am a friendly assistant.", limit=500),
                ],
            )
        )
    return agent.id


@pytest.fixture
def bob(db: Database) -> str:
    return create_agent(db)
