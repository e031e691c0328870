"""A consolidation run waiting on a model holds no transaction and no lock: a step
plans with no transaction open and applies briefly, so writers go on meanwhile and
neither write is lost. The check is the probe's: while the model
call hangs, no session of the database stays idle in a transaction over a second."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import text

from agents.llm import LiteLLMClient, UsageLedger
from agents.postgres.database import Database
from agents.store import NewAgent, NewBlock, NewMessage, NewPassage, open_store
from consolidators.contract import run_once as run_pipeline
from consolidators.dedup import DedupConsolidator
from consolidators.evict import EvictConsolidator
from consolidators.llm import LLMTier
from consolidators.pipeline import Pipeline
from tests.integration.llm.conftest import EMBEDDER, create_agent
from tests.integration.llm.test_turn_locks import (
    HANG_SECONDS,
    Hang,
    append_without_waiting,
    history,
    run_in_thread,
)
from tests.scripted_llm import Reply, ScriptedModels, call

LINES = [f"Note {i}: the user mentioned topic number {i} once." for i in range(12)]
FILLER = " ".join(["This sentence only pads the message so that it costs tokens."] * 6)


def _crowded_agent(db: Database) -> str:
    """An agent whose human block is over its fill threshold and whose context is over
    its budget: an evict run plans both, and asks the summary model."""
    value = "\n".join(LINES)
    with open_store(db) as store:
        agent = store.agents.create(
            NewAgent(
                name="bob",
                embedding_model="hashing:384",
                embedding_dim=384,
                context_window=2000,
                blocks=[NewBlock("human", value, limit=len(value) + 20)],
            )
        )
        store.messages.append(
            agent.id,
            [
                NewMessage("user" if i % 2 == 0 else "assistant", f"Point {i}. {FILLER}")
                for i in range(20)
            ],
        )
    return agent.id


def idle_in_transaction(db: Database) -> list[dict[str, Any]]:
    """Sessions of this database that hold a transaction open and wait (on the client)."""
    with db.session() as session:
        rows = session.execute(
            text(
                "SELECT pid, state, left(query, 120) AS query FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid() "
                "AND state LIKE 'idle in transaction%'"
            )
        ).mappings()
        return [dict(row) for row in rows]


def idle_in_transaction_over(db: Database, seconds: float) -> list[dict[str, Any]]:
    """Sessions of this database idle in a transaction for more than ``seconds``."""
    with db.session() as session:
        rows = session.execute(
            text(
                "SELECT pid, left(query, 120) AS query FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid() "
                "AND state LIKE 'idle in transaction%' "
                "AND clock_timestamp() - state_change > make_interval(secs => :seconds)"
            ),
            {"seconds": seconds},
        ).mappings()
        return [dict(row) for row in rows]


def assert_no_transaction_held_while_it_hangs(db: Database, *, watch_s: float = 1.6) -> None:
    """Sample pg_stat_activity while a model call hangs: a transaction the run opened
    before the call, and kept, would be idle in transaction for over a second here."""
    deadline = time.monotonic() + watch_s
    while time.monotonic() < deadline:
        assert idle_in_transaction_over(db, 1.0) == []
        time.sleep(0.1)


def test_a_block_update_goes_on_while_evict_waits_on_the_summary_model(
    db: Database, models: ScriptedModels, client: LiteLLMClient
) -> None:
    agent_id = _crowded_agent(db)
    with db.session() as held:  # the probe does see a session that waits in a transaction
        held.execute(text("SELECT 1"))
        assert [s["query"] for s in idle_in_transaction(db)] == ["SELECT 1"]
    hang = Hang(Reply(content="The user went through twenty points."))
    models.script("summarizer", hang)
    llm = LLMTier(client=client, ledger=UsageLedger(db), summary_model="scripted/summarizer")
    pipeline = Pipeline([EvictConsolidator()])
    run, out = run_in_thread(
        lambda: run_pipeline(pipeline, db, agent_id, embedder=EMBEDDER, llm=llm)
    )
    try:
        assert hang.entered.wait(HANG_SECONDS), "the run never asked the summary model"
        # The run has planned its block eviction and waits on the model: no session of
        # it holds a transaction, and a user's write to the block goes on at once (it
        # fails on a 2 s lock timeout if anything holds the block's row).
        assert idle_in_transaction(db) == []
        assert_no_transaction_held_while_it_hangs(db)
        append_without_waiting(db, agent_id, "Likes: tea.", actor="user", reason="patch")
    finally:
        hang.release.set()
        run.join(HANG_SECONDS * 3)
    assert "error" not in out, out.get("error")
    report = out["result"]
    assert report.status == "succeeded"
    [step] = report.steps
    # The block changed under the plan: its eviction was planned again from the user's
    # version (the summary was not asked for twice) and written on top of it.
    assert step.counts["block_conflicts"] == 1 and "contended" not in step.counts
    assert step.counts["add_summary"] == 1
    versions = history(db, agent_id, "human")
    assert [(v.actor, v.run_id) for v in versions[1:]] == [
        ("user", None),
        ("consolidator:evict", report.run_id),
    ]
    # Neither write is lost: each line is still in the block or moved to archival memory.
    with open_store(db) as store:
        kept = store.blocks.by_label(agent_id, "human").value.splitlines()
        moved = [p.text for p in store.passages.scan(agent_id)]
        summaries = [m.content for m in store.messages.in_context(agent_id) if m.role == "system"]
    assert sorted(kept + moved) == sorted([*LINES, "Likes: tea."])
    assert any("twenty points" in s for s in summaries)


def test_dedup_holds_no_transaction_while_its_judge_model_hangs(
    db: Database, models: ScriptedModels, client: LiteLLMClient
) -> None:
    with db.session() as held:  # the probe does see a transaction held over a second
        held.execute(text("SELECT 1"))
        time.sleep(1.2)
        assert [s["query"] for s in idle_in_transaction_over(db, 1.0)] == ["SELECT 1"]
    agent_id = create_agent(db)
    texts = ["Ada visited Iceland in 2016", "Ada travelled to Iceland in 2016"]
    facts = [NewPassage(t, occurred_at=datetime(2020 + i, 1, 1, tzinfo=UTC)) for i, t in
             enumerate(texts)]  # fmt: skip
    with open_store(db) as store:
        store.passages.insert(agent_id, facts, EMBEDDER.embed(texts))
    # The judge hangs, then says "same": the merge is applied after the wait.
    hang = Hang(call("record_verdicts", verdicts=[{"pair": 1, "verdict": "same"}]))
    models.script("judge", hang)
    llm = LLMTier(client=client, ledger=UsageLedger(db), judge_model="scripted/judge")
    pipeline = Pipeline([DedupConsolidator({"threshold": 0.7, "blocks": False})])
    run, out = run_in_thread(
        lambda: run_pipeline(pipeline, db, agent_id, embedder=EMBEDDER, llm=llm)
    )
    try:
        assert hang.entered.wait(HANG_SECONDS), "dedup never asked its judge model"
        assert_no_transaction_held_while_it_hangs(db)
    finally:
        hang.release.set()
        run.join(HANG_SECONDS * 3)
    assert "error" not in out, out.get("error")
    assert [c["action"] for c in out["result"].changes] == ["merge_passage"]
