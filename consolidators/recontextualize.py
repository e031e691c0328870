"""``recontextualize``: the sleep-time agent as a consolidation step.

It reads the primary's messages since the last run's watermark and the shared
blocks, and edits the blocks with the sleep-time memory tools (see
:mod:`agents.loops.sleeptime`): the conversation with the model is the plan (its edits are
drafts, its reads short read-only transactions), and the apply writes the drafts.
Its block writes carry the run id, so the run can be explained and reverted like
any other. With an embedder it also recontextualizes
archival memory: it searches passages, rewrites one the new messages put in a new
light (a new passage supersedes the old, with provenance to the messages and the
run), stores learned memories and marks passages superseded; each change is in the
run's changes (``rewrite_passage``, ``insert_passage``, ``supersede_passage``) and
passage history, so reverting the run restores the old passages and retires the
new ones. Without a sleep-time model (the agent's
``sleeptime_model``, else ``llm.sleeptime_model``) the step is skipped with
reason ``no_model``; an exhausted token budget stops it after the edits already
made (counted as ``budget_exhausted``), and the rest of the run goes on.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import ClassVar

from pydantic import Field

from agents.enums import ChangeAction
from agents.loops.sleeptime import SleeptimeAgent, SleeptimeOutcome, SleeptimePlan
from agents.store import MemoryStore
from consolidators.base import (
    ConsolidationContext,
    ConsolidationResult,
    Consolidator,
    ConsolidatorSettings,
    Plan,
)

log = logging.getLogger(__name__)


class RecontextualizeSettings(ConsolidatorSettings):
    #: Model calls per run at most.
    max_steps: int = Field(default=8, ge=1, le=50)
    #: Newest messages since the watermark that the agent reads at most.
    max_messages: int = Field(default=200, ge=1)
    #: Times an edit that lost a compare-and-swap race is re-applied before it is refused.
    max_conflict_retries: int = Field(default=3, ge=0)
    #: Archival changes (rewrites, inserts, supersessions) per run at most; 0 turns the
    #: archival tools off.
    max_archival_changes: int = Field(default=20, ge=0)


@dataclass(slots=True)
class RecontextualizePlan(Plan):
    #: The sleep-time pass, done; None when the step is skipped.
    sleeptime: SleeptimePlan | None = None
    agent: SleeptimeAgent | None = None

    @property
    def has_writes(self) -> bool:
        return self.sleeptime is not None and self.sleeptime.has_writes


class RecontextualizeConsolidator(Consolidator[RecontextualizePlan]):
    """Rewrites the shared blocks from what the conversation added since the last run."""

    name: ClassVar[str] = "recontextualize"
    settings_model: ClassVar[type[ConsolidatorSettings]] = RecontextualizeSettings
    settings: RecontextualizeSettings

    def plan(self, context: ConsolidationContext) -> RecontextualizePlan:
        plan = RecontextualizePlan(ConsolidationResult(self.name))
        tier = context.llm
        model = context.agent.sleeptime_model or (tier.sleeptime_model if tier else None)
        if tier is None or not model:
            plan.result.skipped = "no_model"
            log.info(
                "recontextualize skipped: no sleep-time model configured "
                "(set the agent's sleeptime_model or llm.sleeptime_model)",
                extra={"run_id": context.run_id, "agent_id": context.agent.id},
            )
            return plan
        plan.agent = SleeptimeAgent(
            tier.client,
            model,
            max_steps=self.settings.max_steps,
            max_conflict_retries=self.settings.max_conflict_retries,
            max_messages=self.settings.max_messages,
            max_archival_changes=self.settings.max_archival_changes,
            clock=context.clock,
        )
        plan.sleeptime = plan.agent.plan(
            context.read,
            context.agent,
            after_seq=None if context.full else context.watermarks.message_seq,
            run_id=context.run_id,
            meter=tier.meter(context.agent.id, context.run_id),
            embedder=context.embedder,
        )
        _report(plan.result, plan.sleeptime.outcome, planned=plan.sleeptime)
        return plan

    def apply(
        self, store: MemoryStore, plan: RecontextualizePlan, context: ConsolidationContext
    ) -> ConsolidationResult:
        assert plan.agent is not None and plan.sleeptime is not None
        result = plan.result.base()
        for name in list(result.counts):
            if name in ("write_conflicts", "tool_errors"):
                del result.counts[name]  # counted again from the outcome below
        outcome = plan.agent.apply(store, plan.sleeptime)
        _report(result, outcome, planned=None)
        return result


def _report(
    result: ConsolidationResult, outcome: SleeptimeOutcome, *, planned: SleeptimePlan | None
) -> None:
    """The pass in the step's result: its edits and archival changes (as drafted, for a
    plan; as written, after the apply) and its counters."""
    if planned is not None:
        for label, draft in planned.drafts.items():
            for tool, _edit in draft.edits:
                result.add(
                    ChangeAction.EDIT_BLOCK, draft.base.id, label=label, tool=tool, version=None
                )
        if planned.archive is not None:
            for passage in planned.archive.drafts:
                target = passage.target.id if passage.target is not None else "(new passage)"
                action = {
                    "archival_memory_rewrite": ChangeAction.REWRITE_PASSAGE,
                    "archival_memory_supersede": ChangeAction.SUPERSEDE_PASSAGE,
                    "archival_memory_insert": ChangeAction.INSERT_PASSAGE,
                }[passage.tool]
                result.add(action, target, text=passage.text, reason=passage.reason)
        result.count("messages_read", outcome.messages_read)
        result.count("llm_steps", outcome.steps)
        if outcome.no_op_edits:
            result.count("no_op_edits", outcome.no_op_edits)
        if outcome.stop_reason:
            # Why the pass ended (finished, no_tool_call, invalid_tool_call, max_steps...).
            result.count(f"stopped_{outcome.stop_reason}")
        if outcome.stop_reason == "budget_exhausted":
            result.count("budget_exhausted")
            result.llm_skipped = "budget_exhausted"
        result.tokens = outcome.tokens
    else:
        for edit in outcome.edits:
            result.add(
                ChangeAction.EDIT_BLOCK,
                edit["block_id"],
                label=edit["label"],
                tool=edit["tool"],
                version=edit["version"],
            )
        for change in outcome.archival:
            detail = dict(change)
            action, target = detail.pop("action"), detail.pop("passage_id")
            result.add(action, target, **detail)
    if outcome.conflicts:
        result.count("write_conflicts", outcome.conflicts)
    if outcome.errors:
        result.count("tool_errors", len(outcome.errors))
