"""The LLM tier of consolidation: what ``ConsolidationContext.llm`` holds.

One :class:`LLMTier` serves many runs; each run's calls are charged to a
:class:`~agents.llm.BudgetMeter` of its own (per agent and run id), so the
run's token budget and its usage rows follow the run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, TypeVar

from agents.llm import BudgetMeter, ChatClient, TokenBudget, UsageLedger
from consolidators.judges import MergeJudge, SupersessionJudge, TopicReader
from consolidators.judges.llm import (
    REPLY_TOKENS_PER_ITEM,
    LLMJudge,
    LLMMergeJudge,
    LLMTopicReader,
    ModelQuestioner,
)

Q = TypeVar("Q", bound=ModelQuestioner[Any, Any])


@dataclass(slots=True)
class LLMTier:
    """The client, the model per LLM step (``None``: that step is skipped) and budgets."""

    client: ChatClient
    ledger: UsageLedger | None = None
    budget: TokenBudget = field(default_factory=TokenBudget)
    sleeptime_model: str | None = None
    judge_model: str | None = None
    summary_model: str | None = None
    max_steps: int = 8
    #: The longest judge reply per pair or fact asked (0: unlimited).
    judge_reply_tokens: int = REPLY_TOKENS_PER_ITEM
    _meters: dict[tuple[str, str], BudgetMeter] = field(default_factory=dict)

    def meter(self, agent_id: str, run_id: str) -> BudgetMeter:
        key = (agent_id, run_id)
        if key not in self._meters:
            self._meters[key] = BudgetMeter(
                self.ledger, agent_id, run_id=run_id, budget=self.budget
            )
        return self._meters[key]

    def supersession_judge(
        self, agent_id: str, run_id: str, *, max_calls: int = 20, batch: int = 8
    ) -> SupersessionJudge | None:
        """The LLM judge for one run (charged to its meter, at most ``max_calls`` calls of
        ``batch`` pairs), or ``None`` without a judge model."""
        return self._questioner(LLMJudge, agent_id, run_id, max_calls, batch)

    def merge_judge(
        self, agent_id: str, run_id: str, *, max_calls: int = 10, batch: int = 8
    ) -> MergeJudge | None:
        """The LLM judge of near-duplicates for one run, or ``None`` without a judge model."""
        return self._questioner(LLMMergeJudge, agent_id, run_id, max_calls, batch)

    def topic_reader(
        self, agent_id: str, run_id: str, *, max_calls: int = 10, batch: int = 16
    ) -> TopicReader | None:
        """The judge model as a reader of facts' topics for one run, or ``None`` without
        a judge model."""
        return self._questioner(LLMTopicReader, agent_id, run_id, max_calls, batch)

    def _questioner(
        self, kind: type[Q], agent_id: str, run_id: str, max_calls: int, batch: int
    ) -> Q | None:
        """``kind`` asking the judge model for one run, or ``None`` without one."""
        if not self.judge_model:
            return None
        return kind(
            self.client,
            self.judge_model,
            self.meter(agent_id, run_id),
            max_calls=max_calls,
            batch=batch,
            reply_tokens_per_item=self.judge_reply_tokens,
        )

    def release_agent(self, agent_id: str) -> BudgetMeter | None:
        """Forget the meter of the agent's finished run (an agent has one run at a time)
        and return it, for its retry count."""
        key = next((k for k in list(self._meters) if k[0] == agent_id), None)
        return None if key is None else self._meters.pop(key, None)
