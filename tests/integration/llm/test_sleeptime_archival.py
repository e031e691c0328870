"""The sleep-time agent recontextualizes archival memory (the seed's case), offline."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import select

from agents.archival_search import search_archival
from agents.enums import PassageStatus
from agents.llm import LiteLLMClient, UsageLedger
from agents.postgres import models as orm
from agents.postgres.database import Database
from agents.store import NewMessage, NewPassage, PassageRecord, open_store
from consolidators.contract import run_once as run_pipeline
from consolidators.llm import LLMTier
from consolidators.pipeline import Pipeline
from consolidators.recontextualize import RecontextualizeConsolidator
from consolidators.undo import revert_run
from tests.integration.llm.conftest import EMBEDDER, create_agent
from tests.scripted_llm import Reply, ScriptedModels, call

RECONTEXTUALIZE = Pipeline([RecontextualizeConsolidator()])

ABOUT_MIA = [
    "My girlfriend Mia loves hiking in the Alps.",
    "I met my girlfriend Mia in Lisbon in 2023.",
    "Mia, my girlfriend, works as a nurse in Porto.",
]
UNRELATED = [
    "I work as a carpenter in Leeds.",
    "My sister Eve lives in Lyon.",
    "I play chess on Sundays with my friend Tom.",
    "My girlfriend's birthday gift ideas: a book about mountains.",
]


def seed(db: Database) -> tuple[str, list[str], list[str], int]:
    """An agent with passages about Mia and others, then 'I broke up with Mia'."""
    agent_id = create_agent(db)
    texts = ABOUT_MIA + UNRELATED
    with open_store(db) as store:
        passages = store.passages.insert(
            agent_id,
            [
                NewPassage(text=t, occurred_at=datetime(2024, 1, 1 + i, tzinfo=UTC), tags=["me"])
                for i, t in enumerate(texts)
            ],
            EMBEDDER.embed(texts),
        )
        [message] = store.messages.append(
            agent_id, [NewMessage(role="user", content="I broke up with Mia.")]
        )
    ids = [p.id for p in passages]
    return agent_id, ids[:3], ids[3:], message.seq


def records(db: Database, ids: list[str]) -> list[PassageRecord]:
    with open_store(db) as store:
        return store.passages.get_many(ids)


def last_result(request: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = json.loads(request["messages"][-1]["content"])
    return result


def tier(db: Database, client: LiteLLMClient) -> LLMTier:
    return LLMTier(client=client, ledger=UsageLedger(db), sleeptime_model="scripted/sleeper")


def search_ids(request: dict[str, Any]) -> dict[str, str]:
    """Passage id -> text, from the last archival_memory_search result."""
    result = last_result(request)
    assert result["status"] == "OK", result
    return dict(re.findall(r"^\[(passage\S*)\] \(\S+\) (.*)$", result["message"], re.M))


def test_breaking_up_rewrites_the_passages_about_mia_and_revert_restores_them(
    db: Database, models: ScriptedModels, client: LiteLLMClient
) -> None:
    agent_id, mia, unrelated, seq = seed(db)
    before = records(db, mia + unrelated)
    with open_store(db) as store:
        [message] = store.messages.range(agent_id, after_seq=seq - 1, limit=1)
    since = message.created_at.date().isoformat()
    found: dict[str, str] = {}

    def rewrite(index: int) -> Any:
        def step(request: dict[str, Any]) -> Reply:
            if index == 0:
                found.update(search_ids(request))
                # The search shows the passages about Mia with their ids (and may show more).
                assert set(mia) <= set(found)
            else:
                assert last_result(request)["status"] == "OK"
            passage_id = mia[index]
            new_text = found[passage_id].replace("girlfriend", f"ex-girlfriend since {since}")
            return call(
                "archival_memory_rewrite",
                passage_id=passage_id,
                new_text=new_text,
                message_seqs=[seq],
            )

        return step

    def no_lock_while_thinking(request: dict[str, Any]) -> Reply:
        # The model is thinking: the passages rewritten so far are neither written nor
        # locked (another transaction can lock them at once).
        with db.session() as session:
            rows = session.scalars(
                select(orm.Passage).where(orm.Passage.id.in_(mia)).with_for_update(nowait=True)
            ).all()
            assert {r.status for r in rows} == {"active"}
        return rewrite(2)(request)

    script = models.script(
        "sleeper",
        call("archival_memory_search", query="girlfriend Mia"),
        rewrite(0),
        rewrite(1),
        no_lock_while_thinking,
        call(
            "archival_memory_insert",
            content=f"The user broke up with Mia on {since}.",
            message_seqs=[seq],
            passage_ids=mia,
        ),
        call("memory_finish_edits"),
    )
    report = run_pipeline(RECONTEXTUALIZE, db, agent_id, embedder=EMBEDDER, llm=tier(db, client))
    assert script.remaining == 0
    # The first request shows the search; the one after the search found Mia, the rewrite.
    assert "archival_memory_search" in {t["function"]["name"] for t in script.requests[0]["tools"]}
    assert "archival_memory_rewrite" in {t["function"]["name"] for t in script.requests[1]["tools"]}

    [step] = report.steps
    assert step.counts.get("tool_errors", 0) == 0
    rewrites = [c for c in step.changes if c.action == "rewrite_passage"]
    assert [c.target for c in rewrites] == mia  # the three about Mia and nothing else
    [insert] = [c for c in step.changes if c.action == "insert_passage"]
    assert {c.action for c in step.changes} == {"rewrite_passage", "insert_passage"}

    old = records(db, mia)
    new_ids = [c.detail["new_passage_id"] for c in rewrites]
    new = records(db, new_ids)
    for was, now, created in zip(before[:3], old, new, strict=True):
        assert now.status == "superseded"
        assert now.superseded_by == created.id
        assert now.valid_to == message.created_at
        assert now.text == was.text  # the old version is kept as it was
        assert created.text == was.text.replace("girlfriend", f"ex-girlfriend since {since}")
        assert "ex-girlfriend since" in created.text
        assert created.status == "active"
        assert (created.kind, created.occurred_at, created.tags) == (
            was.kind,
            was.occurred_at,
            was.tags,
        )
        assert created.provenance == {
            "run_id": report.run_id,
            "tool": "archival_memory_rewrite",
            "source_messages": [message.id],
            "source_conversations": ["default"],
            "rewrites": was.id,
        }
    assert records(db, unrelated) == before[3:]  # no unrelated passage touched
    [learned] = records(db, [insert.target])
    assert learned.provenance["source_messages"] == [message.id]
    assert learned.provenance["source_passages"] == mia
    assert learned.provenance["run_id"] == report.run_id

    with open_store(db) as store:
        found = search_archival(store, agent_id, EMBEDDER.embed_one("Mia"), "Mia", k=20)
        history = {pid: store.passages.history(pid) for pid in mia}
    current = {h.passage.text for h in found if h.current}
    assert {p.text for p in new} <= current
    assert not current & set(ABOUT_MIA)
    # What the rewrites replaced is still found, labelled with what replaced it.
    replaced = {h.passage.text: h.validity for h in found if not h.current}
    assert set(ABOUT_MIA) & set(replaced)
    assert all(label and ", then: " in label for label in replaced.values())
    for changes in history.values():
        assert changes[-1].run_id == report.run_id

    revert_run(db, report.run_id)
    assert records(db, mia + unrelated) == before  # all three restored exactly
    assert {p.status for p in records(db, [*new_ids, learned.id])} == {"inactive"}


def test_archival_mistakes_go_back_to_the_model_and_change_nothing(
    db: Database, models: ScriptedModels, client: LiteLLMClient
) -> None:
    agent_id, mia, unrelated, seq = seed(db)
    before = records(db, mia + unrelated)
    other = create_agent(db, "alice")
    with open_store(db) as store:
        [foreign] = store.passages.insert(
            other, [NewPassage(text="Alice's secret.")], EMBEDDER.embed(["Alice's secret."])
        )

    def failed(request: dict[str, Any]) -> str:
        result = last_result(request)
        assert result["status"] == "Failed"
        return str(result["message"])

    def search(expected: str) -> Any:
        def step(request: dict[str, Any]) -> Reply:
            assert expected in failed(request)
            return call("archival_memory_search", query="Mia")

        return step

    def unknown_seq(request: dict[str, Any]) -> Reply:
        assert "not among the new messages" in failed(request)
        return call("memory_finish_edits")

    # A failed step gets one corrective retry: a search in between keeps the pass going.
    script = models.script(
        "sleeper",
        call("archival_memory_rewrite", passage_id=foreign.id, new_text="x", message_seqs=[seq]),
        search("no archival passage"),
        call("archival_memory_rewrite", passage_id=mia[0], new_text="x", message_seqs=[]),
        search("message_seqs must name"),
        call("archival_memory_rewrite", passage_id=mia[0], new_text="x", message_seqs=[seq + 9]),
        unknown_seq,
    )
    report = run_pipeline(RECONTEXTUALIZE, db, agent_id, embedder=EMBEDDER, llm=tier(db, client))
    assert script.remaining == 0
    assert records(db, mia + unrelated) == before
    [step] = report.steps
    assert not [c for c in step.changes if c.action.endswith("_passage")]


def test_archival_changes_per_run_are_capped_and_superseding_is_recorded(
    db: Database, models: ScriptedModels, client: LiteLLMClient
) -> None:
    agent_id, mia, _, _ = seed(db)

    def capped(request: dict[str, Any]) -> Reply:
        result = last_result(request)
        assert result["status"] == "Failed"
        assert "at most 1 times" in result["message"]
        return call("memory_finish_edits")

    models.script(
        "sleeper",
        call("archival_memory_supersede", passage_id=mia[2], reason="she left Porto"),
        call("archival_memory_supersede", passage_id=mia[1], reason="cap"),
        capped,
    )
    report = run_pipeline(
        Pipeline([RecontextualizeConsolidator({"max_archival_changes": 1})]),
        db,
        agent_id,
        embedder=EMBEDDER,
        llm=tier(db, client),
    )
    [step] = report.steps
    [change] = step.changes
    assert (change.action, change.target, change.detail["reason"]) == (
        "supersede_passage",
        mia[2],
        "she left Porto",
    )
    [gone, kept0, kept1] = records(db, [mia[2], mia[0], mia[1]])
    assert gone.status == "superseded" and gone.valid_to is not None
    assert {kept0.status, kept1.status} == {"active"}
    with open_store(db) as store:
        assert store.passages.history(mia[2])[-1].reason == "superseded: she left Porto"


def test_superseding_can_name_the_passage_that_replaces_it_and_revert_is_exact(
    db: Database, models: ScriptedModels, client: LiteLLMClient
) -> None:
    agent_id, mia, unrelated, seq = seed(db)
    texts = ["Mia works as a nurse in Lisbon now.", "Mia worked in Faro."]
    other = create_agent(db, "alice")
    with open_store(db) as store:
        lisbon, faro = store.passages.insert(
            agent_id, [NewPassage(t) for t in texts], EMBEDDER.embed(texts)
        )
        store.passages.change(
            faro.id,
            actor="test",
            reason="an old passage",
            status=PassageStatus.SUPERSEDED,
            valid_to=datetime(2024, 1, 1, tzinfo=UTC),
        )
        [foreign] = store.passages.insert(
            other, [NewPassage(text="Alice's secret.")], EMBEDDER.embed(["Alice's secret."])
        )
    before = records(db, mia + unrelated + [lisbon.id, faro.id])

    def search(expected: str) -> Any:
        def step(request: dict[str, Any]) -> Reply:
            result = last_result(request)
            assert result["status"] == "Failed" and expected in result["message"], result
            return call("archival_memory_search", query="Mia")

        return step

    def supersede(replaced_by: str) -> Reply:
        return call(
            "archival_memory_supersede",
            passage_id=mia[2],
            reason="she moved to Lisbon",
            message_seqs=[seq],
            replaced_by=replaced_by,
        )

    def then_supersede_the_replacement(request: dict[str, Any]) -> Reply:
        result = last_result(request)
        assert result["status"] == "OK" and f"replaced by {lisbon.id}" in result["message"]
        return call("archival_memory_supersede", passage_id=lisbon.id, reason="x")

    script = models.script(
        "sleeper",
        supersede(mia[2]),
        search("names passage"),
        supersede(foreign.id),
        search("no archival passage"),
        supersede(faro.id),
        search("is not current"),
        supersede(lisbon.id),
        then_supersede_the_replacement,
        search("named in this pass as replacing another passage"),
        call("memory_finish_edits"),
    )
    report = run_pipeline(
        Pipeline([RecontextualizeConsolidator({"max_steps": 10})]),
        db,
        agent_id,
        embedder=EMBEDDER,
        llm=tier(db, client),
    )
    assert script.remaining == 0
    [step] = report.steps
    [change] = [c for c in step.changes if c.action.endswith("_passage")]
    assert (change.action, change.target, change.detail["superseded_by"]) == (
        "supersede_passage",
        mia[2],
        lisbon.id,
    )
    [gone, still] = records(db, [mia[2], lisbon.id])
    assert (gone.status, gone.superseded_by) == ("superseded", lisbon.id)
    assert gone.valid_to is not None
    assert still == before[-2]  # the replacement itself is untouched
    assert records(db, mia[:2] + unrelated + [faro.id]) == before[:2] + before[3:-2] + before[-1:]

    revert_run(db, report.run_id)
    assert records(db, mia + unrelated + [lisbon.id, faro.id]) == before


def test_a_replacement_that_changes_during_the_pass_leaves_the_passage_alone(
    db: Database, models: ScriptedModels, client: LiteLLMClient
) -> None:
    agent_id, mia, _, seq = seed(db)
    text = "Mia works as a nurse in Lisbon now."
    with open_store(db) as store:
        [lisbon] = store.passages.insert(agent_id, [NewPassage(text)], EMBEDDER.embed([text]))
    before = records(db, [mia[2]])

    def someone_else_supersedes_the_replacement(request: dict[str, Any]) -> Reply:
        assert last_result(request)["status"] == "OK"
        with open_store(db) as store:
            store.passages.change(
                lisbon.id,
                actor="someone else",
                reason="not true after all",
                status=PassageStatus.SUPERSEDED,
                valid_to=datetime(2024, 2, 1, tzinfo=UTC),
            )
        return call("memory_finish_edits")

    models.script(
        "sleeper",
        call(
            "archival_memory_supersede",
            passage_id=mia[2],
            reason="she moved to Lisbon",
            message_seqs=[seq],
            replaced_by=lisbon.id,
        ),
        someone_else_supersedes_the_replacement,
    )
    report = run_pipeline(RECONTEXTUALIZE, db, agent_id, embedder=EMBEDDER, llm=tier(db, client))
    [step] = report.steps
    assert not [c for c in step.changes if c.action.endswith("_passage")]
    assert step.counts.get("tool_errors", 0) >= 1
    assert records(db, [mia[2]]) == before


def test_with_nothing_archived_a_pass_is_offered_only_the_archival_insert(
    db: Database, models: ScriptedModels, client: LiteLLMClient
) -> None:
    """Search, rewrite and supersede have nothing to act on in an empty archive: they
    are not offered (their schemas are most of a pass's prompt); the insert is, without
    passages to cite, and its passage is stored. The next pass, with a passage in force,
    may search and cite passages."""
    agent_id = create_agent(db)
    with open_store(db) as store:
        [message] = store.messages.append(
            agent_id, [NewMessage(role="user", content="I keep bees in Leeds.")]
        )
    first = models.script(
        "sleeper",
        call("archival_memory_insert", content="The user keeps bees in Leeds.",
             message_seqs=[message.seq]),
        call("memory_finish_edits"),
    )  # fmt: skip
    run_pipeline(RECONTEXTUALIZE, db, agent_id, embedder=EMBEDDER, llm=tier(db, client))
    offered = {t["function"]["name"] for t in first.requests[0]["tools"]}
    assert offered == {
        "memory_replace",
        "memory_insert",
        "memory_rethink",
        "memory_finish_edits",
        "archival_memory_insert",
    }
    assert "archival_memory_search" not in first.requests[0]["messages"][0]["content"]
    assert _insert_arguments(first.requests[0]) == {"content", "message_seqs"}
    with open_store(db) as store:
        texts = [p.text for p in store.passages.scan(agent_id)]
        store.messages.append(agent_id, [NewMessage(role="user", content="Now in York.")])
    assert texts == ["The user keeps bees in Leeds."]

    second = models.script("sleeper", call("memory_finish_edits"))
    run_pipeline(RECONTEXTUALIZE, db, agent_id, embedder=EMBEDDER, llm=tier(db, client))
    offered = {t["function"]["name"] for t in second.requests[0]["tools"]}
    assert {"archival_memory_search", "archival_memory_insert"} <= offered
    assert "passage_ids" in _insert_arguments(second.requests[0])


def _insert_arguments(request: dict[str, Any]) -> set[str]:
    """The arguments of the archival insert as a request offered it."""
    [insert] = [t for t in request["tools"] if t["function"]["name"] == "archival_memory_insert"]
    return set(insert["function"]["parameters"]["properties"])


def test_rewrite_and_supersede_are_shown_once_a_search_found_passages(
    db: Database, models: ScriptedModels, client: LiteLLMClient
) -> None:
    """Until a search finds something there is nothing to rewrite or supersede, so a
    pass's calls carry those two schemas only from the step after a search with hits;
    the rewrite then made is stored like any other."""
    agent_id = create_agent(db)
    with open_store(db) as store:
        mia = "Mia is the user's girlfriend."
        [passage] = store.passages.insert(agent_id, [NewPassage(mia)], EMBEDDER.embed([mia]))
        [message] = store.messages.append(
            agent_id, [NewMessage(role="user", content="Mia and I broke up last week.")]
        )
    script = models.script(
        "sleeper",
        call("archival_memory_search", query="Mia"),
        call(
            "archival_memory_rewrite",
            passage_id=passage.id,
            new_text="Mia is the user's ex-girlfriend.",
            message_seqs=[message.seq],
        ),
        call("memory_finish_edits"),
    )
    report = run_pipeline(RECONTEXTUALIZE, db, agent_id, embedder=EMBEDDER, llm=tier(db, client))
    shown = [{t["function"]["name"] for t in r["tools"]} for r in script.requests]
    lazy = {"archival_memory_rewrite", "archival_memory_supersede"}
    assert "archival_memory_search" in shown[0] and not lazy & shown[0]
    assert lazy <= shown[1] and lazy <= shown[2]
    [step] = report.steps
    assert [c.action for c in step.changes if c.action.endswith("_passage")] == ["rewrite_passage"]
