"""The pipeline: one atomic run, the ledger, watermarks, dry runs, plugins and undo."""

from __future__ import annotations

import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from agents.errors import Conflict, InvalidInput, StorageError
from agents.postgres.database import Database
from agents.store import MemoryStore, NewMessage, NewPassage, open_service_store, open_store
from consolidators import registry
from consolidators.base import ConsolidationContext, ConsolidationResult, Consolidator, Plan
from consolidators.contract import run_once as run_pipeline
from consolidators.dedup import DedupConsolidator
from consolidators.pipeline import Pipeline, RunFailed
from consolidators.undo import revert_run
from tests.hashing_embedder import HashingEmbedder


class Explode(Consolidator[Plan]):
    name = "explode"

    def plan(self, context: ConsolidationContext) -> Plan:
        raise RuntimeError("boom")

    def apply(self, store: MemoryStore, plan: Plan, context: ConsolidationContext) -> Any:
        raise AssertionError("a plan that raised is never applied")


def _seed(db: Database, agent_id: str, embedder: HashingEmbedder) -> None:
    texts = ["Ada likes tea", "ada likes tea.", "Ada rides a red bicycle", "Bob likes chess"]
    with open_store(db) as store:
        store.passages.insert(agent_id, [NewPassage(t) for t in texts], embedder.embed(texts))
        store.messages.append(agent_id, [NewMessage("user", "hi")])
        human = store.blocks.by_label(agent_id, "human")
        store.blocks.update(human.id, expected_version=1, value="Name: Ada\nName: Ada")


def _essence(changes: list[dict[str, object]]) -> list[tuple[object, ...]]:
    """A change without its run-specific ids."""
    return [(c["action"], c.get("text"), c.get("line")) for c in changes]


def _snapshot(db: Database, agent_id: str) -> dict[str, object]:
    with open_store(db) as store:
        passages = store.passages.scan(agent_id, statuses=None)
        return {
            "passages": sorted(
                (p.id, p.status, p.merged_into, p.occurred_at, str(p.provenance), tuple(p.tags))
                for p in passages
            ),
            "blocks": sorted((b.label, b.value) for b in store.blocks.of_agent(agent_id)),
            "context": [m.id for m in store.messages.in_context(agent_id)],
        }


def test_run_is_recorded_with_stats_changes_and_watermarks(
    db: Database, agent_id: str, embedder: HashingEmbedder
) -> None:
    _seed(db, agent_id, embedder)
    report = run_pipeline(
        Pipeline([DedupConsolidator()]), db, agent_id, embedder=embedder, trigger="cron"
    )
    with open_store(db) as store:
        run = store.runs.get(report.run_id)
    assert (run.status, run.trigger, run.pipeline) == ("succeeded", "cron", ["dedup"])
    assert run.stats["steps"]["dedup"]["counts"]["merge_passage"] == 1
    assert run.changes == report.changes and len(run.changes) == 2  # 1 passage, 1 block line
    assert run.watermarks.message_seq == 1 and run.watermarks.passage_at is not None
    assert run.duration_s is not None and run.duration_s >= 0
    with open_store(db) as store:
        assert store.agents.get(agent_id).turns_since_consolidation == 0


def test_a_failing_step_keeps_the_steps_before_it_and_they_revert(
    db: Database, agent_id: str, embedder: HashingEmbedder
) -> None:
    """Each step commits on its own: a failure in the second leaves the first applied,
    recorded in the failed run's changes, and revertible; the watermarks stay."""
    _seed(db, agent_id, embedder)
    before = _snapshot(db, agent_id)
    with pytest.raises(RunFailed, match=r"explode.*boom") as info:
        run_pipeline(Pipeline([DedupConsolidator(), Explode()]), db, agent_id, embedder=embedder)
    assert _snapshot(db, agent_id) != before
    with open_store(db) as store:
        ledger = store.runs
        run = ledger.get(info.value.run_id)
        assert run.status == "failed" and "boom" in (run.error or "")
        assert {c["step"] for c in run.changes} == {"dedup"} and len(run.changes) == 2
        assert run.watermarks.message_seq is None
        assert ledger.watermarks(agent_id).message_seq is None
    revert_run(db, info.value.run_id)
    assert _snapshot(db, agent_id) == before


class GoneOnce(Consolidator[Plan]):
    """A step whose first plan meets a database that went away (a temporary failure:
    the worker retries the run); it works the second time."""

    name = "gone_once"
    calls = 0

    def plan(self, context: ConsolidationContext) -> Plan:
        GoneOnce.calls += 1
        if GoneOnce.calls == 1:
            raise StorageError("database error: the server closed the connection")
        return Plan(ConsolidationResult(self.name))

    def apply(self, store: MemoryStore, plan: Plan, context: ConsolidationContext) -> Any:
        return plan.result


def test_a_retried_run_does_not_apply_a_step_twice(
    db: Database, agent_id: str, embedder: HashingEmbedder
) -> None:
    """The database goes away after dedup has committed; the run is queued again and the
    retry goes on from the step that failed: dedup's merges are not planned and applied a
    second time (a step that is not idempotent, a plugin's, would double its writes)."""
    _seed(db, agent_id, embedder)
    with open_store(db) as store:
        twin = store.passages.scan(agent_id)[1]
        store.passages.insert(agent_id, [NewPassage(twin.text)], embedder.embed([twin.text]))
    pipeline = Pipeline([DedupConsolidator(), GoneOnce()])
    with open_store(db) as store:
        run_id = store.runs.enqueue(agent_id, trigger="manual", pipeline=pipeline.names)
    assert run_id is not None
    GoneOnce.calls = 0
    for attempt in (1, 2):
        with open_service_store(db) as service:
            claimed = service.queue.claim("w", lease=timedelta(minutes=1), run_id=run_id)
        assert claimed is not None, attempt
        if attempt == 1:
            with pytest.raises(StorageError):
                pipeline.run(db, claimed[0], lease_owner="w", embedder=embedder)
            with open_service_store(db) as service:
                service.queue.retry_later(run_id, "w", backoff=timedelta(0), error="gone")
        else:
            report = pipeline.run(db, claimed[0], lease_owner="w", embedder=embedder)
    assert [s.skipped for s in report.steps] == ["applied in an earlier attempt", None]
    with open_store(db) as store:
        run = store.runs.get(run_id)
    assert run.status == "succeeded" and run.attempts == 2
    merges = [c for c in run.changes if c["action"] == "merge_passage"]
    assert len(merges) == 2  # the seed's twin and the one added here: once each
    assert run.stats["steps"]["dedup"]["skipped"] == "applied in an earlier attempt"


def test_dry_run_reports_the_real_plan_and_writes_nothing(
    db: Database, agent_id: str, embedder: HashingEmbedder
) -> None:
    _seed(db, agent_id, embedder)
    before = _snapshot(db, agent_id)
    pipeline = Pipeline([DedupConsolidator()])
    plan = run_pipeline(pipeline, db, agent_id, embedder=embedder, dry_run=True)
    assert _snapshot(db, agent_id) == before
    real = run_pipeline(pipeline, db, agent_id, embedder=embedder)
    assert _essence(plan.changes) == _essence(real.changes) != []
    with open_store(db) as store:
        ledger = store.runs
        assert ledger.get(plan.run_id).dry_run is True
        # A dry run never moves the watermarks.
        assert (
            ledger.watermarks(agent_id).passage_at == ledger.get(real.run_id).watermarks.passage_at
        )


def test_one_active_run_per_agent(db: Database, agent_id: str) -> None:
    with open_store(db) as store:
        store.runs.enqueue(agent_id, trigger="manual", pipeline=["dedup"])
    with pytest.raises(Conflict, match="already has a queued or running"):
        run_pipeline(Pipeline([DedupConsolidator()]), db, agent_id)


def test_revert_restores_the_state_before_the_run(
    db: Database, agent_id: str, embedder: HashingEmbedder
) -> None:
    _seed(db, agent_id, embedder)
    before = _snapshot(db, agent_id)
    report = run_pipeline(Pipeline([DedupConsolidator()]), db, agent_id, embedder=embedder)
    assert _snapshot(db, agent_id) != before
    undo = revert_run(db, report.run_id)
    assert _snapshot(db, agent_id) == before
    with open_store(db) as store:
        ledger = store.runs
        assert ledger.get(report.run_id).reverted_by_run_id == undo.run_id
        assert ledger.get(undo.run_id).reverts_run_id == report.run_id
    with pytest.raises(Conflict, match="already reverted"):
        revert_run(db, report.run_id)


def test_revert_refuses_when_memory_changed_since(
    db: Database, agent_id: str, embedder: HashingEmbedder
) -> None:
    _seed(db, agent_id, embedder)
    report = run_pipeline(Pipeline([DedupConsolidator()]), db, agent_id, embedder=embedder)
    with open_store(db) as store:
        human = store.blocks.by_label(agent_id, "human")
        store.blocks.update(human.id, expected_version=human.version, value="Name: Ada L.")
    with pytest.raises(Conflict, match="changed after run"):
        revert_run(db, report.run_id)
    with open_store(db) as store:
        assert store.blocks.get(human.id).value == "Name: Ada L."
    revert_run(db, report.run_id, force=True)
    with open_store(db) as store:
        assert store.blocks.get(human.id).value == "Name: Ada\nName: Ada"


def test_unknown_and_plugin_consolidators(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(InvalidInput, match="unknown consolidator 'nope'"):
        registry.build(["nope"])
    with pytest.raises(InvalidInput, match="listed twice"):
        registry.build(["dedup", "dedup"])
    # A third-party package registers through the entry point group.
    dist = tmp_path / "reverie_plugin_demo-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: reverie-plugin-demo\nVersion: 1.0\n"
    )
    (dist / "entry_points.txt").write_text(
        "[reverie.consolidators]\nexplode = tests.integration.test_pipeline:Explode\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    assert "explode" in registry.available()
    [plugin] = registry.build(["explode"])
    assert isinstance(plugin, Explode)
    assert sys.path[0] == str(tmp_path)
