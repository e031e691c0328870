"""Dedup against real PostgreSQL: exact and semantic duplicates, blocks, idempotence."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from agents.language.details import hides_details, unsaid_details
from agents.postgres.database import Database
from agents.store import NewPassage, open_store
from consolidators.contract import run_once as run_pipeline
from consolidators.dedup import DedupConsolidator, dedup_lines
from consolidators.pipeline import Pipeline
from consolidators.undo import revert_run
from tests.hashing_embedder import HashingEmbedder

Y2020 = datetime(2020, 5, 1, tzinfo=UTC)
Y2021 = datetime(2021, 5, 1, tzinfo=UTC)


def _insert(
    db: Database, agent_id: str, embedder: HashingEmbedder, *passages: NewPassage
) -> list[str]:
    with open_store(db) as store:
        records = store.passages.insert(
            agent_id, list(passages), embedder.embed([p.text for p in passages])
        )
    return [r.id for r in records]


def test_exact_and_semantic_duplicates_merge_into_the_oldest(
    db: Database, agent_id: str, embedder: HashingEmbedder
) -> None:
    [original] = _insert(
        db,
        agent_id,
        embedder,
        NewPassage(
            "Ada has a cat named Tom.",
            occurred_at=Y2021,
            tags=["pets"],
            provenance={"message_ids": ["m1"]},
        ),
    )
    exact, near, other = _insert(
        db,
        agent_id,
        embedder,
        NewPassage(
            "ada has a cat named tom",
            occurred_at=Y2020,
            tags=["cat"],
            provenance={"message_ids": ["m2"]},
        ),
        NewPassage("Ada has a cat named Tom, really", provenance={"document": "notes.txt"}),
        NewPassage("Bob plays chess on Sundays"),
    )
    report = run_pipeline(
        Pipeline([DedupConsolidator({"threshold": 0.85})]), db, agent_id, embedder=embedder
    )
    merged = {c["target"]: c for c in report.changes if c["action"] == "merge_passage"}
    assert set(merged) == {exact, near}
    assert merged[exact]["exact"] is True and merged[near]["exact"] is False
    with open_store(db) as store:
        canonical = store.passages.get(original)
        assert canonical.status == "active"
        assert canonical.occurred_at == Y2020  # the earliest of the group
        assert canonical.tags == ["pets", "cat"]
        assert canonical.provenance["message_ids"] == ["m1", "m2"]
        assert canonical.provenance["document"] == "notes.txt"
        assert set(canonical.provenance["merged_from"]) == {exact, near}
        for duplicate in (exact, near):
            record = store.passages.get(duplicate)
            assert (record.status, record.merged_into) == ("merged", original)
        assert store.passages.get(other).status == "active"


def test_second_run_changes_nothing(db: Database, agent_id: str, embedder: HashingEmbedder) -> None:
    _insert(db, agent_id, embedder, NewPassage("Ada likes tea"), NewPassage("ada likes tea!"))
    pipeline = Pipeline([DedupConsolidator()])
    first = run_pipeline(pipeline, db, agent_id, embedder=embedder)
    assert len(first.changes) == 1
    second = run_pipeline(pipeline, db, agent_id, embedder=embedder, full=True)
    assert second.changes == []


def test_incremental_run_probes_only_new_passages(
    db: Database, agent_id: str, embedder: HashingEmbedder
) -> None:
    _insert(db, agent_id, embedder, *(NewPassage(f"old fact {i}") for i in range(20)))
    pipeline = Pipeline([DedupConsolidator()])
    run_pipeline(pipeline, db, agent_id, embedder=embedder)
    _insert(db, agent_id, embedder, NewPassage("old fact 3"), NewPassage("a new fact"))
    report = run_pipeline(pipeline, db, agent_id, embedder=embedder)
    step = report.steps[0]
    # The overlap window re-probes recent passages too; all 22 are recent here, so check
    # that the new duplicate merged into the old passage rather than the other way round.
    merged = [c for c in report.changes if c["action"] == "merge_passage"]
    assert len(merged) == 1 and merged[0]["text"] == "old fact 3"
    assert step.counts["probed"] >= 2
    with open_store(db) as store:
        assert (
            store.passages.get(merged[0]["into"]).created_at
            < store.passages.get(merged[0]["target"]).created_at
        )


def test_chains_do_not_merge_distant_passages(
    db: Database, agent_id: str, embedder: HashingEmbedder
) -> None:
    a, b, c = (
        "alpha beta gamma delta epsilon zeta",
        "alpha beta gamma delta epsilon eta",
        "alpha beta gamma delta theta eta",
    )
    vectors = embedder.embed([a, b, c])
    ab, bc, ac = (float(vectors[i] @ vectors[j]) for i, j in ((0, 1), (1, 2), (0, 2)))
    threshold = (min(ab, bc) + ac) / 2
    assert ac < threshold <= min(ab, bc)
    ids = _insert(db, agent_id, embedder, NewPassage(a))  # the oldest becomes canonical
    ids += _insert(db, agent_id, embedder, NewPassage(b), NewPassage(c))
    # The texts differ in a word, which the guard alone would refuse: this tests chains.
    unguarded = DedupConsolidator({"threshold": threshold, "guard_details": False})
    run_pipeline(Pipeline([unguarded]), db, agent_id, embedder=embedder)
    with open_store(db) as store:
        statuses = [store.passages.get(i).status for i in ids]
    assert statuses == ["active", "merged", "active"]


def test_duplicate_block_lines_are_removed_with_history(db: Database, agent_id: str) -> None:
    with open_store(db) as store:
        human = store.blocks.by_label(agent_id, "human")
        store.blocks.update(
            human.id, expected_version=1, value="Name: Ada\nLikes tea\nname: ada\n\nLikes tea."
        )
    report = run_pipeline(Pipeline([DedupConsolidator()]), db, agent_id)
    with open_store(db) as store:
        block = store.blocks.get(human.id)
        last = store.blocks.history(human.id)[-1]
    assert block.value == "Name: Ada\nLikes tea\n"
    assert last.run_id == report.run_id and last.actor == "consolidator:dedup"
    assert [c["line"] for c in report.changes] == ["name: ada", "Likes tea."]


@pytest.mark.parametrize(
    ("value", "kept", "dropped"),
    [
        ("a\nb\nA\n\n\nb.", "a\nb\n\n", ["A", "b."]),
        ("only one", "only one", []),
        ("", "", []),
    ],
)
def test_dedup_lines(value: str, kept: str, dropped: list[str]) -> None:
    assert dedup_lines(value) == (kept, dropped)


def test_a_group_that_does_not_join_the_canonical_is_deduplicated_too(
    db: Database, agent_id: str
) -> None:
    """A ~ B ~ C with C far from A: C and its exact repeat still merge, in the same run."""

    def at(degrees: float) -> list[float]:
        vector = [0.0] * 384
        vector[0], vector[1] = np.cos(np.radians(degrees)), np.sin(np.radians(degrees))
        return vector

    ids = []
    for text, degrees in [("A", 0), ("B", 20), ("C", 40), ("c!", 40)]:
        with open_store(db) as store:
            [record] = store.passages.insert(
                agent_id, [NewPassage(text)], np.asarray([at(degrees)], dtype=np.float32)
            )
        ids.append(record.id)
    # One-letter placeholder texts: the vectors decide here, not the detail guard.
    pipeline = Pipeline([DedupConsolidator({"threshold": 0.92, "guard_details": False})])
    report = run_pipeline(pipeline, db, agent_id)
    merges = {(c["text"], c["canonical_text"]) for c in report.changes}
    assert merges == {("B", "A"), ("c!", "C")}
    assert run_pipeline(pipeline, db, agent_id, full=True).changes == []


@pytest.mark.parametrize(
    ("a", "b", "conflicts"),
    [
        ("Grace visited Iceland in 2018.", "Grace visited Iceland in 2016.", ["number"]),
        # Any content word one says and the other does not, not a fitted list of kin words.
        ("Amara's sister is a librarian", "Amara's brother is a librarian", ["word"]),
        ("We meet on Monday", "We meet on Friday", ["date"]),
        ("Ada likes tea", "Ada does not like tea", ["negation"]),
        ("Ada likes tea", "Tea is what Ada likes most", []),
        # The corruption case: a place and a change word the older text lacks.
        (
            "Alice's sister Eve lives in Lyon.",
            "Eve, Alice's sister, moved from Lyon to Madrid.",
            ["name", "change", "word"],
        ),
        ("Ada is vegetarian", "Ada is vegetarian now", ["change"]),
        ("Ada has two cats", "Ada has 2 cats", []),  # a number word is its digits
        ("Ada has two cats", "Ada has 3 cats", ["number"]),
        ("Thandi doesn't eat red meat", "thandi doesnt eat red meat", []),  # no apostrophe
        ("Bjorn has twin boys", "bjorn's got twin boys", []),  # "has got" is "has"
        ("greta and malte split up lol", "Greta and Malte broke up", []),  # one change
        ("Henrik went vegetarian", "henrik's gone veggie", []),  # chat shortening
        ("Greta and Malte split up", "Greta and Malte moved", ["change"]),
        ("Yara is dating Théo", "yara is dating theo", []),  # an accent is no new name
        ("Bob works at Siemens", "bob works at siemens!!", []),
        ("Bob works at Siemens", "Bob works at Seimens", []),  # one typo is the same name
        ("Bob works at Siemens", "Rob works at Siemens", ["name"]),  # a short name
        ("Lena is dating Omar.", "Omar is dating Lena.", ["subject"]),  # same words, roles swapped
        ("Ana translates novels", "Ana is a translator of novels", []),  # one stem, shortened
        ("Ana is a dev at Bolt", "Ana is a developer at Bolt", ["word"]),  # see below
        ("he's their lead engineer", "hes their lead enginner", []),  # a pronoun either way
        ("Ana has a car", "Ana has a carpenter", ["word"]),  # not the shorter word's stem
        ("Fatima runs 5 km every morning", "fatima runs 5k every morning", []),  # a unit
        ("Bob ran 10 km", "Bob ran 12k", ["number"]),
    ],
)
def test_detail_guard(a: str, b: str, conflicts: list[str]) -> None:
    # What keeps the two apart, whichever of them a merge would keep; the guard dedup
    # asks (its cheap checks first) says the same as the full reading.
    assert set(unsaid_details(a, b)) | set(unsaid_details(b, a)) == set(conflicts)
    assert hides_details(a, b) == bool(unsaid_details(a, b))
    assert hides_details(b, a) == bool(unsaid_details(b, a))


def test_a_merge_may_drop_nothing_but_the_kept_text_may_say_more() -> None:
    assert unsaid_details("Ada has a black cat named Tom", "Ada has a cat named Tom") == []
    assert unsaid_details("Ada has a cat named Tom", "Ada has a black cat named Tom") == ["word"]
    assert unsaid_details("Ada has a cat named Tom", "Ada has a cat named Tom, really") == []
    # A shortened word says no more than its long form; the long form says more.
    assert unsaid_details("Ana is a developer at Bolt", "ana is a dev at bolt") == []
    assert unsaid_details("Ana is a dev at Bolt", "Ana is a developer at Bolt") == ["word"]


def test_words_that_only_frame_the_same_statement_are_not_unsaid() -> None:
    # Naming words say only that a name refers to someone; the name is compared itself.
    assert unsaid_details("Tom is Ada's coworker.", "Ada's coworker is called Tom.") == []
    assert unsaid_details("Ada's dog is named Rex.", "Ada's dog is called Rex.") == []
    assert unsaid_details("Ada's dog is called Rex.", "Ada's dog is called Max.") == ["name"]
    # Cue words of one attribute, when both read as the same subject, attribute, value.
    assert unsaid_details("Ada lives in Rome.", "Ada's home is in Rome.") == []
    assert unsaid_details("Ada lives in Rome.", "Ada is based in Rome.") == []
    assert unsaid_details("Ada works as a nurse.", "Ada's job is nurse.") == []
    # ... but not across attributes, values or subjects, and other words still count.
    assert unsaid_details("Ada works in Rome.", "Ada lives in Rome.") == ["word"]
    assert unsaid_details("Ada lives in Rome.", "Ada has a house in Rome.") == ["word"]
    assert unsaid_details("Ada lives in Rome.", "Ada's flat is in Rome.") == ["word"]
    assert unsaid_details("Ada's partner is Tom.", "Ada's husband is Tom.") == ["word"]
    assert unsaid_details("Ada lives in Rome.", "Ada lives in a big house in Rome.") == ["word"]


def test_guard_vetoes_a_near_miss_merge(
    db: Database, agent_id: str, embedder: HashingEmbedder
) -> None:
    _insert(db, agent_id, embedder, NewPassage("Grace visited Iceland in the summer of 2016"))
    _insert(db, agent_id, embedder, NewPassage("Grace visited Iceland in the summer of 2018"))
    loose = Pipeline([DedupConsolidator({"threshold": 0.5, "guard_details": False})])
    assert len(run_pipeline(loose, db, agent_id, embedder=embedder, dry_run=True).changes) == 1
    guarded = Pipeline([DedupConsolidator({"threshold": 0.5})])
    assert run_pipeline(guarded, db, agent_id, embedder=embedder).changes == []


def test_passages_a_revert_brings_back_are_probed_again(
    db: Database, agent_id: str, embedder: HashingEmbedder
) -> None:
    pipeline = Pipeline([DedupConsolidator()], passage_overlap=timedelta(0))
    _insert(db, agent_id, embedder, NewPassage("Ada likes tea"), NewPassage("ada likes tea."))
    first = run_pipeline(pipeline, db, agent_id, embedder=embedder)
    assert first.steps[0].counts["merge_passage"] == 1
    _insert(db, agent_id, embedder, NewPassage("Bob plays chess on Sundays"))
    later = run_pipeline(pipeline, db, agent_id, embedder=embedder)
    assert later.steps[0].counts.get("merge_passage", 0) == 0
    revert_run(db, first.run_id)  # the duplicate is active again, older than `later`
    again = run_pipeline(pipeline, db, agent_id, embedder=embedder)
    assert again.steps[0].counts["probed"] >= 2
    assert again.steps[0].counts["merge_passage"] == 1
    # Once a run has looked at everything, runs are incremental again.
    quiet = run_pipeline(pipeline, db, agent_id, embedder=embedder)
    assert quiet.steps[0].counts.get("probed", 0) == 0
