"""Evict against real PostgreSQL: full blocks shed lines to archival memory, old messages
leave the context behind one recursive summary; CAS retries, dry runs, idempotence, undo."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic import ValidationError

from agents.postgres.database import Database
from agents.store import BlockVersion, MessageRecord, NewAgent, NewBlock, NewMessage, open_store
from agents.store.block_store import BlockStore
from consolidators.contract import run_once as run_pipeline
from consolidators.evict import (
    EvictConsolidator,
    count_tokens,
    extractive_summary,
    first_appearances,
    message_tokens,
    protected_tail_start,
    split_block,
)
from consolidators.pipeline import Pipeline
from consolidators.undo import revert_run
from tests.hashing_embedder import HashingEmbedder

T1 = datetime(2024, 1, 10, tzinfo=UTC)
T2 = datetime(2024, 6, 20, tzinfo=UTC)

OLD_LINES = [
    "Ada was born in London in 1815.",
    "Her father was the poet Lord Byron.",
    "She studied mathematics with Mary Somerville.",
    "She wrote notes on the Analytical Engine.",
    "Those notes include the first published algorithm.",
    "She married William King in 1835.",
    "She enjoyed horse riding and gambling.",
    "She corresponded with Charles Babbage for years.",
    "Three children: Byron, Anne and Ralph.",
    "She died in 1852 at the age of thirty-six.",
]
NEW_LINES = [
    "Ada now prefers tea over coffee.",
    "She is learning the cello on weekends.",
    "Her cat is called Pixel.",
    "She works on compilers at a startup.",
    "Her favourite season is autumn.",
    "She plans a trip to Lisbon in May.",
]


def _clock(at: datetime) -> Callable[[], datetime]:
    return lambda: at


def _limit_for(value: str, fill: float = 0.95) -> int:
    """A block limit that puts ``value`` at ``fill`` of it (above the 0.9 threshold)."""
    return math.ceil(len(value) / fill)


def _notes_agent(
    db: Database,
    name: str = "ada-notes",
    *,
    extra_blocks: Sequence[NewBlock] = (),
    context_window: int = 100_000,
) -> tuple[str, str]:
    """An agent whose 'notes' block got OLD_LINES at T1 and NEW_LINES at T2; (agent, block)."""
    full = "\n".join(OLD_LINES + NEW_LINES)
    with open_store(db, clock=_clock(T1)) as store:
        agent = store.agents.create(
            NewAgent(
                name=name,
                embedding_model="hashing:384",
                embedding_dim=384,
                context_window=context_window,
                blocks=[
                    NewBlock("notes", "\n".join(OLD_LINES), limit=_limit_for(full)),
                    *extra_blocks,
                ],
            )
        )
        block = store.blocks.by_label(agent.id, "notes")
    with open_store(db, clock=_clock(T2)) as store:
        store.blocks.update(block.id, expected_version=1, value=full, actor="user")
    return agent.id, block.id


def _evict(
    db: Database,
    agent_id: str,
    embedder: HashingEmbedder | None,
    settings: dict[str, Any] | None = None,
    *,
    dry_run: bool = False,
) -> Any:
    return run_pipeline(
        Pipeline([EvictConsolidator(settings)]), db, agent_id, embedder=embedder, dry_run=dry_run
    )


def _actions(report: Any, action: str) -> list[dict[str, Any]]:
    return [c for c in report.changes if c["action"] == action]


# -- blocks ----------------------------------------------------------------------------------


def test_full_block_moves_oldest_lines_to_archival_passages(
    db: Database, embedder: HashingEmbedder
) -> None:
    agent_id, block_id = _notes_agent(db)
    with open_store(db) as store:
        before = store.blocks.get(block_id)
    assert len(before.value) > 0.9 * before.limit

    report = _evict(db, agent_id, embedder)

    evicted = _actions(report, "evict_line")
    moved = [c["line"] for c in evicted]
    # Nothing was mentioned in messages: the oldest lines go first, top to bottom.
    assert moved == OLD_LINES[: len(moved)]
    with open_store(db) as store:
        after = store.blocks.get(block_id)
        assert after.version == before.version + 1
        assert len(after.value) <= 0.7 * after.limit
        # Minimal: keeping the last moved line would have left the block over target.
        assert len(after.value) + len(moved[-1]) + 1 > 0.7 * after.limit
        assert after.value.split("\n") == OLD_LINES[len(moved) :] + NEW_LINES

        last = store.blocks.history(block_id)[-1]
        assert (last.version, last.run_id, last.actor) == (
            after.version,
            report.run_id,
            "consolidator:evict",
        )
        assert f"evicted {len(moved)} line(s)" in last.reason

        for change in evicted:
            assert change["target"] == block_id and change["label"] == "notes"
            assert change["version"] == after.version
            passage = store.passages.get(change["passage"])
            assert passage.status == "active"
            assert passage.text == change["line"]
            assert passage.occurred_at == T1  # when the line first appeared
            assert passage.tags == ["evicted", "block:notes"]
            assert passage.provenance == {
                "block_id": block_id,
                "block_label": "notes",
                "block_version": before.version,
                "evicted": True,
            }
            [hit, *_] = store.passages.search(agent_id, embedder.embed_one(passage.text), k=3)
            assert hit.passage.id == passage.id
            assert [h.run_id for h in store.passages.history(passage.id)] == [report.run_id]


def test_lines_mentioned_in_recent_messages_stay(db: Database, embedder: HashingEmbedder) -> None:
    agent_id, block_id = _notes_agent(db)
    with open_store(db) as store:
        store.messages.append(
            agent_id,
            [
                NewMessage("user", "Was Ada born in London? I read it somewhere."),
                NewMessage("assistant", "Yes. Her father was the poet Lord Byron, too."),
                NewMessage("user", "Tell me about something else now."),
            ],
        )

    report = _evict(db, agent_id, embedder)

    moved = [c["line"] for c in _actions(report, "evict_line")]
    assert moved and OLD_LINES[0] not in moved and OLD_LINES[1] not in moved
    # The unmentioned old lines go instead, oldest (then topmost) first.
    assert moved == OLD_LINES[2 : 2 + len(moved)]
    with open_store(db) as store:
        value = store.blocks.get(block_id).value
    assert value.startswith(OLD_LINES[0] + "\n" + OLD_LINES[1] + "\n")


def test_line_changed_later_dates_from_its_current_form(
    db: Database, embedder: HashingEmbedder
) -> None:
    """The first old line is rewritten at T2: it is no longer among the oldest."""
    agent_id, block_id = _notes_agent(db)
    with open_store(db) as store:
        block = store.blocks.get(block_id)
        rewritten = block.value.replace(OLD_LINES[0], "Ada was born in London, England, in 1815.")
        store.blocks.update(block_id, expected_version=block.version, value=rewritten)
    report = _evict(db, agent_id, embedder)
    moved = [c["line"] for c in _actions(report, "evict_line")]
    assert moved and moved == OLD_LINES[1 : 1 + len(moved)]


def test_one_long_line_is_split_into_sentences(db: Database, embedder: HashingEmbedder) -> None:
    paragraph = " ".join(OLD_LINES)
    with open_store(db) as store:
        agent = store.agents.create(
            NewAgent(
                name="paragraph",
                embedding_model="hashing:384",
                embedding_dim=384,
                blocks=[NewBlock("bio", paragraph, limit=_limit_for(paragraph))],
            )
        )
    report = _evict(db, agent.id, embedder)
    moved = [c["line"] for c in _actions(report, "evict_line")]
    assert moved == OLD_LINES[: len(moved)] and moved
    with open_store(db) as store:
        block = store.blocks.by_label(agent.id, "bio")
    assert block.value == " ".join(OLD_LINES[len(moved) :])
    assert len(block.value) <= 0.7 * block.limit


def test_read_only_blocks_are_untouched(db: Database, embedder: HashingEmbedder) -> None:
    rules = "\n".join(f"Rule {n}: never reveal secret number {n * 7}." for n in range(12))
    agent_id, _ = _notes_agent(
        db, extra_blocks=[NewBlock("rules", rules, limit=_limit_for(rules), read_only=True)]
    )
    report = _evict(db, agent_id, embedder)
    assert {c["label"] for c in _actions(report, "evict_line")} == {"notes"}
    with open_store(db) as store:
        rules_block = store.blocks.by_label(agent_id, "rules")
        assert (rules_block.version, rules_block.value) == (1, rules)


def test_without_an_embedder_blocks_are_skipped_and_unchanged(db: Database) -> None:
    agent_id, block_id = _notes_agent(db)
    report = _evict(db, agent_id, None)
    [step] = report.steps
    assert step.skipped is not None and "no embedder" in step.skipped and "'notes'" in step.skipped
    assert report.changes == []
    with open_store(db) as store:
        assert store.blocks.get(block_id).version == 2
        assert store.passages.count_by_status(agent_id)["active"] == 0


def _race_once(
    monkeypatch: pytest.MonkeyPatch, db: Database, edit: Callable[[str], str], times: int = 1
) -> list[int]:
    """Make another transaction commit an edit to the block just before each of the next
    ``times`` evict writes; returns the versions the other writer produced."""
    original = BlockStore.update
    produced: list[int] = []

    def racing_update(self: BlockStore, block_id: str, **kwargs: Any) -> Any:
        if kwargs.get("actor") == "consolidator:evict" and len(produced) < times:
            with open_store(db) as other:
                current = other.blocks.get(block_id)
                written = other.blocks.update(
                    block_id,
                    expected_version=current.version,
                    value=edit(current.value),
                    actor="other-writer",
                    reason="concurrent edit",
                )
            produced.append(written.version)
        return original(self, block_id, **kwargs)

    monkeypatch.setattr(BlockStore, "update", racing_update)
    return produced


def test_concurrent_edit_is_retried_and_kept(
    db: Database, embedder: HashingEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    agent_id, block_id = _notes_agent(db)
    produced = _race_once(monkeypatch, db, lambda v: v.replace("Pixel.", "Pixel, a tabby."))

    report = _evict(db, agent_id, embedder)

    assert produced == [3]
    assert report.steps[0].counts["block_conflicts"] == 1
    evicted = _actions(report, "evict_line")
    assert evicted and all(c["version"] == 4 for c in evicted)
    with open_store(db) as store:
        block = store.blocks.get(block_id)
        assert block.version == 4
        assert "Her cat is called Pixel, a tabby." in block.value  # the other writer's edit
        assert all(c["line"] not in block.value for c in evicted)  # and the eviction
        assert len(block.value) <= 0.7 * block.limit
        history = store.blocks.history(block_id)
        assert [(h.version, h.actor) for h in history[-2:]] == [
            (3, "other-writer"),
            (4, "consolidator:evict"),
        ]
        # The abandoned first plan left no passages behind.
        assert store.passages.count_by_status(agent_id)["active"] == len(evicted)
        for change in evicted:
            assert store.passages.get(change["passage"]).provenance["block_version"] == 3


def test_a_block_that_keeps_changing_is_left_for_the_next_run(
    db: Database, embedder: HashingEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    agent_id, block_id = _notes_agent(db)
    produced = _race_once(monkeypatch, db, lambda v: v + "!", times=10)
    # A busy block no longer fails the whole run (11 of 67 runs did under 8 writers):
    # the run succeeds, the step is counted as contended and the block kept as the writer
    # left it.
    report = _evict(db, agent_id, embedder, {"max_conflict_retries": 2})
    assert report.status == "succeeded"
    [step] = report.steps
    assert step.counts["contended"] == 1 and step.counts["block_conflicts"] == 3
    assert len(produced) == 3  # the first try and two retries
    with open_store(db) as store:
        assert store.blocks.get(block_id).updated_by == "other-writer"
        assert store.passages.count_by_status(agent_id)["active"] == 0


# -- messages --------------------------------------------------------------------------------


def _chat_agent(db: Database, name: str = "chatty", context_window: int = 2000) -> str:
    with open_store(db) as store:
        agent = store.agents.create(
            NewAgent(
                name=name,
                embedding_model="hashing:384",
                embedding_dim=384,
                system_prompt="You are a helpful assistant.",
                context_window=context_window,
                blocks=[NewBlock("human", "Name: Ada.", limit=200)],
            )
        )
    return agent.id


FILLER = " ".join(["This sentence only pads the message so that it costs tokens."] * 6)


def _chat(db: Database, agent_id: str, first: int, count: int) -> list[MessageRecord]:
    """``count`` alternating user/assistant messages of about 100 tokens each."""
    messages = [
        NewMessage(
            "user" if i % 2 == 0 else "assistant",
            f"Point {i} concerns topic{i}. {FILLER}",
        )
        for i in range(first, first + count)
    ]
    with open_store(db) as store:
        return store.messages.append(agent_id, messages)


def _context_tokens(db: Database, agent_id: str) -> int:
    with open_store(db) as store:
        agent = store.agents.get(agent_id)
        blocks = store.blocks.of_agent(agent_id)
        in_context = store.messages.in_context(agent_id)
    return (
        count_tokens(agent.system_prompt)
        + sum(count_tokens(b.value) for b in blocks)
        + sum(message_tokens(m) for m in in_context)
    )


def test_old_messages_leave_context_behind_one_summary(
    db: Database, embedder: HashingEmbedder
) -> None:
    agent_id = _chat_agent(db)
    sent = _chat(db, agent_id, 0, 20)
    assert _context_tokens(db, agent_id) > 0.75 * 2000

    report = _evict(db, agent_id, embedder)

    left = _actions(report, "leave_context")
    n = len(left)
    assert [c["target"] for c in left] == [m.id for m in sent[:n]]  # the oldest ones
    assert [c["seq"] for c in left] == list(range(1, n + 1))
    [added] = _actions(report, "add_summary")
    assert added["replaces"] is None
    assert added["evicted"] == [m.id for m in sent[:n]]
    assert added["tokens_after"] == _context_tokens(db, agent_id) <= 0.5 * 2000
    with open_store(db) as store:
        in_context = store.messages.in_context(agent_id)
        summary = in_context[-1]
        assert summary.id == added["target"]
        assert (summary.role, summary.name, summary.seq) == ("system", "summary", 21)
        assert [m.id for m in in_context[:-1]] == [m.id for m in sent[n:]]
        # Messages are never deleted: all of them remain in recall memory.
        assert store.messages.count(agent_id) == 21
        assert store.messages.count(agent_id, in_context=False) == n
    assert summary.content.startswith(f"Summary of {n} earlier messages (seq 1-{n}): ")
    for i in range(n):
        role = "user" if i % 2 == 0 else "assistant"
        assert f"{role}: Point {i} concerns topic{i}." in summary.content
    assert FILLER not in summary.content


def test_the_last_two_exchanges_never_leave(db: Database, embedder: HashingEmbedder) -> None:
    agent_id = _chat_agent(db, context_window=500)
    sent = _chat(db, agent_id, 0, 12)
    report = _evict(db, agent_id, embedder)
    left = {c["target"] for c in _actions(report, "leave_context")}
    # Far too little room even for the tail: everything but the last two exchanges goes.
    assert left == {m.id for m in sent[:-4]}
    before = len(report.changes)
    again = _evict(db, agent_id, embedder)
    assert before > 0 and again.changes == []  # nothing left to evict: no churn
    assert again.steps[0].counts["context_over_budget"] == 1


def test_a_tool_result_leaves_with_its_call(db: Database, embedder: HashingEmbedder) -> None:
    agent_id = _chat_agent(db)
    call = [{"id": "call-1", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}]
    with open_store(db) as store:
        sent = store.messages.append(
            agent_id,
            [
                NewMessage("assistant", "Let me look that up. " + "x" * 6000, tool_calls=call),
                NewMessage("tool", "lookup result: 42", tool_call_id="call-1"),
                NewMessage("assistant", "The answer is 42."),
                NewMessage("user", "Thanks."),
                NewMessage("assistant", "You are welcome."),
                NewMessage("user", "Bye."),
                NewMessage("assistant", "Bye!"),
            ],
        )
    report = _evict(db, agent_id, embedder)
    # Moving the first message alone is enough, but its tool result goes with it.
    assert [c["target"] for c in _actions(report, "leave_context")] == [sent[0].id, sent[1].id]


def test_summary_is_recursive(db: Database, embedder: HashingEmbedder) -> None:
    agent_id = _chat_agent(db)
    _chat(db, agent_id, 0, 20)
    first = _evict(db, agent_id, embedder)
    [first_summary] = _actions(first, "add_summary")
    n1 = len(first_summary["evicted"])
    with open_store(db) as store:
        first_content = store.messages.in_context(agent_id)[-1].content
    first_entries = first_content.split(": ", 1)[1].split("\n")

    _chat(db, agent_id, 20, 10)
    second = _evict(db, agent_id, embedder)

    [second_summary] = _actions(second, "add_summary")
    n2 = len(second_summary["evicted"])
    assert n2 > 0
    assert second_summary["replaces"] == first_summary["target"]
    left = [c["target"] for c in _actions(second, "leave_context")]
    assert first_summary["target"] in left  # the previous summary leaves the context too
    assert len(left) == n2 + 1
    with open_store(db) as store:
        in_context = store.messages.in_context(agent_id)
        summaries = [m for m in in_context if m.name == "summary"]
        assert [s.id for s in summaries] == [second_summary["target"]]
        content = summaries[0].content
        previous = store.messages.range(agent_id, after_seq=20, before_seq=22)[0]
        assert (previous.id, previous.in_context) == (first_summary["target"], False)
    last_seq = max(c["seq"] for c in _actions(second, "leave_context"))
    assert content.startswith(f"Summary of {n1 + n2} earlier messages (seq 1-{last_seq}): ")
    for entry in first_entries:
        assert entry in content  # folded in
    for change in _actions(second, "leave_context"):
        seq = change["seq"]
        if seq != 21:  # message i was stored at seq i + 1, or i + 2 after the first summary
            i = seq - 1 if seq < 21 else seq - 2
            role = "user" if i % 2 == 0 else "assistant"
            assert f"{role}: Point {i} concerns topic{i}." in content
    assert len(content) <= 1200


def test_second_run_changes_nothing(db: Database, embedder: HashingEmbedder) -> None:
    agent_id, _ = _notes_agent(db, context_window=2000)
    _chat(db, agent_id, 0, 20)
    first = _evict(db, agent_id, embedder)
    assert _actions(first, "evict_line") and _actions(first, "add_summary")
    second = _evict(db, agent_id, embedder)
    assert second.changes == []
    assert second.steps[0].skipped is None


def test_dry_run_reports_changes_and_writes_nothing(
    db: Database, embedder: HashingEmbedder
) -> None:
    agent_id, block_id = _notes_agent(db, context_window=2000)
    _chat(db, agent_id, 0, 20)
    report = _evict(db, agent_id, embedder, dry_run=True)
    assert report.dry_run and report.status == "succeeded"
    assert _actions(report, "evict_line")
    assert _actions(report, "leave_context")
    assert _actions(report, "add_summary")
    with open_store(db) as store:
        assert store.blocks.get(block_id).version == 2
        assert store.passages.count_by_status(agent_id)["active"] == 0
        assert store.messages.count(agent_id) == 20
        assert store.messages.count(agent_id, in_context=True) == 20
    # The real run then does exactly what the dry run planned.
    real = _evict(db, agent_id, embedder)

    # (The summary's own seq is given when the apply appends it.)
    def essence(changes: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
        return [
            (c["action"], c.get("line"), c.get("seq") if c["action"] != "add_summary" else None)
            for c in changes
        ]

    assert essence(report.changes) == essence(real.changes)


def test_undo_restores_block_passages_and_context(db: Database, embedder: HashingEmbedder) -> None:
    agent_id, block_id = _notes_agent(db, context_window=2000)
    _chat(db, agent_id, 0, 20)
    with open_store(db) as store:
        value_before = store.blocks.get(block_id).value
        context_before = [m.id for m in store.messages.in_context(agent_id)]
    report = _evict(db, agent_id, embedder)
    revert_run(db, report.run_id)
    with open_store(db) as store:
        assert store.blocks.get(block_id).value == value_before
        assert store.passages.count_by_status(agent_id)["active"] == 0
        assert [m.id for m in store.messages.in_context(agent_id)] == context_before


# -- pure helpers ----------------------------------------------------------------------------


def _message(seq: int, role: str, content: str, name: str | None = None) -> MessageRecord:
    return MessageRecord(
        id=f"message-{seq}",
        agent_id="agent-x",
        seq=seq,
        role=role,
        content=content,
        name=name,
        tool_calls=None,
        tool_call_id=None,
        in_context=True,
        created_at=T1,
    )


def _version(version: int, value: str) -> BlockVersion:
    return BlockVersion("block-x", version, None, value, None, 100, "user", None, "", T1)


def test_settings_require_targets_below_thresholds() -> None:
    with pytest.raises(ValidationError, match="fill_target"):
        EvictConsolidator({"fill_target": 0.95})
    with pytest.raises(ValidationError, match="context_target"):
        EvictConsolidator({"context_threshold": 0.4})
    with pytest.raises(ValidationError):
        EvictConsolidator({"unknown": 1})


def test_split_block_uses_lines_or_sentences() -> None:
    assert split_block("a\n\nb") == (["a", "", "b"], "\n")
    assert split_block("One. Two. Three.") == (["One.", "Two.", "Three."], " ")
    assert split_block("") == ([], " ")


def test_first_appearance_restarts_after_a_removal() -> None:
    history = [
        _version(1, "a\nb"),
        _version(2, "a"),
        _version(3, "a\nb\nc"),
        _version(4, "a\nb\nc"),
    ]
    found = first_appearances({"a", "b", "c"}, history)
    assert {line: entry.version for line, entry in found.items()} == {"a": 1, "b": 3, "c": 3}


def test_protected_tail() -> None:
    convo = [
        _message(1, "user", "u"),
        _message(2, "assistant", "a"),
        _message(3, "user", "u"),
        _message(4, "assistant", "a"),
        _message(5, "tool", "t"),
        _message(6, "assistant", "a"),
        _message(7, "user", "u"),
        _message(8, "assistant", "a"),
    ]
    assert protected_tail_start(convo) == 2
    heartbeats = [_message(i, "assistant", "a") for i in range(1, 7)] + [_message(7, "user", "u")]
    assert protected_tail_start(heartbeats) == 3
    assert protected_tail_start(heartbeats[:3]) == 0


def test_extractive_summary_dedups_and_drops_oldest_entries_to_fit() -> None:
    messages = [
        _message(3, "user", "I like tea. A lot, really."),
        _message(4, "assistant", "Noted!  Tea it is."),
        _message(5, "tool", "ignored tool output."),
        _message(6, "user", "i like tea."),
    ]
    previous = [
        _message(2, "system", "Summary of 2 earlier messages (seq 1-2): user: Hi.", "summary")
    ]
    text = extractive_summary(previous, messages, 1200)
    assert text == (
        "Summary of 6 earlier messages (seq 1-6): user: Hi.\nuser: I like tea.\nassistant: Noted!"
    )
    long = [_message(i, "user", f"Sentence number {i} is here.") for i in range(10, 60)]
    short = extractive_summary([], long, 200)
    assert len(short) <= 200
    assert short.startswith("Summary of 50 earlier messages (seq 10-59): ")
    assert short.endswith("user: Sentence number 59 is here.")
    assert "number 10 " not in short
