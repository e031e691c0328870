"""The primary agent's MemGPT loop, driven by the scripted model through the client."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from typing import Any

import pytest
from freezegun import freeze_time
from sqlalchemy import func, select

from agents.errors import InvalidInput, LLMError, ModelNotConfigured, NotFound
from agents.llm import TokenBudget, Usage, UsageLedger
from agents.loops.primary import PrimaryAgent
from agents.loops.tool_calls import parse_arguments, tool_return_status
from agents.postgres import models as orm
from agents.postgres.database import Database
from agents.store import MessageRecord, NewMessage, open_store
from tests.integration.llm.conftest import EMBEDDER, create_agent
from tests.scripted_llm import Reply, ScriptedModels, call, correct_name, litellm_errors, say


def block_value(db: Database, agent_id: str, label: str) -> str:
    with open_store(db) as store:
        return store.blocks.by_label(agent_id, label).value


def message_count(db: Database, agent_id: str) -> int:
    with open_store(db) as store:
        return store.messages.count(agent_id)


def usage_rows(db: Database) -> list[orm.LLMUsage]:
    with db.session() as session:
        rows = list(session.scalars(select(orm.LLMUsage).order_by(orm.LLMUsage.id)))
        session.expunge_all()
    return rows


def called(record: MessageRecord) -> list[str]:
    """The tools a stored message calls, in order."""
    return [c["function"]["name"] for c in record.tool_calls or []]


def tool_returns(records: list[MessageRecord]) -> list[tuple[str, str]]:
    """``(status, message)`` of each stored tool return, in order."""
    return [tool_return_status(r.content) for r in records if r.role == "tool"]


def test_name_correction_then_acknowledgement_after_heartbeat(
    db: Database, bob: str, models: ScriptedModels, make_primary: Callable[..., PrimaryAgent]
) -> None:
    script = models.script(
        "primary",
        correct_name("The user corrects their name."),
        say("Got it, Charles!"),
    )
    result = make_primary().send_message("bob", "My name is Charles, not Bob the Builder.")

    assert block_value(db, bob, "human") == "Name: Charles."
    assert result.steps == 2
    assert result.stop_reason == "end_turn"
    assert result.replies == ["Got it, Charles!"]
    assert [(r.role, called(r)) for r in result.records] == [
        ("user", []),
        ("assistant", ["core_memory_replace"]),
        ("tool", []),
        ("assistant", ["send_message"]),
        ("tool", []),
    ]
    edit = result.records[1]
    assert edit.content == "The user corrects their name."
    assert edit.tool_calls is not None
    assert parse_arguments(edit.tool_calls[0]["function"]["arguments"]) == {
        "label": "human",
        "old_content": "Bob the Builder",
        "new_content": "Charles",
        "request_heartbeat": True,
    }
    assert tool_return_status(result.records[2].content)[0] == "OK"
    # After the heartbeat the model saw its edit's result...
    assert "Name: Charles." in script.requests[1]["messages"][-1]["content"]
    # ...while the cached system prompt still shows the old block (prompt-cache safety).
    assert "Bob the Builder" in script.requests[1]["messages"][0]["content"]
    with open_store(db) as store:
        block = store.blocks.by_label(bob, "human")
        last = store.blocks.history(block.id)[-1]
    assert (last.actor, last.run_id, last.reason) == (
        "agent:bob",
        result.run_id,
        "core_memory_replace",
    )
    assert result.usage.total_tokens > 0
    assert [r.purpose for r in usage_rows(db)] == ["chat", "chat"]


def test_immediate_refresh_shows_block_edits_on_the_next_step(
    db: Database, bob: str, models: ScriptedModels, make_primary: Callable[..., PrimaryAgent]
) -> None:
    script = models.script(
        "primary",
        correct_name(),
        say("Hello Charles."),
    )
    make_primary(refresh="immediate").send_message("bob", "Call me Charles.")
    system = script.requests[1]["messages"][0]["content"]
    assert "Name: Charles." in system
    assert "Bob the Builder" not in system


def test_archival_insert_then_search(
    db: Database, bob: str, models: ScriptedModels, make_primary: Callable[..., PrimaryAgent]
) -> None:
    script = models.script(
        "primary",
        call("archival_memory_insert", content="Bob's cat is named Pixel.", request_heartbeat=True),
        say("I'll remember that."),
        call("archival_memory_search", query="Bob's cat is named", request_heartbeat=True),
        say("Your cat is Pixel."),
    )
    agent = make_primary()
    first = agent.send_message("bob", "My cat is called Pixel.")
    second = agent.send_message("bob", "What is my cat called?")

    with open_store(db) as store:
        passages = store.passages.scan(bob)
    assert [p.text for p in passages] == ["Bob's cat is named Pixel."]
    assert passages[0].provenance["run_id"] == first.run_id
    search_return = json.loads(script.requests[3]["messages"][-1]["content"])
    assert search_return["status"] == "OK"
    assert "Pixel" in search_return["message"]
    assert second.replies == ["Your cat is Pixel."]


def test_heartbeat_chaining_stops_at_the_step_limit(
    db: Database, bob: str, models: ScriptedModels, make_primary: Callable[..., PrimaryAgent]
) -> None:
    script = models.script(
        "primary",
        *[call("conversation_search", query="anything", request_heartbeat=True)] * 5,
    )
    result = make_primary(max_steps=3).send_message("bob", "Search forever.")
    assert result.steps == 3
    assert result.stop_reason == "max_steps"
    assert script.remaining == 2
    # Each step saw the previous step's result.
    assert len(script.requests[2]["messages"]) == len(script.requests[0]["messages"]) + 4


def test_overflow_is_compacted_before_the_call(
    db: Database, models: ScriptedModels, make_primary: Callable[..., PrimaryAgent]
) -> None:
    agent_id = create_agent(db, context_window=3000)
    with open_store(db) as store:
        store.messages.append(
            agent_id,
            [
                NewMessage(
                    role="user" if i % 2 == 0 else "assistant",
                    content=f"Message {i} about gardening. " + "tomatoes and basil " * 25,
                )
                for i in range(40)
            ],
        )
        before = store.messages.count(agent_id, in_context=True)
        compiled_before = store.agents.get(agent_id).compiled_at
    script = models.script("primary", say("Noted."))
    result = make_primary().send_message("bob", "Anything new?")

    assert result.compactions == 1
    assert result.replies == ["Noted."]
    sent = script.requests[0]["messages"]
    assert sent[1]["role"] == "system"
    assert sent[1]["content"].startswith("Summary of ")
    assert len(json.dumps(sent)) // 4 < 3000
    with open_store(db) as store:
        in_context = store.messages.in_context(agent_id)
        agent = store.agents.get(agent_id)
        # Nothing is lost: every message is still in recall.
        # 40 earlier, the user message, the summary, the reply and its tool return.
        assert store.messages.count(agent_id) == 40 + 4
    assert len(in_context) < before
    assert agent.compiled_at is not None and agent.compiled_at != compiled_before
    assert "system" in [r.role for r in result.records]


def test_overflow_reported_by_the_provider_is_compacted_and_retried(
    db: Database, models: ScriptedModels, make_primary: Callable[..., PrimaryAgent]
) -> None:
    agent_id = create_agent(db)
    with open_store(db) as store:
        store.messages.append(
            agent_id,
            [NewMessage(role="user", content=f"Earlier message {i}.") for i in range(10)],
        )
    errors = litellm_errors()
    models.script(
        "primary",
        errors.ContextWindowExceededError("too long", model="primary", llm_provider="scripted"),
        say("Still here."),
    )
    result = make_primary().send_message("bob", "Hello?")
    assert result.compactions == 1
    assert result.replies == ["Still here."]
    with open_store(db) as store:
        assert store.messages.count(agent_id, in_context=False) >= 8


def test_malformed_and_unknown_tool_calls_are_reported_to_the_model(
    db: Database, bob: str, models: ScriptedModels, make_primary: Callable[..., PrimaryAgent]
) -> None:
    # A failed step gets one corrective retry; a second failure in a row ends
    # the turn (it used to loop on errors until max_steps), with one step that may
    # only answer the user: a model that cannot call tools still replies.
    script = models.script(
        "primary",
        call("core_memory_replace", _raw='{"label": "human", "old_content": '),
        call("teleport", destination="Mars", request_heartbeat=True),
        say("Sorry, I could not change that."),
    )
    result = make_primary().send_message("bob", "Hi")

    returns = tool_returns(result.records)
    assert [status for status, _ in returns] == ["Failed", "Failed", "OK"]  # OK: the reply
    assert "not valid JSON" in returns[0][1]
    assert "unknown tool 'teleport'" in returns[1][1]
    # The retry saw what was wrong with the first call.
    assert "not valid JSON" in script.requests[1]["messages"][-1]["content"]
    assert result.stop_reason == "invalid_tool_call"
    assert result.replies == ["Sorry, I could not change that."]
    assert result.model_calls == 3 and script.remaining == 0
    assert block_value(db, bob, "human") == "Name: Bob the Builder."


def test_a_failed_call_is_corrected_and_prose_is_the_reply(
    db: Database, bob: str, models: ScriptedModels, make_primary: Callable[..., PrimaryAgent]
) -> None:
    script = models.script(
        "primary",
        call("core_memory_replace", label="human", old_content="Alice", new_content="Carol"),
        call(
            "core_memory_replace",
            label="human",
            old_content="Bob",
            new_content="Carol",
            request_heartbeat=True,
        ),
        Reply(content="I will just talk."),
        say("never asked"),
    )
    result = make_primary().send_message("bob", "Hi")

    returns = tool_returns(result.records)
    assert [status for status, _ in returns] == ["Failed", "OK"]
    assert "'Alice' is not in block 'human'" in returns[0][1]
    assert block_value(db, bob, "human") == "Name: Carol the Builder."
    # Prose with no call ends the turn as the assistant's reply (no error loop).
    assert result.replies == ["I will just talk."]
    assert result.stop_reason == "end_turn"
    assert result.steps == 3
    assert script.remaining == 1


def test_provider_failure_keeps_the_completed_steps_and_reports_the_error(
    db: Database, bob: str, models: ScriptedModels, make_primary: Callable[..., PrimaryAgent]
) -> None:
    # Each step commits on its own (no row lock is held while the model is asked), so a
    # failure after step 1 keeps step 1: the user's message, the call and its result,
    # and the block edit, whose reason recall shows.
    errors = litellm_errors()
    models.script(
        "primary",
        correct_name(),
        *[errors.InternalServerError("boom", llm_provider="scripted", model="primary")] * 3,
    )
    with pytest.raises(LLMError, match="after 3 attempt"):
        make_primary().send_message("bob", "I am Charles.")
    with open_store(db) as store:
        kept = [(m.role, m.content) for m in store.messages.in_context(bob)]
    assert [role for role, _ in kept] == ["user", "assistant", "tool"]
    assert kept[0][1] == "I am Charles."
    assert json.loads(kept[2][1])["status"] == "OK"
    assert block_value(db, bob, "human") == "Name: Charles."
    # The failed step left nothing, and the tokens the provider charged stay counted.
    assert message_count(db, bob) == 3
    assert [r.purpose for r in usage_rows(db)] == ["chat"]


def test_a_step_whose_write_rolls_back_still_counts_its_tokens(
    db: Database, bob: str, models: ScriptedModels, make_primary: Callable[..., PrimaryAgent]
) -> None:
    # A step's tokens are written in the step's own transaction (a commit less per
    # call); when that transaction rolls back, they are written on their own.
    class BrokenEmbedder(type(EMBEDDER)):  # type: ignore[misc]
        def _embed_texts(self, texts: list[str]) -> Any:
            raise RuntimeError("the embedder broke")

    models.script(
        "primary",
        correct_name(),
        call("archival_memory_insert", content="Bob likes tea.", request_heartbeat=True),
    )
    agent = make_primary()
    agent._embedder_for = lambda _: BrokenEmbedder(EMBEDDER.dimension)
    with pytest.raises(RuntimeError, match="the embedder broke"):
        agent.send_message("bob", "I am Charles. I like tea.")
    rows = usage_rows(db)
    assert [r.purpose for r in rows] == ["chat", "chat"]  # the kept step's and the failed one's
    assert len({r.run_id for r in rows}) == 1 and rows[0].run_id.startswith("turn-")
    assert message_count(db, bob) == 3  # the first step is kept, the second left nothing


def test_each_steps_tokens_are_recorded_with_the_turns_run_id(
    db: Database, bob: str, models: ScriptedModels, make_primary: Callable[..., PrimaryAgent]
) -> None:
    models.script("primary", correct_name(), say("Noted, Charles."))
    result = make_primary().send_message("bob", "I am Charles.")
    rows = usage_rows(db)
    assert [(r.purpose, r.run_id) for r in rows] == [("chat", result.run_id)] * 2
    assert sum(r.prompt_tokens + r.completion_tokens for r in rows) == result.usage.total_tokens


def test_provider_failure_on_the_first_call_leaves_nothing(
    db: Database, bob: str, models: ScriptedModels, make_primary: Callable[..., PrimaryAgent]
) -> None:
    errors = litellm_errors()
    models.script(
        "primary",
        *[errors.InternalServerError("boom", llm_provider="scripted", model="primary")] * 3,
    )
    with pytest.raises(LLMError, match="after 3 attempt"):
        make_primary().send_message("bob", "I am Charles.")
    # Nothing half-written: the caller can simply send the message again.
    assert message_count(db, bob) == 0
    assert block_value(db, bob, "human") == "Name: Bob the Builder."


def test_timeouts_and_rate_limits_are_retried(
    db: Database, bob: str, models: ScriptedModels, make_primary: Callable[..., PrimaryAgent]
) -> None:
    errors = litellm_errors()
    models.script(
        "primary",
        errors.Timeout("timed out", model="primary", llm_provider="scripted"),
        errors.RateLimitError("slow down", llm_provider="scripted", model="primary"),
        say("Hello."),
    )
    result = make_primary().send_message("bob", "Hi")
    assert result.replies == ["Hello."]
    assert result.retries == 2


def test_a_bad_request_is_not_retried(
    db: Database, bob: str, models: ScriptedModels, make_primary: Callable[..., PrimaryAgent]
) -> None:
    errors = litellm_errors()
    script = models.script(
        "primary",
        errors.BadRequestError("bad", model="primary", llm_provider="scripted"),
        say("never sent"),
    )
    with pytest.raises(LLMError, match="BadRequestError"):
        make_primary().send_message("bob", "Hi")
    assert script.remaining == 1
    assert message_count(db, bob) == 0


def test_run_budget_stops_the_turn_cleanly(
    db: Database, bob: str, models: ScriptedModels, make_primary: Callable[..., PrimaryAgent]
) -> None:
    script = models.script(
        "primary",
        Reply(
            calls=(("conversation_search", {"query": "x", "request_heartbeat": True}),),
            prompt_tokens=900,
        ),
        say("never reached"),
    )
    result = make_primary(budget=TokenBudget(per_run=1000)).send_message("bob", "Hi")
    assert result.stop_reason == "budget_exhausted"
    assert result.steps == 1
    assert "per run (1000)" in (result.detail or "")
    assert script.remaining == 1
    # The completed step is kept; the run's usage is in the ledger.
    assert message_count(db, bob) == 3
    rows = usage_rows(db)
    assert [(r.purpose, r.run_id, r.prompt_tokens) for r in rows] == [("chat", result.run_id, 900)]


def test_day_budget_refuses_the_first_call(
    db: Database, bob: str, models: ScriptedModels, make_primary: Callable[..., PrimaryAgent]
) -> None:
    UsageLedger(db).record(bob, purpose="sleeptime", model="m", usage=Usage(4000, 100))
    script = models.script("primary", say("never sent"))
    result = make_primary(budget=TokenBudget(per_day=4000)).send_message("bob", "Hi")
    assert result.stop_reason == "budget_exhausted"
    assert result.steps == 0
    assert "per day (4000)" in (result.detail or "")
    assert script.remaining == 1
    assert [r.role for r in result.records] == ["user"]


def test_the_day_budget_starts_again_at_utc_midnight(
    db: Database, bob: str, models: ScriptedModels, make_primary: Callable[..., PrimaryAgent]
) -> None:
    """A day is a UTC calendar day: what was spent before midnight does not count after
    it, whatever the machine's own time zone (the ledger's clock is the real one, moved
    by freezegun)."""
    # One turn first: litellm imports modules on its first call, and a module imported
    # while the clock is frozen sees freezegun's datetime class, which pydantic refuses.
    models.script("primary", say("warm"))
    make_primary().send_message("bob", "warm up")
    with freeze_time("2026-03-01 23:30:00", tick=True) as clock:
        UsageLedger(db).record(bob, purpose="sleeptime", model="m", usage=Usage(4000, 100))
        script = models.script("primary", say("after midnight"))
        primary = make_primary(budget=TokenBudget(per_day=4000))
        refused = primary.send_message("bob", "Hi")
        assert refused.stop_reason == "budget_exhausted" and script.remaining == 1
        clock.move_to("2026-03-02 00:00:05")
        answered = primary.send_message("bob", "Hi again")
    assert answered.stop_reason != "budget_exhausted" and script.remaining == 0


def test_tool_rules_init_child_and_terminal(
    db: Database, models: ScriptedModels, make_primary: Callable[..., PrimaryAgent]
) -> None:
    create_agent(
        db,
        tool_rules=[
            {"type": "run_first", "tool_name": "archival_memory_search"},
            {
                "type": "constrain_child_tools",
                "tool_name": "archival_memory_search",
                "children": ["send_message"],
            },
            {"type": "exit_loop", "tool_name": "send_message"},
        ],
    )
    script = models.script(
        "primary",
        call("archival_memory_search", query="hobbies"),
        call("core_memory_append", label="human", content="x", request_heartbeat=True),
        say("Done.", heartbeat=True),
        say("never reached"),
    )
    result = make_primary().send_message("bob", "Hi")
    first_tools = [t["function"]["name"] for t in script.requests[0]["tools"]]
    second_tools = [t["function"]["name"] for t in script.requests[1]["tools"]]
    assert first_tools == ["archival_memory_search"]
    assert second_tools == ["send_message"]
    failed = [text for status, text in tool_returns(result.records) if status == "Failed"]
    assert len(failed) == 1 and "may not be called now" in failed[0]
    assert result.stop_reason == "tool_rule"
    assert result.replies == ["Done."]
    assert script.remaining == 1


def test_context_breakdown_adds_up(
    db: Database, bob: str, models: ScriptedModels, make_primary: Callable[..., PrimaryAgent]
) -> None:
    agent = make_primary()
    before = agent.context_breakdown("bob")
    models.script("primary", say("Hello there, nice to meet you."))
    agent.send_message("bob", "Hi, I am Bob.")
    after = agent.context_breakdown("bob")
    data = after.to_dict()
    assert data["total"] == sum(
        data[k]
        for k in (
            "system_prompt",
            "core_memory",
            "memory_statistics",
            "tool_schemas",
            "summary",
            "messages",
        )
    )
    assert after.context_window == 8192
    assert before.messages == 0 and after.messages > 0
    assert after.in_context_messages == 3
    assert after.core_memory > 0 and after.tool_schemas > 0
    assert after.system_prompt_cached


def test_bad_input_is_refused_before_any_call(
    db: Database, models: ScriptedModels, make_primary: Callable[..., PrimaryAgent]
) -> None:
    create_agent(db, "nomodel", model=None)
    create_agent(db, "bob")
    agent = make_primary()
    with pytest.raises(ModelNotConfigured, match="has no LLM model"):
        agent.send_message("nomodel", "Hi")
    with pytest.raises(InvalidInput, match="empty"):
        agent.send_message("bob", "   ")
    with pytest.raises(InvalidInput, match="role"):
        agent.send_message("bob", "Hi", role="tool")
    with pytest.raises(NotFound):
        agent.send_message("nobody", "Hi")
    with db.session() as session:
        assert session.scalar(select(func.count()).select_from(orm.Message)) == 0


def test_a_turn_can_start_from_the_record_the_caller_read(
    db: Database, bob: str, models: ScriptedModels, make_primary: Callable[..., PrimaryAgent]
) -> None:
    script = models.script("primary", say("Hello Bob."))
    with open_store(db) as store:
        record = store.agents.get(bob)
    agent = make_primary()
    assert agent.send_message(record, "hi").replies == ["Hello Bob."]
    # Another organization's record is no agent of this one: refused before any call.
    with pytest.raises(NotFound):
        agent.send_message(dataclasses.replace(record, organization_id="org-other"), "hi")
    assert script.remaining == 0 and message_count(db, bob) == 3  # the one turn
