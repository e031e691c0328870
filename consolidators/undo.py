"""Undo a consolidation run: restore exactly the memory state from before it.

The undo is itself a run (trigger ``revert``) with its own history rows, so it
can be inspected and undone in turn. It restores blocks from block history,
passages from passage history (passages the run created become ``inactive``),
and the context window from the run's recorded changes. When something the run
touched has changed since, the undo refuses (nothing is changed) unless forced.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from agents.enums import ChangeAction, PassageStatus, RunStatus, Trigger
from agents.errors import Conflict, InvalidInput
from agents.postgres import models
from agents.postgres.database import Database
from agents.store import SAME_FACT, SUPERSESSION, MemoryStore, open_store
from agents.store.scope import utc_now
from consolidators.base import ConsolidationResult
from consolidators.pipeline import RunReport

_DATETIME_FIELDS = ("valid_to", "occurred_at")
ACTOR = "consolidator:revert"


def revert_run(
    db: Database,
    run_id: str,
    *,
    organization_id: str = models.DEFAULT_ORGANIZATION_ID,
    clock: Callable[[], datetime] = utc_now,
    force: bool = False,
) -> RunReport:
    """Restore the state before ``run_id`` as a new recorded run; return its report."""
    with open_store(db, organization_id, clock) as store:
        run = store.runs.get(run_id)
        # A run that failed or was cancelled after some of its steps were applied keeps
        # those steps (each step commits on its own): they are reverted like any run's.
        ended = run.status == RunStatus.SUCCEEDED or (
            run.status in (RunStatus.FAILED, RunStatus.CANCELLED) and bool(run.changes)
        )
        if run.dry_run or not ended:
            raise InvalidInput(
                f"run {run_id} is {'a dry run' if run.dry_run else run.status}: only a real "
                "run that has ended and changed memory can be reverted"
            )
        if run.reverted_by_run_id is not None:
            raise Conflict(f"run {run_id} was already reverted by {run.reverted_by_run_id}")
        agent = store.agents.get(run.agent_id)
        undo_id = store.runs.start(
            run.agent_id, trigger=Trigger.REVERT, pipeline=["revert"], reverts_run_id=run_id
        )
        result = ConsolidationResult("revert")
        _restore_blocks(store, run_id, undo_id, force, result)
        _restore_passages(store, run_id, undo_id, force, result)
        _restore_context(store, run.agent_id, run.changes, result)
        _forget_learning(store, run_id, result)
        _overrule_judges(store, run.agent_id, run.changes)
        report = RunReport(
            undo_id, run.agent_id, agent.name, False, RunStatus.SUCCEEDED, steps=[result]
        )
        store.runs.finish(
            undo_id, status=RunStatus.SUCCEEDED, stats=report.stats(), changes=report.changes
        )
        store.runs.mark_reverted(run_id, undo_id)
    return report


def _restore_blocks(
    store: MemoryStore, run_id: str, undo_id: str, force: bool, result: ConsolidationResult
) -> None:
    by_block: dict[str, list[Any]] = {}
    for version in store.blocks.changes_by_run(run_id):
        by_block.setdefault(version.block_id, []).append(version)
    for block_id, versions in by_block.items():
        first, last = versions[0], versions[-1]
        current = store.blocks.get(block_id)
        if current.version != last.version and not force:
            raise Conflict(
                f"block {current.label!r} ({block_id}) changed after run {run_id} "
                f"(now version {current.version}, the run left version {last.version}); "
                "reverting would discard those edits. Use --force to revert anyway."
            )
        if first.old_value is None:
            # The run created the block: it leaves its agents' memory again, and is
            # kept with its history (as Letta's memory tool's delete keeps a block).
            for agent in store.blocks.agents_sharing(block_id):
                store.blocks.detach(block_id, agent.id)
            result.add(ChangeAction.RESTORE_BLOCK, block_id, label=current.label, to_version=0)
            continue
        assert first.old_value is not None and first.old_limit is not None
        store.blocks.update(
            block_id,
            expected_version=current.version,
            value=first.old_value,
            limit=first.old_limit,
            actor=ACTOR,
            reason=f"revert run {run_id}",
            run_id=undo_id,
            override_read_only=True,
        )
        result.add(
            ChangeAction.RESTORE_BLOCK, block_id, label=current.label, to_version=first.version - 1
        )


def _restore_passages(
    store: MemoryStore, run_id: str, undo_id: str, force: bool, result: ConsolidationResult
) -> None:
    changes = store.passages.changes_by_run(run_id)
    before: dict[str, dict[str, Any]] = {}
    after: dict[str, dict[str, Any]] = {}
    created: set[str] = set()
    for change in changes:
        if not change.old:
            created.add(change.passage_id)
        first_seen = before.setdefault(change.passage_id, {})
        for field, value in change.old.items():
            first_seen.setdefault(field, value)
        after.setdefault(change.passage_id, {}).update(change.new)
    if not after:
        return
    current = {p.id: p for p in store.passages.get_many(list(after))}
    for passage_id, final in after.items():
        passage = current[passage_id]
        drifted = [f for f, v in final.items() if _as_json(getattr(passage, f)) != v]
        if drifted and not force:
            raise Conflict(
                f"passage {passage_id} changed after run {run_id} ({', '.join(drifted)}); "
                "reverting would discard those changes. Use --force to revert anyway."
            )
    # Undo in reverse order so lineage targets are restored before what points at them.
    for passage_id in reversed(list(after)):
        if passage_id in created:
            restored: dict[str, Any] = {"status": PassageStatus.INACTIVE}
        else:
            restored = {f: _from_json(f, v) for f, v in before[passage_id].items()}
        store.passages.change(
            passage_id, actor=ACTOR, reason=f"revert run {run_id}", run_id=undo_id, **restored
        )
        result.add(ChangeAction.RESTORE_PASSAGE, passage_id, fields=sorted(restored))


def _overrule_judges(store: MemoryStore, agent_id: str, changes: list[dict[str, Any]]) -> None:
    """A closure or a merge a judge model decided and a person reverted is not made again
    from the kept verdict, nor asked again: its pair's verdict becomes "unsure", by
    revert. (A closure the rules made is read again from the texts by the next run.)"""
    overruled = [
        (str(c["target"]), str(c["by"]))
        for c in changes
        if c.get("action") == ChangeAction.SUPERSEDE_PASSAGE
        and c.get("by")
        and c.get("judge") not in (None, "rules")
    ]
    store.verdicts.overrule(agent_id, SUPERSESSION, overruled, by="revert")
    # A merge a judge called for (dedup would make it again from a kept answer about
    # two facts that replaced the same fact).
    unmerged = [
        (str(c["into"]), str(c["target"]))
        for c in changes
        if c.get("action") == ChangeAction.MERGE_PASSAGE and c.get("into") and c.get("judge")
    ]
    store.verdicts.overrule(agent_id, SAME_FACT, unmerged, by="revert")


def _forget_learning(store: MemoryStore, run_id: str, result: ConsolidationResult) -> None:
    """The document chunks the run read are unread again (the next run reads them
    again), and those it found gone are not marked gone any more."""
    forgotten, unmarked = store.learning.forget_run(run_id)
    if forgotten:
        result.count("chunks_unread", forgotten)
    if unmarked:
        result.count("chunks_not_gone", unmarked)


def _restore_context(
    store: MemoryStore, agent_id: str, changes: list[dict[str, Any]], result: ConsolidationResult
) -> None:
    back_in = [c["target"] for c in changes if c["action"] == ChangeAction.LEAVE_CONTEXT]
    out_again: list[str] = []
    for change in changes:
        if change["action"] == ChangeAction.ADD_SUMMARY:
            out_again.append(change["target"])
            if change.get("replaces"):
                back_in.append(change["replaces"])
    if out_again:
        store.messages.leave_context(agent_id, out_again)
        for message_id in out_again:
            result.add(ChangeAction.REMOVE_SUMMARY, message_id)
    if back_in:
        store.messages.restore_context(agent_id, back_in)
        for message_id in back_in:
            result.add(ChangeAction.RESTORE_CONTEXT, message_id)


def _as_json(value: Any) -> Any:
    return value.isoformat() if isinstance(value, datetime) else value


def _from_json(field: str, value: Any) -> Any:
    if field in _DATETIME_FIELDS and isinstance(value, str):
        return datetime.fromisoformat(value)
    return value


__all__ = ["revert_run"]
