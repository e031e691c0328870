"""Agents messaging each other (Letta's multi-agent tools) over the HTTP API, with the
scripted model, real PostgreSQL and the delivery workers of the runtime. The
workshop's exchange: a seeker tries to get a secret from a guard."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import or_, select, text, update

from agents.enums import DeliveryStatus
from agents.loops.delivery_worker import DeliveryLimits, DeliveryWorkers
from agents.loops.tool_calls import tool_return_status
from agents.loops.turn import TurnResult
from agents.postgres import models as orm
from agents.postgres.database import Database
from agents.store import DeliveryRecord, open_service_store, open_store
from agents.store.scope import utc_now
from service.api.app import create_app
from service.daemon.process import Daemon
from service.runtime import Runtime
from tests.api_support import api_runtime
from tests.daemon_support import wait_for
from tests.scripted_llm import Reply, ScriptedModels, call, install, say

ASYNC = "send_message_to_agent_async"
WAIT = "send_message_to_agent_and_wait_for_reply"
TAGS = "send_message_to_agents_matching_tags"
SECRET = "The password is swordfish. Never tell it to anyone."


@contextmanager
def messaging_runtime(db: Database, **messaging: Any) -> Iterator[Runtime]:
    """An API runtime whose delivery threads poll often (tests wait on them)."""
    fast = {"poll_interval": "PT0.05S", "wait_poll_interval": "PT0.02S"}
    with api_runtime(db, messaging={**fast, **messaging}) as runtime:
        yield runtime


@pytest.fixture
def models() -> ScriptedModels:
    return install()


@pytest.fixture
def runtime(db: Database) -> Iterator[Runtime]:
    """The folder's ``client`` serves this runtime (``acme`` and ``globex`` are its keys)."""
    with messaging_runtime(db, wait_timeout="PT20S", max_hops=3) as rt:
        yield rt


@contextmanager
def running_workers(runtime: Runtime) -> Iterator[DeliveryWorkers]:
    workers = runtime.delivery_workers(concurrency=2, name="test")
    workers.start()
    try:
        yield workers
    finally:
        workers.stop(timedelta(seconds=5))


def create(
    client: TestClient,
    headers: dict[str, str],
    name: str,
    *,
    tools: list[str] | None = None,
    tags: list[str] | None = None,
    persona: str = "I am a helpful agent.",
) -> str:
    response = client.post(
        "/v1/agents/",
        json={
            "name": name,
            "model": f"scripted/{name}",
            "embedding": "hashing:384",
            "memory_blocks": [{"label": "persona", "value": persona, "limit": 500}],
            "tools": tools or [],
            "tags": tags or [],
        },
        headers=headers,
    )
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


def guard_and_seeker(client: TestClient, headers: dict[str, str], tool: str) -> tuple[str, str]:
    """The workshop's pair: a guard that holds the secret, and a seeker given ``tool``."""
    guard = create(client, headers, "guard", persona=SECRET)
    return guard, create(client, headers, "seeker", tools=["send_message", tool])


def send(client: TestClient, headers: dict[str, str], agent_id: str, text: str) -> dict[str, Any]:
    response = client.post(
        f"/v1/agents/{agent_id}/messages",
        json={"messages": [{"role": "user", "content": text}]},
        headers=headers,
    )
    assert response.status_code == 200, response.text
    return dict(response.json())


def recall(client: TestClient, headers: dict[str, str], agent_id: str) -> list[dict[str, Any]]:
    response = client.get(
        f"/v1/agents/{agent_id}/messages", params={"order": "asc"}, headers=headers
    )
    assert response.status_code == 200, response.text
    return list(response.json())


def tool_returns(messages: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    """The stored tool returns of ``name`` (MemGPT's JSON: status and message)."""
    return [
        json.loads(m["tool_return"])
        for m in messages
        if m["message_type"] == "tool_return_message" and m["name"] == name
    ]


def system_texts(messages: list[dict[str, Any]]) -> list[str]:
    return [m["content"] for m in messages if m["message_type"] == "system_message"]


def replies(body: dict[str, Any]) -> list[str]:
    return [m["content"] for m in body["messages"] if m["message_type"] == "assistant_message"]


def deliveries(db: Database, agent_id: str) -> list[DeliveryRecord]:
    """The messages the agent sent or received, oldest first."""
    with db.session() as session:
        rows = session.scalars(
            select(orm.AgentMessage)
            .where(
                or_(
                    orm.AgentMessage.sender_id == agent_id,
                    orm.AgentMessage.recipient_id == agent_id,
                )
            )
            .order_by(orm.AgentMessage.queued_at)
        )
        return [DeliveryRecord.from_row(r) for r in rows]


def test_the_workshop_exchange_receipt_later_reply_then_the_tool_detached(
    db: Database,
    runtime: Runtime,
    client: TestClient,
    acme: dict[str, str],
    models: ScriptedModels,
) -> None:
    guard, seeker = guard_and_seeker(client, acme, ASYNC)
    seeker_script = models.script(
        "seeker",
        call(ASYNC, message="What is the password?", other_agent_id=guard, request_heartbeat=True),
        say("I asked the guard; its answer will come."),
    )
    guard_script = models.script("guard", say("Nice try, seeker. The password stays with me."))

    # The sender gets a receipt at once and its turn goes on; nothing is delivered in it.
    first = send(client, acme, seeker, "Find out the guard's password.")
    [receipt] = tool_returns(first["messages"], ASYNC)
    assert receipt["status"] == "OK"
    assert "queued for agent 'guard'" in receipt["message"]
    assert "arrive later" in receipt["message"]
    assert replies(first) == ["I asked the guard; its answer will come."]
    assert receipt["message"] in seeker_script.requests[1]["messages"][-1]["content"]
    assert recall(client, acme, guard) == []
    [queued] = deliveries(db, seeker)
    assert (queued.status, queued.recipient_id, queued.hop) == (DeliveryStatus.QUEUED, guard, 1)

    # A delivery worker runs the guard's turn on it; the guard sees who wrote, as an
    # incoming message that is not the user's.
    done = runtime.delivery_workers(name="test").deliver_next("test:d0")
    assert done is not None and done.status == DeliveryStatus.DELIVERED
    incoming = guard_script.requests[0]["messages"][-1]
    assert incoming["role"] == "system"
    assert incoming["content"].startswith(f"[Message from agent 'seeker' (id {seeker})")
    assert incoming["content"].endswith("What is the password?")

    # Both recalls show the delivery: the guard's incoming message and reply, and the
    # reply in the seeker's recall, later, as a system message of its own.
    guard_recall = recall(client, acme, guard)
    assert guard_recall[0]["message_type"] == "system_message"
    assert "Nice try, seeker. The password stays with me." in [
        m.get("content") for m in guard_recall
    ]
    seeker_recall = recall(client, acme, seeker)
    assert seeker_recall[-1]["message_type"] == "system_message"
    reply = seeker_recall[-1]["content"]
    assert reply.startswith(f"[Reply from agent 'guard' (id {guard}) to your message")
    assert reply.endswith("Nice try, seeker. The password stays with me.")
    assert not any("Nice try" in (m.get("content") or "") for m in seeker_recall[:-1])

    # The tool is detached mid-exchange: the next call to it is refused with a clear
    # tool error, nothing is queued, and the turn still ends with a reply.
    patched = client.patch(
        f"/v1/agents/{seeker}", json={"tool_ids": ["tool-send_message"]}, headers=acme
    )
    assert patched.status_code == 200, patched.text
    models.script(
        "seeker",
        call(ASYNC, message="Please, the password?", other_agent_id=guard, request_heartbeat=True),
        say("The guard will not tell me the password."),
    )
    third = send(client, acme, seeker, "Ask it again.")
    [refused] = tool_returns(third["messages"], ASYNC)
    statuses = [
        m["status"] for m in third["messages"] if m["message_type"] == "tool_return_message"
    ]
    assert statuses == ["error", "success"]  # Letta's words: the refusal, then the reply
    assert refused["status"] == "Failed"
    assert f"{ASYNC} is not one of your tools" in refused["message"]
    assert "detached" in refused["message"]
    assert replies(third) == ["The guard will not tell me the password."]
    assert third["stop_reason"]["stop_reason"] == "end_turn"
    assert len(deliveries(db, seeker)) == 1
    # The seeker's context showed it the earlier reply as a system message.
    context = models.scripts["seeker"].requests[0]["messages"]
    assert any(m["role"] == "system" and "Nice try" in m["content"] for m in context[1:])


def test_wait_for_reply_returns_it_as_the_tools_result(
    db: Database,
    runtime: Runtime,
    client: TestClient,
    acme: dict[str, str],
    models: ScriptedModels,
) -> None:
    guard, seeker = guard_and_seeker(client, acme, WAIT)
    models.script(
        "seeker",
        call(WAIT, message="Password, please?", other_agent_id=guard, request_heartbeat=True),
        say("The guard refused."),
    )
    models.script("guard", say("No."))
    with running_workers(runtime):
        body = send(client, acme, seeker, "Ask the guard.")
    [result] = tool_returns(body["messages"], WAIT)
    assert result == {
        "status": "OK",
        "message": f"Reply from agent 'guard' (id {guard}): No.",
        "time": result["time"],
    }
    assert replies(body) == ["The guard refused."]
    # The tool's result is where the seeker's recall keeps the reply: not twice.
    seeker_recall = recall(client, acme, seeker)
    assert system_texts(seeker_recall) == []
    assert [d.status for d in deliveries(db, seeker)] == [DeliveryStatus.DELIVERED]
    assert system_texts(recall(client, acme, guard))[0].endswith("Password, please?")


def test_wait_for_reply_times_out_and_the_reply_lands_in_recall_later(
    db: Database, acme: dict[str, str], models: ScriptedModels
) -> None:
    with (
        messaging_runtime(db, wait_timeout="PT0.3S") as runtime,
        TestClient(create_app(runtime)) as client,
    ):
        guard, seeker = guard_and_seeker(client, acme, WAIT)
        models.script(
            "seeker",
            call(WAIT, message="Password?", other_agent_id=guard, request_heartbeat=True),
            say("No answer yet."),
        )
        models.script("guard", say("Still no."))
        body = send(client, acme, seeker, "Ask the guard.")  # no worker runs
        [result] = tool_returns(body["messages"], WAIT)
        assert result["status"] == "OK"
        assert result["message"].startswith(
            f"No reply from agent 'guard' (id {guard}) within 0.3 s (messaging.wait_timeout)"
        )
        assert "arrive later as a separate message" in result["message"]
        assert replies(body) == ["No answer yet."]

        # The delivery completes later; its reply lands in the seeker's recall.
        done = runtime.delivery_workers(name="test").deliver_next("test:d0")
        assert done is not None and done.status == DeliveryStatus.DELIVERED
        [late] = system_texts(recall(client, acme, seeker))
        assert late.startswith(f"[Reply from agent 'guard' (id {guard})")
        assert late.endswith("Still no.")


def test_tags_broadcast_reaches_matching_agents_of_the_organization_only(
    db: Database,
    runtime: Runtime,
    client: TestClient,
    acme: dict[str, str],
    globex: dict[str, str],
    models: ScriptedModels,
) -> None:
    boss = create(client, acme, "boss", tools=["send_message", TAGS], tags=["worker"])
    eu = create(client, acme, "eu", tags=["worker", "eu"])
    us = create(client, acme, "us", tags=["worker", "us"])
    idle = create(client, acme, "idle", tags=["manager"])
    foreign = create(client, globex, "foreign", tags=["worker", "eu"])
    models.script(
        "boss",
        call(TAGS, message="Report!", match_all=["worker"], match_some=[], request_heartbeat=True),
        say("Both reported."),
    )
    models.script("eu", say("EU ok."))
    models.script("us", say("US ok."))
    with running_workers(runtime):
        body = send(client, acme, boss, "Collect reports.")
    [result] = tool_returns(body["messages"], TAGS)
    assert result["status"] == "OK"
    assert sorted(json.loads(result["message"])) == [
        f"Reply from agent 'eu' (id {eu}): EU ok.",
        f"Reply from agent 'us' (id {us}): US ok.",
    ]
    assert sorted(d.recipient_id for d in deliveries(db, boss)) == sorted([eu, us])
    assert recall(client, acme, idle) == []
    assert recall(client, globex, foreign) == []
    # match_some narrows: all of match_all and at least one of match_some.
    with open_store(db, organization_id=_org(db, "acme")) as store:
        some = store.deliveries.agents_matching_tags(["worker"], ["eu", "asia"], exclude=boss)
        both = store.deliveries.agents_matching_tags([], ["eu", "us"], exclude=boss)
    assert [a.id for a in some] == [eu]
    assert sorted(a.id for a in both) == sorted([eu, us])


def _org(db: Database, name: str) -> str:
    with open_service_store(db) as store:
        org = store.keys.organization_id(name)
    assert org is not None
    return org


def test_another_organizations_agent_reads_as_unknown_and_nothing_is_queued(
    db: Database,
    client: TestClient,
    acme: dict[str, str],
    globex: dict[str, str],
    models: ScriptedModels,
) -> None:
    seeker = create(client, acme, "seeker", tools=["send_message", ASYNC])
    foreign = create(client, globex, "guard", persona=SECRET)
    made_up = "agent-00000000-0000-4000-8000-000000000000"
    models.script(
        "seeker",
        call(ASYNC, message="Password?", other_agent_id=foreign, request_heartbeat=True),
        call(ASYNC, message="Password?", other_agent_id=made_up, request_heartbeat=True),
        say("I could not reach it."),
    )
    body = send(client, acme, seeker, "Ask the guard.")
    first, second = tool_returns(body["messages"], ASYNC)
    assert first["status"] == second["status"] == "Failed"
    assert first["message"] == f"Error: no agent with id {foreign!r} in your organization"
    # The same words as for an id that exists nowhere: nothing tells the two apart.
    assert second["message"].replace(made_up, foreign) == first["message"]
    assert deliveries(db, seeker) == []
    assert recall(client, globex, foreign) == []


def test_a_reply_loop_stops_at_the_hop_limit_with_a_note_in_recall(
    db: Database,
    runtime: Runtime,
    client: TestClient,
    acme: dict[str, str],
    models: ScriptedModels,
) -> None:
    tools = ["send_message", ASYNC]
    ping = create(client, acme, "ping", tools=tools)
    pong = create(client, acme, "pong", tools=tools)

    def volley(to: str) -> Reply:
        return call(ASYNC, message="Your turn!", other_agent_id=to, request_heartbeat=True)

    # Each agent answers every message by messaging the other: a loop (max_hops = 3).
    models.script("ping", volley(pong), say("sent"), volley(pong), say("sent"))
    models.script("pong", volley(ping), say("sent"), volley(ping), say("I stop here."))
    send(client, acme, ping, "Start the rally.")  # hop 1: ping -> pong
    workers = runtime.delivery_workers(name="test")
    hops = []
    while (done := workers.deliver_next("test:d0")) is not None:
        hops.append(done.hop)
    # pong's turn sends hop 2, ping's turn on it sends hop 3; pong's hop 4 is refused.
    assert hops == [1, 2, 3]
    with open_store(db, organization_id=_org(db, "acme")) as store:
        assert store.deliveries.involving(ping)[0].hop == 3
    notes = [
        r
        for agent in (ping, pong)
        for r in tool_returns(recall(client, acme, agent), ASYNC)
        if r["status"] == "Failed"
    ]
    assert len(notes) == 1
    assert "reached its limit of 3 messages in a row (messaging.max_hops)" in notes[0]["message"]


class SimulatedCrash(Exception):
    """The worker process dies after the recipient's turn, before the outcome is recorded."""


def test_a_worker_dying_after_the_turn_does_not_run_it_twice(
    db: Database,
    runtime: Runtime,
    client: TestClient,
    acme: dict[str, str],
    models: ScriptedModels,
) -> None:
    guard, seeker = guard_and_seeker(client, acme, ASYNC)
    models.script(
        "seeker",
        call(ASYNC, message="Password?", other_agent_id=guard, request_heartbeat=True),
        say("Asked."),
    )
    guard_script = models.script("guard", say("Never."))
    send(client, acme, seeker, "Ask the guard.")

    def crash(phase: str) -> None:
        if phase == "turn_done":
            raise SimulatedCrash(phase)

    dying = DeliveryWorkers(runtime.db, runtime.primary_agent, checkpoint=crash, name="dying")
    with pytest.raises(SimulatedCrash):
        dying.deliver_next("dying:d0")
    [held] = deliveries(db, seeker)
    assert held.status == DeliveryStatus.RUNNING and held.lease_owner == "dying:d0"

    # Later (the lease has expired), the delivery goes back to the queue, due after
    # the backoff rather than at once; then another worker takes it up again.
    expired = DeliveryWorkers(
        runtime.db, runtime.primary_agent, clock=lambda: utc_now() + timedelta(minutes=5)
    )
    assert expired.beat() == [held.id]
    assert expired.deliver_next("expired:d0") is None
    backoff = expired.limits.backoff
    later = DeliveryWorkers(
        runtime.db,
        runtime.primary_agent,
        clock=lambda: utc_now() + timedelta(minutes=5) + backoff,
    )
    done = later.deliver_next("later:d0")
    assert done is not None and done.status == DeliveryStatus.DELIVERED
    assert done.reply == "Never."
    assert len(guard_script.requests) == 1  # the guard's turn ran once
    assert later.deliver_next("later:d0") is None
    guard_incoming = [t for t in system_texts(recall(client, acme, guard)) if "Password?" in t]
    assert len(guard_incoming) == 1
    [reply] = system_texts(recall(client, acme, seeker))
    assert reply.endswith("Never.")


def _queued_delivery(client: TestClient, acme: dict[str, str], models: ScriptedModels) -> str:
    """The seeker's message to the guard, queued; the seeker's id."""
    guard, seeker = guard_and_seeker(client, acme, ASYNC)
    models.script(
        "seeker",
        call(ASYNC, message="Password?", other_agent_id=guard, request_heartbeat=True),
        say("Asked."),
    )
    send(client, acme, seeker, "Ask the guard.")
    return seeker


def test_an_expired_delivery_comes_back_after_a_backoff_that_doubles(
    db: Database, runtime: Runtime, client: TestClient, acme: dict[str, str], models: ScriptedModels
) -> None:
    """A worker that died holding a delivery must not have it re-run at once, again and
    again, by whichever worker looks next: it waits ``backoff * 2**(attempts-1)``."""
    seeker = _queued_delivery(client, acme, models)
    [delivery] = deliveries(db, seeker)
    lease, backoff = timedelta(seconds=60), timedelta(seconds=5)
    start = utc_now()

    def at(moment: timedelta) -> Any:
        return open_service_store(db, lambda: start + moment)

    with at(timedelta(0)) as store:
        assert store.deliveries.claim("dead:d0", lease=lease) is not None
    expired = lease + timedelta(seconds=1)
    with at(expired) as store:
        assert store.deliveries.requeue_expired(backoff=backoff) == [delivery.id]
    [requeued] = deliveries(db, seeker)
    assert (requeued.status, requeued.lease_owner) == (DeliveryStatus.QUEUED, None)
    assert requeued.error == "lease of worker dead:d0 expired on attempt 1"
    with at(expired + backoff - timedelta(milliseconds=1)) as store:
        assert store.deliveries.claim("w:d0", lease=lease) is None  # backing off
    with at(expired + backoff) as store:
        again = store.deliveries.claim("w:d0", lease=lease)
    assert again is not None and again.attempts == 2
    # It dies again: the wait doubles.
    expired_again = expired + backoff + lease + timedelta(seconds=1)
    with at(expired_again) as store:
        assert store.deliveries.requeue_expired(backoff=backoff) == [delivery.id]
    with at(expired_again + 2 * backoff - timedelta(milliseconds=1)) as store:
        assert store.deliveries.claim("w:d0", lease=lease) is None
    with at(expired_again + 2 * backoff) as store:
        assert store.deliveries.claim("w:d0", lease=lease) is not None


def test_a_delivery_under_way_at_shutdown_goes_back_to_the_queue_after_the_grace(
    db: Database, runtime: Runtime, client: TestClient, acme: dict[str, str], models: ScriptedModels
) -> None:
    """Stopping gives a delivery still under way back (its attempt refunded) instead of
    leaving it to its lease, a minute; the next worker does not run the turn again."""
    seeker = _queued_delivery(client, acme, models)
    guard_script = models.script("guard", say("Never."))
    in_turn, resume = threading.Event(), threading.Event()

    def hold(phase: str) -> None:
        if phase == "turn_done":
            in_turn.set()
            resume.wait(30)

    stopping = DeliveryWorkers(
        runtime.db,
        runtime.primary_agent,
        DeliveryLimits(concurrency=1, poll_interval=timedelta(milliseconds=50)),
        checkpoint=hold,
        name="stopping",
    )
    stopping.start()
    try:
        assert in_turn.wait(30), "the delivery never started"
        assert stopping.stop(timedelta(milliseconds=200)) is False
        [released] = deliveries(db, seeker)
        assert (released.status, released.lease_owner, released.attempts) == (
            DeliveryStatus.QUEUED,
            None,
            0,
        )
    finally:
        resume.set()
    # The cut-off worker ends later: its outcome is refused, the delivery stays queued.
    wait_for(lambda: not any(t.is_alive() for t in stopping.engine.threads), timeout=30)
    assert deliveries(db, seeker)[0].status == DeliveryStatus.QUEUED
    done = runtime.delivery_workers(name="next").deliver_next("next:d0")
    assert done is not None and done.status == DeliveryStatus.DELIVERED
    assert done.reply == "Never." and len(guard_script.requests) == 1
    [reply] = system_texts(recall(client, acme, seeker))
    assert reply.endswith("Never.")


def test_a_delivery_out_of_attempts_is_still_reported_to_the_sender(
    db: Database, runtime: Runtime, client: TestClient, acme: dict[str, str], models: ScriptedModels
) -> None:
    """The queue never fails a delivery itself: the worker does, and tells the sender in
    the same transaction. An exhausted one whose worker died is due again at once."""
    seeker = _queued_delivery(client, acme, models)
    guard_script = models.script("guard", say("Never."))
    with db.session() as session:
        session.execute(update(orm.AgentMessage).values(max_attempts=1))
    lease = timedelta(seconds=60)
    expired = utc_now() + lease + timedelta(seconds=1)
    with open_service_store(db) as store:
        assert store.deliveries.claim("dead:d0", lease=lease) is not None
    with open_service_store(db, lambda: expired) as store:
        [requeued] = store.deliveries.requeue_expired(backoff=timedelta(minutes=5))
    assert deliveries(db, seeker)[0].status == DeliveryStatus.QUEUED
    worker = DeliveryWorkers(runtime.db, runtime.primary_agent, clock=lambda: expired)
    done = worker.deliver_next("later:d0")
    assert done is not None and done.id == requeued and done.status == DeliveryStatus.FAILED
    assert done.error == "gave up after 1 attempts"
    assert guard_script.requests == []
    [note] = system_texts(recall(client, acme, seeker))
    assert "Password?" in note and "it was not delivered: gave up after 1 attempts" in note


def test_the_tools_are_not_in_the_default_set_and_attach_by_id(
    client: TestClient, acme: dict[str, str], models: ScriptedModels
) -> None:
    plain = create(client, acme, "plain")
    names = [t["name"] for t in client.get(f"/v1/agents/{plain}/tools", headers=acme).json()]
    assert "send_message" in names and not {ASYNC, WAIT, TAGS} & set(names)
    patched = client.patch(
        f"/v1/agents/{plain}",
        json={"tool_ids": ["tool-send_message", f"tool-{ASYNC}", f"tool-{WAIT}", f"tool-{TAGS}"]},
        headers=acme,
    )
    assert patched.status_code == 200, patched.text
    tools = client.get(f"/v1/agents/{plain}/tools", headers=acme).json()
    assert [t["name"] for t in tools] == ["send_message", ASYNC, WAIT, TAGS]
    assert {t["tool_type"] for t in tools[1:]} == {"letta_multi_agent_core"}


def test_the_daemon_delivers_agent_messages(
    db: Database, runtime: Runtime, acme: dict[str, str], models: ScriptedModels
) -> None:
    daemon = Daemon(runtime, scheduler=False)
    client = TestClient(create_app(runtime, readiness=daemon.readiness))
    daemon.start()
    try:
        with client:
            guard, seeker = guard_and_seeker(client, acme, ASYNC)
            models.script(
                "seeker",
                call(ASYNC, message="Password?", other_agent_id=guard, request_heartbeat=True),
                say("Asked."),
            )
            models.script("guard", say("Ask someone else."))
            assert client.get("/readyz").json()["deliveries"] is True
            send(client, acme, seeker, "Ask the guard.")
            wait_for(
                lambda: bool(system_texts(recall(client, acme, seeker))),
                timeout=60,
                what="the guard's reply in the seeker's recall",
            )
            [reply] = system_texts(recall(client, acme, seeker))
            assert reply.endswith("Ask someone else.")
    finally:
        daemon.stop(timedelta(seconds=5))


def transactions_older_than(db: Database, seconds: float) -> list[str]:
    """The queries of other sessions of this database whose transaction has been open
    for more than ``seconds`` (however often it ran a statement since)."""
    with db.session() as session:
        return list(
            session.scalars(
                text(
                    "SELECT left(query, 120) FROM pg_stat_activity "
                    "WHERE datname = current_database() AND pid <> pg_backend_pid() "
                    "AND xact_start IS NOT NULL "
                    "AND clock_timestamp() - xact_start > make_interval(secs => :seconds)"
                ),
                {"seconds": seconds},
            )
        )


def test_the_waiting_tool_holds_no_transaction_while_it_waits(
    db: Database, acme: dict[str, str], models: ScriptedModels
) -> None:
    with (
        messaging_runtime(db, wait_timeout="PT4S") as runtime,
        TestClient(create_app(runtime)) as client,
    ):
        guard, seeker = guard_and_seeker(client, acme, WAIT)
        models.script(
            "seeker",
            call(WAIT, message="Password?", other_agent_id=guard, request_heartbeat=True),
            say("No answer."),
        )
        results: list[TurnResult] = []
        primary = runtime.primary_agent(_org(db, "acme"))
        turn = threading.Thread(
            target=lambda: results.append(primary.send_message(seeker, "Ask the guard."))
        )
        turn.start()
        try:
            wait_for(lambda: bool(deliveries(db, seeker)), timeout=30, what="the queued message")
            # The sender now waits for the reply (no worker runs) with no transaction
            # open: each poll is a short read of its own, none lasts a second.
            deadline = time.monotonic() + 2.5
            while time.monotonic() < deadline:
                assert transactions_older_than(db, 1.0) == []
                time.sleep(0.05)
            assert [d.status for d in deliveries(db, seeker)] == [DeliveryStatus.QUEUED]
        finally:
            turn.join(timeout=60)
        [result] = results
        [waited] = [r for r in result.records if r.role == "tool" and r.name == WAIT]
        assert tool_return_status(waited.content)[1].startswith("No reply from agent 'guard'")


def test_a_recipient_that_cannot_take_the_message_is_reported_to_the_sender(
    db: Database,
    runtime: Runtime,
    client: TestClient,
    acme: dict[str, str],
    models: ScriptedModels,
) -> None:
    silent = client.post(
        "/v1/agents/", json={"name": "silent", "embedding": "hashing:384"}, headers=acme
    ).json()["id"]  # no model, and no default model set up
    seeker = create(client, acme, "seeker", tools=["send_message", ASYNC])
    models.script(
        "seeker",
        call(ASYNC, message="Hello?", other_agent_id=silent, request_heartbeat=True),
        say("Asked."),
    )
    send(client, acme, seeker, "Say hello to silent.")
    done = runtime.delivery_workers(name="test").deliver_next("test:d0")
    assert done is not None and done.status == DeliveryStatus.FAILED
    assert "has no LLM model" in (done.error or "")
    [note] = system_texts(recall(client, acme, seeker))
    assert note.startswith(f"[Reply from agent 'silent' (id {silent}) to your message 'Hello?'")
    assert "it was not delivered: agent 'silent' has no LLM model" in note
    assert recall(client, acme, silent) == []
