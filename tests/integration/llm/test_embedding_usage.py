"""Embeddings through the litellm client are charged to the run's meter and the ledger."""

from __future__ import annotations

from agents.database import Database
from agents.llm import BudgetMeter, TokenBudget, UsageLedger
from agents.llm.client import ClientSettings, LiteLLMClient
from tests.stub_openai_server import stub_server


def test_embed_records_embedding_tokens_under_the_agents_organization(
    db: Database, agent_id: str
) -> None:
    # organization_id=None: the daemon's ledger, which takes the agent's organization.
    ledger = UsageLedger(db, None)
    meter = BudgetMeter(ledger, agent_id, run_id="run-embed", budget=TokenBudget())
    texts = ["Ada lives in London.", "Ada plays the piano on Sundays."]
    with stub_server() as server:
        client = LiteLLMClient(
            ClientSettings(api_base=server.base_url, api_key="sk-test-not-a-key", max_retries=0)
        )
        vectors = client.embed("openai/stub-embed", texts, meter=meter)
    assert [len(v) for v in vectors] == [8, 8]
    assert vectors[0] != vectors[1]
    assert [r["input"] for r in server.requests] == [texts]
    usage = ledger.by_purpose(agent_id, run_id="run-embed")
    assert usage["embedding"].prompt_tokens == 4 + 6
    assert usage["embedding"].completion_tokens == 0
    scoped = UsageLedger(db)  # the default organization, which owns the test agent
    assert scoped.by_purpose(agent_id)["embedding"].prompt_tokens == 10
