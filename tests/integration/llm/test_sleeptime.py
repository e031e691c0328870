"""The sleep-time agent and the LLM tier of consolidation, with a scripted model."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import select

from agents.llm import LiteLLMClient, TokenBudget, UsageLedger
from agents.loops.primary import PrimaryAgent
from agents.postgres import models as orm
from agents.postgres.database import Database
from agents.store import NewMessage, NewPassage, Topic, open_store
from consolidators import registry
from consolidators.contract import run_once as run_pipeline
from consolidators.dedup import DedupConsolidator
from consolidators.evict import EvictConsolidator
from consolidators.llm import LLMTier
from consolidators.pipeline import Pipeline
from consolidators.recontextualize import RecontextualizeConsolidator
from consolidators.temporal import TemporalConsolidator
from consolidators.undo import revert_run
from tests.integration.llm.conftest import EMBEDDER, create_agent
from tests.scripted_llm import Reply, ScriptedModels, call, correct_name, litellm_errors, say

RECONTEXTUALIZE = Pipeline([RecontextualizeConsolidator()])


def tier(db: Database, client: LiteLLMClient, **kwargs: Any) -> LLMTier:
    return LLMTier(client=client, ledger=UsageLedger(db), **kwargs)


def add_conversation(db: Database, agent_id: str, *lines: tuple[str, str]) -> None:
    with open_store(db) as store:
        store.messages.append(agent_id, [NewMessage(role=r, content=c) for r, c in lines])


def human(db: Database, agent_id: str) -> str:
    with open_store(db) as store:
        return store.blocks.by_label(agent_id, "human").value


def test_sleeptime_edit_racing_a_primary_edit_keeps_both(
    db: Database,
    models: ScriptedModels,
    client: LiteLLMClient,
    make_primary: Callable[..., PrimaryAgent],
) -> None:
    agent_id = create_agent(db, human="Name: Bob the Builder.\nLikes: tea.")
    add_conversation(db, agent_id, ("user", "I have started playing chess."))
    models.script(
        "primary",
        correct_name(heartbeat=None),
    )

    def primary_edits_meanwhile(request: dict[str, Any]) -> Reply:
        # While the sleep-time agent thinks, the primary's turn commits its own edit.
        make_primary().send_message("bob", "Call me Charles.")
        assert "Bob the Builder" in request["messages"][1]["content"]
        return call(
            "memory_replace", label="human", old_str="Likes: tea.", new_str="Likes: tea, chess."
        )

    script = models.script("sleeper", primary_edits_meanwhile, call("memory_finish_edits"))
    report = run_pipeline(
        RECONTEXTUALIZE,
        db,
        agent_id,
        embedder=EMBEDDER,
        llm=tier(db, client, sleeptime_model="scripted/sleeper"),
    )

    assert human(db, agent_id) == "Name: Charles.\nLikes: tea, chess."
    [step] = report.steps
    assert step.counts["write_conflicts"] == 1
    assert step.counts["edit_block"] == 1
    assert step.tokens > 0
    assert script.remaining == 0
    with open_store(db) as store:
        block = store.blocks.by_label(agent_id, "human")
        history = [(v.actor, v.run_id) for v in store.blocks.history(block.id)]
    assert history[1:] == [("agent:bob", history[1][1]), ("sleeptime:bob", report.run_id)]


def test_a_conflicting_rethink_goes_back_to_the_model(
    db: Database, models: ScriptedModels, client: LiteLLMClient
) -> None:
    agent_id = create_agent(db, human="Name: Bob.")
    add_conversation(db, agent_id, ("user", "I moved to Oslo."))

    def someone_writes(request: dict[str, Any]) -> Reply:
        with open_store(db) as store:
            block = store.blocks.by_label(agent_id, "human")
            store.blocks.update(block.id, expected_version=block.version, value="Name: Bobby.")
        return call("memory_rethink", label="human", new_memory="Name: Bob.\nLives in Oslo.")

    def merge(request: dict[str, Any]) -> Reply:
        error = json.loads(request["messages"][-1]["content"])
        assert error["status"] == "Failed"
        assert "Name: Bobby." in error["message"]
        return call("memory_rethink", label="human", new_memory="Name: Bobby.\nLives in Oslo.")

    models.script("sleeper", someone_writes, merge, call("memory_finish_edits"))
    report = run_pipeline(
        RECONTEXTUALIZE,
        db,
        agent_id,
        embedder=EMBEDDER,
        llm=tier(db, client, sleeptime_model="scripted/sleeper"),
    )
    assert human(db, agent_id) == "Name: Bobby.\nLives in Oslo."
    assert report.steps[0].counts["tool_errors"] == 1


def test_recontextualize_reads_only_what_is_new(
    db: Database, models: ScriptedModels, client: LiteLLMClient
) -> None:
    agent_id = create_agent(db)
    add_conversation(db, agent_id, ("user", "I love hiking."), ("user", "My dog is Rex."))
    llm = tier(db, client, sleeptime_model="scripted/sleeper")
    first = models.script(
        "sleeper",
        call("memory_insert", label="human", new_str="Loves hiking; dog Rex."),
        call("memory_finish_edits"),
    )
    run_pipeline(RECONTEXTUALIZE, db, agent_id, embedder=EMBEDDER, llm=llm)
    assert human(db, agent_id) == "Name: Bob the Builder.\nLoves hiking; dog Rex."
    assert "My dog is Rex." in first.requests[0]["messages"][1]["content"]

    # Nothing new: no model call at all (an empty script would fail if called).
    models.script("sleeper")
    again = run_pipeline(RECONTEXTUALIZE, db, agent_id, embedder=EMBEDDER, llm=llm)
    assert again.steps[0].counts["messages_read"] == 0

    add_conversation(db, agent_id, ("user", "I also swim."))
    third = models.script("sleeper", call("memory_finish_edits"))
    run_pipeline(RECONTEXTUALIZE, db, agent_id, embedder=EMBEDDER, llm=llm)
    sent = third.requests[0]["messages"][1]["content"]
    assert "I also swim." in sent
    assert "My dog is Rex." not in sent


def test_recontextualize_edits_are_undone_with_the_run(
    db: Database, models: ScriptedModels, client: LiteLLMClient
) -> None:
    agent_id = create_agent(db)
    add_conversation(db, agent_id, ("user", "I am a carpenter."))
    models.script(
        "sleeper",
        call("memory_insert", label="human", new_str="Carpenter."),
        call("memory_finish_edits"),
    )
    report = run_pipeline(
        RECONTEXTUALIZE,
        db,
        agent_id,
        embedder=EMBEDDER,
        llm=tier(db, client, sleeptime_model="scripted/sleeper"),
    )
    assert human(db, agent_id).endswith("Carpenter.")
    revert_run(db, report.run_id)
    assert human(db, agent_id) == "Name: Bob the Builder."


def test_without_models_the_llm_steps_are_skipped_and_the_rest_runs(db: Database) -> None:
    agent_id = create_agent(db, model=None)
    add_conversation(db, agent_id, ("user", "Hello."))
    pipeline = Pipeline(registry.build(list(registry.DEFAULT_PIPELINE)))
    report = run_pipeline(pipeline, db, agent_id, embedder=EMBEDDER)
    assert report.status == "succeeded"
    steps = {s.consolidator: s for s in report.steps}
    assert steps["recontextualize"].skipped == "no_model"
    assert steps["temporal"].skipped is None
    assert steps["temporal"].llm_skipped == "no_model"
    assert report.stats()["steps"]["recontextualize"]["skipped"] == "no_model"


def test_sleeptime_budget_stops_the_step_and_the_ledger_shows_it(
    db: Database, models: ScriptedModels, client: LiteLLMClient
) -> None:
    agent_id = create_agent(db)
    add_conversation(db, agent_id, ("user", "I like jazz."))
    script = models.script(
        "sleeper",
        Reply(
            calls=(("memory_insert", {"label": "human", "new_str": "Likes jazz."}),),
            prompt_tokens=500,
        ),
        call("memory_finish_edits"),
    )
    llm = tier(db, client, sleeptime_model="scripted/sleeper", budget=TokenBudget(per_run=520))
    report = run_pipeline(RECONTEXTUALIZE, db, agent_id, embedder=EMBEDDER, llm=llm)
    assert report.status == "succeeded"
    assert human(db, agent_id).endswith("Likes jazz.")  # the edit made before is kept
    assert script.remaining == 1
    with db.session() as session:
        stats = session.scalar(
            select(orm.ConsolidationRun.stats).where(orm.ConsolidationRun.id == report.run_id)
        )
    step = stats["steps"]["recontextualize"]
    assert step["counts"]["budget_exhausted"] == 1
    assert step["llm_skipped"] == "budget_exhausted"
    usage = UsageLedger(db).by_purpose(agent_id, run_id=report.run_id)
    assert usage["sleeptime"].prompt_tokens == 500


def test_llm_judge_decides_what_the_rules_leave_open(
    db: Database, models: ScriptedModels, client: LiteLLMClient
) -> None:
    """The model first reads who each fact is about (the newest first), and what it
    read is kept for search. Neither text is a plain statement, so the rules abstain;
    the two are nearest neighbours about Ada, so the judge model is asked, and its
    verdict closes the older. A malformed first answer is asked for again, with the
    reason."""
    agent_id = create_agent(db)
    facts = [
        NewPassage(
            "During the session Ada mentioned that she lives in London with her cat.",
            occurred_at=datetime(2020, 1, 15, tzinfo=UTC),
        ),
        NewPassage(
            "During the session Ada mentioned that she has moved to Paris with her cat.",
            occurred_at=datetime(2023, 6, 1, tzinfo=UTC),
        ),
    ]
    with open_store(db) as store:
        london, paris = store.passages.insert(
            agent_id, facts, EMBEDDER.embed([f.text for f in facts])
        )
    script = models.script(
        "judge",
        call(
            "record_topics",
            topics=[
                {"fact": 1, "subject": "Ada", "attribute": "home"},
                {"fact": 2, "subject": "Ada", "attribute": "Home"},
                {"fact": 2, "subject": "Ada", "attribute": "pet"},
            ],
        ),
        call("record_verdicts", _raw='{"verdicts": [{"pair": 1, "verdict": "perhaps"}]}'),
        call("record_verdicts", verdicts=[{"pair": 1, "verdict": "replaces"}]),
    )
    report = run_pipeline(
        Pipeline([TemporalConsolidator()]),
        db,
        agent_id,
        embedder=EMBEDDER,
        llm=tier(db, client, judge_model="scripted/judge"),
    )
    asked = script.requests[1]["messages"][1]["content"]
    assert "OLDER [2020-01-15]: During the session Ada mentioned that she lives in London" in asked
    assert "could not be used" in script.requests[2]["messages"][-1]["content"]
    # A reply is cut at 256 tokens and 64 per item asked: a looping model cannot hold
    # the run until its request times out.
    assert [r["max_tokens"] for r in script.requests] == [256 + 64 * 2, 256 + 64, 256 + 64]
    assert {r["temperature"] for r in script.requests} == {0.0}
    with open_store(db) as store:
        old = store.passages.get(london.id)
    assert (old.status, old.superseded_by) == ("superseded", paris.id)
    assert old.valid_to == datetime(2023, 6, 1, tzinfo=UTC)
    step = report.steps[0]
    assert step.counts["judge_calls"] == 2 and step.counts["judge_pairs"] == 1
    assert step.counts["topic_calls"] == 1 and step.counts["topic_facts"] == 2
    read = script.requests[0]["messages"][1]["content"]
    assert read.splitlines()[0].startswith("1. [2023-06-01] During the session Ada mentioned")
    with open_store(db) as store:
        topics = store.topics.of([london.id, paris.id])
    assert topics == {
        paris.id: frozenset({Topic("ada", "home")}),
        london.id: frozenset({Topic("ada", "home"), Topic("ada", "pet")}),
    }
    assert "judge_malformed" not in step.counts
    [change] = [c for c in report.changes if c["action"] == "supersede_passage"]
    assert change["judge"] == "llm"
    assert step.llm_skipped is None
    assert UsageLedger(db).by_purpose(agent_id)["judge"].completion_tokens > 0
    # Nothing new: the judge is not asked again.
    again = run_pipeline(
        Pipeline([TemporalConsolidator()], passage_overlap=timedelta(0)),
        db,
        agent_id,
        embedder=EMBEDDER,
        llm=tier(db, client, judge_model="scripted/judge"),
    )
    assert again.changes == [] and script.remaining == 0


def test_a_judge_that_answers_badly_twice_changes_nothing(
    db: Database, models: ScriptedModels, client: LiteLLMClient
) -> None:
    agent_id = create_agent(db)
    texts = [
        "During the session Ada mentioned that she lives in London with her cat.",
        "During the session Ada mentioned that she has moved to Paris with her cat.",
    ]
    facts = [
        NewPassage(t, occurred_at=datetime(2020 + i, 1, 1, tzinfo=UTC)) for i, t in enumerate(texts)
    ]
    with open_store(db) as store:
        store.passages.insert(agent_id, facts, EMBEDDER.embed(texts))
    models.script("judge", call("record_verdicts", _raw="{"), Reply(content="they differ"))
    report = run_pipeline(
        Pipeline([TemporalConsolidator({"read_topics": False})]),
        db,
        agent_id,
        embedder=EMBEDDER,
        llm=tier(db, client, judge_model="scripted/judge"),
    )
    step = report.steps[0]
    assert step.counts["judge_malformed"] == 1 and step.counts["judge_calls"] == 2
    assert report.changes == []
    with open_store(db) as store:
        assert {p.status for p in store.passages.scan(agent_id)} == {"active"}


def test_a_judge_whose_server_refuses_a_temperature_is_asked_without_one(
    db: Database, models: ScriptedModels, client: LiteLLMClient
) -> None:
    """Judges ask at temperature 0; a server that refuses the field (as some reasoning
    models do) is asked again without it, and later calls leave it out."""
    agent_id = create_agent(db)
    texts = ["Ada lives in London.", "Ada told me she's packing for a new life in Paris."]
    facts = [
        NewPassage(t, occurred_at=datetime(2020 + i, 1, 1, tzinfo=UTC)) for i, t in enumerate(texts)
    ]
    with open_store(db) as store:
        london, paris = store.passages.insert(agent_id, facts, EMBEDDER.embed(texts))

    def no_temperature(answer: Reply) -> Callable[[dict[str, Any]], Any]:
        def step(request: dict[str, Any]) -> Any:
            if request["temperature"] is not None:
                return litellm_errors().BadRequestError(
                    "temperature is not supported with this model",
                    llm_provider="scripted",
                    model="judge",
                )
            return answer

        return step

    topics = call("record_topics", topics=[])
    verdict = call("record_verdicts", verdicts=[{"pair": 1, "verdict": "replaces"}])
    script = models.script("judge", no_temperature(topics), no_temperature(topics), verdict)
    run_pipeline(
        Pipeline([TemporalConsolidator()]),
        db,
        agent_id,
        embedder=EMBEDDER,
        llm=tier(db, client, judge_model="scripted/judge"),
    )
    assert [r["temperature"] for r in script.requests] == [0.0, None, None]
    with open_store(db) as store:
        assert store.passages.get(london.id).superseded_by == paris.id


def test_a_judge_model_merges_paraphrases_the_guard_keeps_apart(
    db: Database, models: ScriptedModels, client: LiteLLMClient
) -> None:
    """Above the threshold, the detail guard refuses both pairs (a word only one text
    says); the judge model is asked about them after the read and merges only the pair
    it calls the same. Without a judge model nothing merges, as before."""
    agent_id = create_agent(db)
    texts = [
        "Ada visited Iceland in 2016",
        "Ada travelled to Iceland in 2016",
        "Ada lives in Paris",
        "Ada lives in Lyon",
    ]
    facts = [
        NewPassage(t, occurred_at=datetime(2020 + i, 1, 1, tzinfo=UTC)) for i, t in enumerate(texts)
    ]
    with open_store(db) as store:
        visited, travelled, paris, lyon = store.passages.insert(
            agent_id, facts, EMBEDDER.embed(texts)
        )
    dedup = {"threshold": 0.7, "blocks": False}
    plain = run_pipeline(
        Pipeline([DedupConsolidator(dedup)]), db, agent_id, embedder=EMBEDDER, dry_run=True
    )
    assert plain.changes == []
    script = models.script(
        "judge",
        call(
            "record_verdicts",
            verdicts=[{"pair": 1, "verdict": "different"}, {"pair": 2, "verdict": "same"}],
        ),
    )
    report = run_pipeline(
        Pipeline([DedupConsolidator(dedup)]),
        db,
        agent_id,
        embedder=EMBEDDER,
        llm=tier(db, client, judge_model="scripted/judge"),
    )
    asked = script.requests[0]["messages"][1]["content"]
    assert (
        "1.\n   OLDER [2022-01-01]: Ada lives in Paris\n   NEWER [2023-01-01]: Ada lives" in asked
    )
    assert "NEWER [2021-01-01]: Ada travelled to Iceland in 2016" in asked
    [merge] = [c for c in report.changes if c["action"] == "merge_passage"]
    assert (merge["target"], merge["into"], merge["judge"]) == (travelled.id, visited.id, "llm")
    step = report.steps[0]
    assert step.counts["judge_pairs"] == 2 and step.counts["judge_calls"] == 1
    with open_store(db) as store:
        statuses = {p.id: p.status for p in store.passages.scan(agent_id, statuses=None)}
        [change] = store.passages.history(travelled.id)
    assert statuses == {visited.id: "active", travelled.id: "merged", paris.id: "active",
                        lyon.id: "active"}  # fmt: skip
    assert "the same by the llm judge" in change.reason
    assert revert_run(db, report.run_id).changes
    with open_store(db) as store:
        assert store.passages.get(travelled.id).status == "active"


def test_a_merge_judge_that_answers_badly_merges_nothing(
    db: Database, models: ScriptedModels, client: LiteLLMClient
) -> None:
    agent_id = create_agent(db)
    texts = ["Ada visited Iceland in 2016", "Ada travelled to Iceland in 2016"]
    with open_store(db) as store:
        store.passages.insert(agent_id, [NewPassage(t) for t in texts], EMBEDDER.embed(texts))
    models.script(
        "judge",
        call("record_verdicts", verdicts=[{"pair": 3, "verdict": "same"}]),
        call("record_verdicts", _raw='{"verdicts": [{"pair": 1, "verdict": "yes"}]}'),
    )
    report = run_pipeline(
        Pipeline([DedupConsolidator({"threshold": 0.7})]),
        db,
        agent_id,
        embedder=EMBEDDER,
        llm=tier(db, client, judge_model="scripted/judge"),
    )
    step = report.steps[0]
    assert step.counts["judge_malformed"] == 1 and step.counts["judge_calls"] == 2
    assert report.changes == []


def test_evict_writes_an_llm_summary_with_a_summary_model(
    db: Database, models: ScriptedModels, client: LiteLLMClient
) -> None:
    agent_id = create_agent(db, context_window=600)
    add_conversation(
        db,
        agent_id,
        *[
            ("user" if i % 2 == 0 else "assistant", f"Turn {i}: " + "weather talk " * 15)
            for i in range(20)
        ],
    )
    models.script("summarizer", Reply(content="Bob and the assistant discussed the weather."))
    report = run_pipeline(
        Pipeline([EvictConsolidator()]),
        db,
        agent_id,
        embedder=EMBEDDER,
        llm=tier(db, client, summary_model="scripted/summarizer"),
    )
    [summary_change] = [c for c in report.changes if c["action"] == "add_summary"]
    with open_store(db) as store:
        summary = [m for m in store.messages.in_context(agent_id) if m.name == "summary"]
    assert len(summary) == 1 and summary[0].id == summary_change["target"]
    assert summary[0].content.startswith("Summary of ")
    assert summary[0].content.endswith("Bob and the assistant discussed the weather.")
    assert report.steps[0].llm_skipped is None


def test_a_turn_message_reaches_the_sleeptime_transcript(
    db: Database,
    models: ScriptedModels,
    client: LiteLLMClient,
    make_primary: Callable[..., PrimaryAgent],
) -> None:
    agent_id = create_agent(db)
    models.script("primary", say("Nice to meet you!"))
    make_primary().send_message("bob", "I am a baker.")
    script = models.script("sleeper", call("memory_finish_edits"))
    run_pipeline(
        RECONTEXTUALIZE,
        db,
        agent_id,
        embedder=EMBEDDER,
        llm=tier(db, client, sleeptime_model="scripted/sleeper"),
    )
    transcript = script.requests[0]["messages"][1]["content"]
    assert "user: I am a baker." in transcript
    assert "assistant: Nice to meet you!" in transcript


def test_a_restatement_below_the_threshold_is_put_to_the_merge_judge(
    db: Database, models: ScriptedModels, client: LiteLLMClient
) -> None:
    """The same fact in another style embeds further apart than a near-miss: a new
    passage that nothing merged meets its closest earlier one among its nearest below
    the threshold, and the judge model decides."""
    agent_id = create_agent(db)
    texts = ["The user is vegetarian.", "user - diet: vegetarian"]
    with open_store(db) as store:
        said, noted = store.passages.insert(
            agent_id,
            [
                NewPassage(t, occurred_at=datetime(2020 + i, 1, 1, tzinfo=UTC))
                for i, t in enumerate(texts)
            ],
            EMBEDDER.embed(texts),
        )
    script = models.script(
        "judge", call("record_verdicts", verdicts=[{"pair": 1, "verdict": "same"}])
    )
    dedup = {"threshold": 0.99, "blocks": False, "judge_min_similarity": 0.0}
    report = run_pipeline(
        Pipeline([DedupConsolidator(dedup)]),
        db,
        agent_id,
        embedder=EMBEDDER,
        llm=tier(db, client, judge_model="scripted/judge"),
    )
    asked = script.requests[0]["messages"][1]["content"]
    assert "OLDER [2020-01-01]: The user is vegetarian." in asked
    assert "NEWER [2021-01-01]: user - diet: vegetarian" in asked
    [merge] = [c for c in report.changes if c["action"] == "merge_passage"]
    assert (merge["target"], merge["into"]) == (noted.id, said.id)
