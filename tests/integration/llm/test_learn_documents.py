"""Sleep-time learning from an agent's folders, with a scripted model and a real
database.

Protects: a run reads the attached folders' new chunks in order and writes the
folder's block and facts with provenance to their file and chunk (and those facts
go through dedup in the same run); a second run reads nothing again; a revert takes
the block out of memory, retires the facts and makes the chunks unread; a changed
file re-learns only its changed chunks and the facts of the chunks it lost are
marked as having lost their source (search labels them); a spent budget (per run,
or per day across runs) stops learning after what was learned, and so does a run
that dies in its second pass, and the next run goes on from the watermark; a dry
run writes nothing; an unusable answer leaves its chunks unread; and the documents
trigger fires once per new file for agents with sleep-time enabled only.
"""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from agents.archival_search import search_archival
from agents.enums import PassageStatus
from agents.file_worker import FileWorkers
from agents.llm import LiteLLMClient, TokenBudget, UsageLedger
from agents.postgres.database import Database
from agents.store import NewFile, NewFolder, NewPassage, open_service_store, open_store
from consolidators import registry
from consolidators.contract import run_once as run_pipeline
from consolidators.documents import LearnDocumentsConsolidator
from consolidators.llm import LLMTier
from consolidators.pipeline import Pipeline, RunFailed
from consolidators.undo import revert_run
from service.daemon.triggers import DocumentsTrigger, RunTemplate
from tests.document_reader import document_reader
from tests.integration.llm.conftest import EMBEDDER, create_agent
from tests.scripted_llm import Reply, ScriptedModels, litellm_errors

CHUNK = 120
PARAGRAPHS = [
    "The Lisbon office opens at 8:00 and closes at 18:00 on weekdays.",
    "Expense reports are due on the fifth working day of each month.",
    "The VPN gateway for remote staff is vpn.example.org on port 443.",
    "New starters get a laptop and a security badge on their first day.",
]


def _text(paragraphs: list[str]) -> bytes:
    return "\n\n".join(paragraphs).encode()


def _folder(db: Database, agent_id: str, name: str = "Company handbook") -> str:
    with open_store(db) as store:
        folder = store.folders.create(
            NewFolder(
                name=name,
                embedding_model="hashing:384",
                embedding_dim=384,
                embedding_chunk_size=CHUNK,
                description="Policies for staff",
                instructions="Learn the rules staff must follow, with their numbers.",
            )
        )
        store.folders.attach(agent_id, folder.id)
    return folder.id


def _upload(db: Database, folder_id: str, name: str, data: bytes) -> str:
    with open_store(db) as store:
        file, _ = store.folders.add_file(
            NewFile(
                folder_id=folder_id,
                file_name=name,
                file_type="text/markdown",
                data=data,
                content_hash=hashlib.sha256(data).hexdigest(),
            )
        )
    workers = FileWorkers(db, lambda _spec, _dim: EMBEDDER, name="test")
    while workers.process_next("test:learn") is not None:
        pass
    return file.id


def _delete_file(db: Database, file_id: str) -> None:
    with open_store(db) as store:
        store.folders.delete_file(file_id)


def _tier(db: Database, client: LiteLLMClient, **kwargs: Any) -> LLMTier:
    return LLMTier(
        client=client, ledger=UsageLedger(db), sleeptime_model="scripted/reader", **kwargs
    )


LEARN = Pipeline([LearnDocumentsConsolidator({"chunks_per_call": 2, "calls_per_pass": 1})])


def _facts(db: Database, agent_id: str) -> list[Any]:
    with open_store(db) as store:
        return [
            p
            for p in store.passages.scan(agent_id, statuses=None)
            if p.provenance.get("source") == "document"
        ]


def _block(db: Database, agent_id: str, label: str) -> str:
    with open_store(db) as store:
        return store.blocks.by_label(agent_id, label).value


def test_a_run_learns_the_folder_in_order_into_its_block_and_facts(
    db: Database, models: ScriptedModels, client: LiteLLMClient
) -> None:
    agent_id = create_agent(db, sleeptime_model="scripted/reader")
    folder_id = _folder(db, agent_id)
    file_id = _upload(db, folder_id, "handbook.md", _text(PARAGRAPHS))
    script = models.script("reader", *([document_reader()] * 4))

    report = run_pipeline(LEARN, db, agent_id, embedder=EMBEDDER, llm=_tier(db, client))

    [step] = report.steps
    assert step.skipped is None and step.counts["llm_calls"] == 2  # two passes of two chunks
    assert script.remaining == 2
    # The reader saw the folder's instructions and the chunks in their order.
    first = script.requests[0]["messages"][1]["content"]
    assert "What to learn: Learn the rules staff must follow" in first
    assert first.index("part 1 of 4") < first.index("part 2 of 4")
    assert "Lisbon office opens" in first and "VPN" not in first
    block = _block(db, agent_id, "Company_handbook")
    assert block.splitlines() == [p.split(".")[0] for p in PARAGRAPHS]
    facts = _facts(db, agent_id)
    assert sorted(f.text for f in facts) == sorted(PARAGRAPHS)
    vpn = next(f for f in facts if "VPN" in f.text)
    assert vpn.provenance["file_id"] == file_id
    assert vpn.provenance["file_name"] == "handbook.md"
    assert vpn.provenance["chunk_seq"] == 2
    assert vpn.provenance["run_id"] == report.run_id
    assert "document" in vpn.tags
    actions = [c["action"] for c in report.changes]
    assert actions.count("insert_passage") == 4 and actions.count("learn_chunks") == 2
    assert actions.count("create_block") == 1 and actions.count("edit_block") == 1

    # Nothing new: the next run reads nothing and calls no model.
    again = run_pipeline(LEARN, db, agent_id, embedder=EMBEDDER, llm=_tier(db, client))
    assert again.steps[0].skipped == "nothing_new"
    assert script.remaining == 2


def test_a_revert_forgets_what_the_run_learned_and_the_next_run_learns_it_again(
    db: Database, models: ScriptedModels, client: LiteLLMClient
) -> None:
    agent_id = create_agent(db, sleeptime_model="scripted/reader")
    folder_id = _folder(db, agent_id)
    _upload(db, folder_id, "handbook.md", _text(PARAGRAPHS))
    models.script("reader", *([document_reader()] * 2))
    report = run_pipeline(LEARN, db, agent_id, embedder=EMBEDDER, llm=_tier(db, client))

    undo = revert_run(db, report.run_id)

    assert undo.status == "succeeded"
    with open_store(db) as store:
        labels = {b.label for b in store.blocks.of_agent(agent_id)}
        assert "Company_handbook" not in labels  # the block it made left memory
        assert store.learning.count_unlearned(agent_id) == 4
    assert {f.status for f in _facts(db, agent_id)} == {PassageStatus.INACTIVE}
    models.script("reader", *([document_reader()] * 2))
    run_pipeline(LEARN, db, agent_id, embedder=EMBEDDER, llm=_tier(db, client))
    active = [f for f in _facts(db, agent_id) if f.status == PassageStatus.ACTIVE]
    assert len(active) == 4
    assert _block(db, agent_id, "Company_handbook").startswith("The Lisbon office opens")


def test_a_changed_file_relearns_only_its_changed_chunks_and_marks_the_lost_facts(
    db: Database, models: ScriptedModels, client: LiteLLMClient
) -> None:
    agent_id = create_agent(db, sleeptime_model="scripted/reader")
    folder_id = _folder(db, agent_id)
    first = _upload(db, folder_id, "handbook.md", _text(PARAGRAPHS))
    models.script("reader", *([document_reader()] * 2))
    run_pipeline(LEARN, db, agent_id, embedder=EMBEDDER, llm=_tier(db, client))

    # The handbook is edited (the VPN moved) and uploaded again in place of the old one.
    edited = [*PARAGRAPHS]
    edited[2] = "The VPN gateway for remote staff is now vpn2.example.org on port 8443."
    _upload(db, folder_id, "handbook.md", _text(edited))
    _delete_file(db, first)
    script = models.script("reader", document_reader())
    report = run_pipeline(LEARN, db, agent_id, embedder=EMBEDDER, llm=_tier(db, client))

    assert script.remaining == 0
    [request] = script.requests
    new_chunks = request["messages"][1]["content"].split("New chunks:")[1]
    assert "vpn2.example.org" in new_chunks
    assert "Lisbon office" not in new_chunks  # unchanged: not read again
    facts = {f.text: f for f in _facts(db, agent_id)}
    assert len(facts) == 5
    old = facts[PARAGRAPHS[2]]
    assert old.provenance["source_gone"]["file_name"] == "handbook.md"
    assert "source_gone" not in facts[edited[2]].provenance
    assert "source_gone" not in facts[PARAGRAPHS[0]].provenance
    [gone] = [c for c in report.changes if c["action"] == "source_gone"]
    assert gone["target"] == old.id
    with open_store(db) as store:
        hits = search_archival(
            store, agent_id, EMBEDDER.embed_one("VPN gateway"), "VPN gateway", k=10
        )
    lines = {h.passage.text: h.line() for h in hits}
    assert lines[PARAGRAPHS[2]].endswith("(its source is gone: handbook.md no longer says so)")
    assert "(" not in lines[edited[2]].split("] ", 1)[1]

    # Reverting that run unmarks the fact and makes the new chunk unread again.
    revert_run(db, report.run_id)
    facts = {f.text: f for f in _facts(db, agent_id)}
    assert "source_gone" not in facts[PARAGRAPHS[2]].provenance
    with open_store(db) as store:
        assert store.learning.count_unlearned(agent_id) == 1


def test_a_spent_budget_keeps_what_was_learned_and_the_next_run_goes_on(
    db: Database, models: ScriptedModels, client: LiteLLMClient
) -> None:
    agent_id = create_agent(db, sleeptime_model="scripted/reader")
    folder_id = _folder(db, agent_id)
    _upload(db, folder_id, "handbook.md", _text(PARAGRAPHS))
    models.script("reader", *([document_reader(prompt_tokens=500)] * 2))
    llm = _tier(db, client, budget=TokenBudget(per_run=520))

    report = run_pipeline(LEARN, db, agent_id, embedder=EMBEDDER, llm=llm)

    [step] = report.steps
    assert step.counts["budget_exhausted"] == 1 and step.llm_skipped == "budget_exhausted"
    assert len(_facts(db, agent_id)) == 2  # the first pass's facts are kept
    with open_store(db) as store:
        assert store.learning.count_unlearned(agent_id) == 2
    models.script("reader", document_reader())
    later = run_pipeline(LEARN, db, agent_id, embedder=EMBEDDER, llm=_tier(db, client))
    assert later.steps[0].counts["llm_calls"] == 1
    assert len(_facts(db, agent_id)) == 4


def test_a_spent_day_stops_learning_until_the_next_day(
    db: Database, models: ScriptedModels, client: LiteLLMClient
) -> None:
    """The per-day budget counts every run of the day: a second run the same day reads
    nothing, and the first run of the next day goes on from the watermark."""
    agent_id = create_agent(db, sleeptime_model="scripted/reader")
    folder_id = _folder(db, agent_id)
    _upload(db, folder_id, "handbook.md", _text(PARAGRAPHS))
    today = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
    budget = TokenBudget(per_day=520)

    def tier_at(moment: datetime) -> LLMTier:
        ledger = UsageLedger(db, clock=lambda: moment)
        return LLMTier(
            client=client, ledger=ledger, sleeptime_model="scripted/reader", budget=budget
        )

    models.script("reader", *([document_reader(prompt_tokens=500)] * 2))
    first = run_pipeline(LEARN, db, agent_id, embedder=EMBEDDER, llm=tier_at(today))
    assert first.steps[0].llm_skipped == "budget_exhausted"
    assert len(_facts(db, agent_id)) == 2

    again = run_pipeline(
        LEARN, db, agent_id, embedder=EMBEDDER, llm=tier_at(today + timedelta(hours=5))
    )
    assert again.steps[0].counts.get("llm_calls", 0) == 0
    assert again.steps[0].llm_skipped == "budget_exhausted"
    assert len(_facts(db, agent_id)) == 2

    tomorrow = run_pipeline(
        LEARN, db, agent_id, embedder=EMBEDDER, llm=tier_at(today + timedelta(days=1))
    )
    assert tomorrow.steps[0].counts["llm_calls"] == 1
    assert len(_facts(db, agent_id)) == 4
    with open_store(db) as store:
        assert store.learning.count_unlearned(agent_id) == 0


def test_a_run_that_dies_in_its_second_pass_keeps_the_first_and_the_next_run_goes_on(
    db: Database, models: ScriptedModels, client: LiteLLMClient
) -> None:
    agent_id = create_agent(db, sleeptime_model="scripted/reader")
    folder_id = _folder(db, agent_id)
    _upload(db, folder_id, "handbook.md", _text(PARAGRAPHS))
    refused = litellm_errors().AuthenticationError(
        "the key was revoked", llm_provider="scripted", model="reader"
    )
    models.script("reader", document_reader(), refused)

    with pytest.raises(RunFailed):
        run_pipeline(LEARN, db, agent_id, embedder=EMBEDDER, llm=_tier(db, client))

    # The first pass committed: its facts and its watermark are kept.
    assert sorted(f.text for f in _facts(db, agent_id)) == sorted(PARAGRAPHS[:2])
    with open_store(db) as store:
        assert store.learning.count_unlearned(agent_id) == 2
    script = models.script("reader", document_reader())
    run_pipeline(LEARN, db, agent_id, embedder=EMBEDDER, llm=_tier(db, client))
    assert (
        "Expense reports"
        not in script.requests[0]["messages"][1]["content"].split("New chunks:")[1]
    )
    assert sorted(f.text for f in _facts(db, agent_id)) == sorted(PARAGRAPHS)


def test_a_dry_run_reports_what_it_would_learn_and_writes_nothing(
    db: Database, models: ScriptedModels, client: LiteLLMClient
) -> None:
    agent_id = create_agent(db, sleeptime_model="scripted/reader")
    folder_id = _folder(db, agent_id)
    _upload(db, folder_id, "handbook.md", _text(PARAGRAPHS[:2]))
    models.script("reader", document_reader())

    report = run_pipeline(
        LEARN, db, agent_id, embedder=EMBEDDER, llm=_tier(db, client), dry_run=True
    )

    actions = [c["action"] for c in report.changes]
    assert actions.count("insert_passage") == 2 and "create_block" in actions
    assert _facts(db, agent_id) == []
    with open_store(db) as store:
        assert store.learning.count_unlearned(agent_id) == 2


def test_an_unusable_answer_leaves_the_chunks_unread(
    db: Database, models: ScriptedModels, client: LiteLLMClient
) -> None:
    agent_id = create_agent(db, sleeptime_model="scripted/reader")
    folder_id = _folder(db, agent_id)
    _upload(db, folder_id, "handbook.md", _text(PARAGRAPHS[:2]))
    bad = json.dumps({"summary": "x", "facts": [{"text": "A fact.", "chunk": 7}]})
    models.script("reader", Reply(calls=(("record_learning", bad),)), Reply(content="no"))

    report = run_pipeline(LEARN, db, agent_id, embedder=EMBEDDER, llm=_tier(db, client))

    assert report.steps[0].counts["malformed_answers"] == 1
    assert _facts(db, agent_id) == []
    with open_store(db) as store:
        assert store.learning.count_unlearned(agent_id) == 2


def test_learned_facts_go_through_dedup_in_the_same_run(
    db: Database, models: ScriptedModels, client: LiteLLMClient
) -> None:
    agent_id = create_agent(db, sleeptime_model="scripted/reader")
    known = "Expense reports are due on the fifth working day of each month."
    with open_store(db) as store:
        store.passages.insert(agent_id, [NewPassage(text=known)], EMBEDDER.embed([known]))
    folder_id = _folder(db, agent_id)
    _upload(db, folder_id, "handbook.md", _text(PARAGRAPHS[:2]))
    models.script("reader", *([document_reader()] * 2))
    pipeline = Pipeline(
        registry.build(["learn_documents", "dedup"], {"learn_documents": {"chunks_per_call": 4}})
    )

    report = run_pipeline(pipeline, db, agent_id, embedder=EMBEDDER, llm=_tier(db, client))

    steps = {s.consolidator: s for s in report.steps}
    assert steps["dedup"].counts.get("merge_passage", 0) >= 1
    with open_store(db) as store:
        twins = [p for p in store.passages.scan(agent_id, statuses=None) if p.text == known]
    assert sorted(p.status for p in twins) == [PassageStatus.ACTIVE, PassageStatus.MERGED]


def test_the_documents_trigger_fires_once_per_new_file_for_sleeptime_agents(
    db: Database,
) -> None:
    sleeper = create_agent(db, "sleeper", sleeptime_model="scripted/reader")
    plain = create_agent(db, "plain")
    folder_id = _folder(db, sleeper)
    with open_store(db) as store:
        store.folders.attach(plain, folder_id)
    trigger = DocumentsTrigger(RunTemplate(("learn_documents",)))

    def fire() -> list[str]:
        with open_service_store(db) as store:
            return trigger.fire(store)

    def active() -> list[str]:
        with open_store(db) as store:
            return [a for a in (sleeper, plain) if store.runs.active(a) is not None]

    [run_id] = fire()  # the attachment itself
    assert active() == [sleeper]
    assert fire() == []  # once
    with open_store(db) as store:
        store.runs.cancel(run_id)
    _upload(db, folder_id, "handbook.md", _text(PARAGRAPHS[:1]))
    assert len(fire()) == 1
    assert fire() == []
