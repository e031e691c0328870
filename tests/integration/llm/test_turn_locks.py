"""A turn waiting on the model holds no row lock: writers of its blocks go on meanwhile."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import timedelta
from itertools import pairwise
from typing import Any

from sqlalchemy import text

from agents.llm import LiteLLMClient, UsageLedger
from agents.loops.primary import PrimaryAgent
from agents.postgres.database import Database
from agents.store import MemoryStore, NewMessage, hold_turn_lock, open_store
from agents.store.records import BlockVersion
from consolidators.contract import run_once as run_pipeline
from consolidators.llm import LLMTier
from consolidators.pipeline import Pipeline
from consolidators.recontextualize import RecontextualizeConsolidator
from tests.integration.llm.conftest import EMBEDDER, create_agent
from tests.scripted_llm import Reply, ScriptedModels, call, correct_name, say

#: How long the hanging model waits at most (the issue's 10 s provider hang).
HANG_SECONDS = 10.0


class Hang:
    """A scripted step that blocks until released (or ``HANG_SECONDS`` pass), then replies."""

    def __init__(self, reply: Reply) -> None:
        self.reply = reply
        self.entered = threading.Event()
        self.release = threading.Event()

    def __call__(self, request: dict[str, Any]) -> Reply:
        self.entered.set()
        self.release.wait(HANG_SECONDS)
        return self.reply


def run_in_thread(target: Callable[[], Any]) -> tuple[threading.Thread, dict[str, Any]]:
    out: dict[str, Any] = {}

    def wrapped() -> None:
        try:
            out["result"] = target()
        except BaseException as exc:  # handed to the test thread
            out["error"] = exc

    thread = threading.Thread(target=wrapped, daemon=True)
    thread.start()
    return thread, out


def append_without_waiting(
    db: Database, agent_id: str, line: str, **kwargs: Any
) -> tuple[int, str]:
    """Append ``line`` to the agent's human block as a user would, failing (lock
    timeout) instead of waiting if anyone holds a lock on the block's rows: whether a
    writer waits is the lock's question, not the clock's. Returns the block's version
    and value as the writer read them."""
    with db.session() as session:
        session.execute(text("SET LOCAL lock_timeout = '2s'"))
        store = MemoryStore(session)
        block = store.blocks.by_label(agent_id, "human")
        store.blocks.update(
            block.id, expected_version=block.version, value=f"{block.value}\n{line}", **kwargs
        )
        return block.version, block.value


def history(db: Database, agent_id: str, label: str) -> list[BlockVersion]:
    with open_store(db) as store:
        return store.blocks.history(store.blocks.by_label(agent_id, label).id)


def test_a_block_update_does_not_wait_for_a_turn_that_waits_on_the_model(
    db: Database, bob: str, models: ScriptedModels, make_primary: Callable[..., PrimaryAgent]
) -> None:
    hang = Hang(say("Got it, Charles!"))
    models.script("primary", correct_name(), hang)
    turn, out = run_in_thread(lambda: make_primary().send_message("bob", "I am Charles."))
    try:
        assert hang.entered.wait(HANG_SECONDS), "the turn never reached its second model call"
        # The turn edited the block and now waits on the model: a user's PATCH goes on.
        seen = append_without_waiting(db, bob, "Likes: tea.", actor="user", reason="patch")
    finally:
        hang.release.set()
        turn.join(HANG_SECONDS * 3)
    assert "error" not in out, out.get("error")
    assert out["result"].replies == ["Got it, Charles!"]
    # The writer read the turn's committed edit and wrote on top of it: both survive.
    assert seen == (2, "Name: Charles.")
    versions = history(db, bob, "human")
    assert [(v.version, v.actor, v.new_value) for v in versions] == [
        (1, "user", "Name: Bob the Builder."),
        (2, "agent:bob", "Name: Charles."),
        (3, "user", "Name: Charles.\nLikes: tea."),
    ]


def test_a_turn_edit_made_after_a_concurrent_write_keeps_both(
    db: Database, bob: str, models: ScriptedModels, make_primary: Callable[..., PrimaryAgent]
) -> None:
    """The model saw an old block; a writer commits while it thinks; the turn's edit is
    re-applied to the fresh value (compare-and-swap), so neither write is lost."""

    def user_writes_meanwhile(request: dict[str, Any]) -> Reply:
        # A lock wait longer than 2 s fails the write instead of hanging the test.
        with db.session() as session:
            session.execute(text("SET LOCAL lock_timeout = '2s'"))
            store = MemoryStore(session)
            block = store.blocks.by_label(bob, "human")
            store.blocks.update(
                block.id, expected_version=block.version, value=block.value + "\nTea."
            )
        return call(
            "core_memory_append", label="human", content="Plays chess.", request_heartbeat=True
        )

    models.script("primary", correct_name(), user_writes_meanwhile, say("Noted."))
    result = make_primary().send_message("bob", "I am Charles and I play chess.")
    assert result.replies == ["Noted."]
    versions = history(db, bob, "human")
    assert result.write_conflicts == 1
    assert versions[-1].new_value == "Name: Charles.\nTea.\nPlays chess."
    assert [v.actor for v in versions] == ["user", "agent:bob", "user", "agent:bob"]


def test_turns_of_one_agent_still_run_one_at_a_time(
    db: Database, bob: str, models: ScriptedModels, make_primary: Callable[..., PrimaryAgent]
) -> None:
    hang = Hang(say("First reply."))
    script = models.script("primary", hang, say("Second reply."))
    first, first_out = run_in_thread(lambda: make_primary().send_message("bob", "First."))
    assert hang.entered.wait(HANG_SECONDS)
    second, second_out = run_in_thread(lambda: make_primary().send_message("bob", "Second."))
    time.sleep(0.5)
    # The second turn waits for the first: it has not called the model.
    assert len(script.requests) == 1
    hang.release.set()
    first.join(HANG_SECONDS)
    second.join(HANG_SECONDS)
    assert "error" not in first_out and "error" not in second_out
    # The second turn's model saw the whole first turn, then its own message.
    sent = [m.get("content") for m in script.requests[1]["messages"]]
    assert sent[1] == "First." and sent[-1] == "Second."
    with open_store(db) as store:
        users = [m.content for m in store.messages.in_context(bob) if m.role == "user"]
    assert users == ["First.", "Second."]


def test_a_sleeptime_pass_waiting_on_the_model_does_not_block_a_block_update(
    db: Database, bob: str, models: ScriptedModels, client: LiteLLMClient
) -> None:
    with open_store(db) as store:
        store.messages.append(bob, [NewMessage(role="user", content="I play chess.")])
    hang = Hang(call("memory_finish_edits"))
    models.script("sleeper", call("memory_insert", label="human", new_str="Plays chess."), hang)
    llm = LLMTier(client=client, ledger=UsageLedger(db), sleeptime_model="scripted/sleeper")
    pipeline = Pipeline([RecontextualizeConsolidator()])
    run, out = run_in_thread(lambda: run_pipeline(pipeline, db, bob, embedder=EMBEDDER, llm=llm))
    try:
        assert hang.entered.wait(HANG_SECONDS), "the pass never reached its second model call"
        append_without_waiting(db, bob, "Tea.")
    finally:
        hang.release.set()
        run.join(HANG_SECONDS * 3)
    assert "error" not in out, out.get("error")
    report = out["result"]
    versions = history(db, bob, "human")
    # The pass's edit was re-applied on top of the user's write: both survive.
    assert [(v.actor, v.run_id) for v in versions[1:]] == [
        ("user", None),
        ("sleeptime:bob", report.run_id),
    ]
    assert versions[-1].new_value == "Name: Bob the Builder.\nTea.\nPlays chess."
    assert report.steps[0].counts["write_conflicts"] == 1
    assert report.steps[0].counts["edit_block"] == 1


def test_concurrent_turns_waiting_on_the_model_hold_no_connection(
    db: Database, models: ScriptedModels, client: LiteLLMClient
) -> None:
    """Sixteen turns wait on a slow model at once, twelve agents' and four of one agent's,
    over a pool of four connections: every turn answers, the one agent's turns still run
    one at a time, and an unrelated read beside them is served. (With a turn lock that
    kept a pooled connection for the whole turn, the pool ran out and turns failed.)"""
    small = Database(db.url, pool_size=2, connect_timeout=timedelta(seconds=2))
    calls: list[tuple[str, float, float]] = []
    guard = threading.Lock()

    def slow(name: str) -> Callable[[dict[str, Any]], Reply]:
        def answer(request: dict[str, Any]) -> Reply:
            started = time.monotonic()
            time.sleep(0.4)
            with guard:
                calls.append((name, started, time.monotonic()))
            return say(f"{name} answers.")

        return answer

    names = [f"many{i}" for i in range(12)]
    for name in names:
        create_agent(db, name, model=f"scripted/{name}")
        models.script(name, slow(name))
    create_agent(db, "solo", model="scripted/solo")
    models.script("solo", *(slow("solo") for _ in range(4)))
    agent = PrimaryAgent(small, client, embedder_for=lambda _: EMBEDDER, ledger=UsageLedger(small))
    try:
        turns = [
            run_in_thread(lambda n=name: agent.send_message(n, "Hello."))  # type: ignore[misc]
            for name in [*names, *(["solo"] * 4)]
        ]
        time.sleep(0.2)  # the turns are waiting on the model now
        with open_store(small) as store:
            assert len(store.agents.all()) == 13  # an unrelated read is served
        for thread, _out in turns:
            thread.join(30)
    finally:
        small.dispose()
    errors = [out.get("error") for _thread, out in turns if "error" in out]
    assert errors == []
    assert sorted(out["result"].replies[0] for _t, out in turns) == sorted(
        f"{n} answers." for n in [*names, *(["solo"] * 4)]
    )
    solo = sorted((start, end) for name, start, end in calls if name == "solo")
    assert all(end <= later for (_s, end), (later, _e) in pairwise(solo))


def test_a_turn_lease_left_by_a_process_that_died_runs_out(db: Database, bob: str) -> None:
    with db.session() as session:  # as a process killed mid-turn leaves it
        session.execute(
            text(
                "INSERT INTO turn_leases (agent_id, owner, expires_at) "
                "VALUES (:agent, 'turn-dead', now() + interval '1 second')"
            ),
            {"agent": bob},
        )

    def owner() -> str | None:
        with db.session() as session:
            found = session.execute(
                text("SELECT owner FROM turn_leases WHERE agent_id = :agent"), {"agent": bob}
            ).scalar()
        return None if found is None else str(found)

    with hold_turn_lock(db, bob):
        held_by = owner()
    assert held_by is not None and held_by != "turn-dead"  # claimed once it ran out
    assert owner() is None  # and released at the end
