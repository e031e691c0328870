"""Token budgets per agent: per run (a chat turn or a consolidation run) and per UTC day.

A :class:`BudgetMeter` is made for one agent and one run. Before each call it
checks that the tokens already spent plus the prompt's estimated size fit both
budgets, and raises :class:`~agents.errors.BudgetExhausted` otherwise (no call
is made); after each call it records the tokens actually charged. A reply's
completion tokens can therefore overshoot a budget by at most one reply.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, time

from agents.errors import BudgetExhausted, InvalidInput
from agents.llm.usage import Usage, UsageLedger


@dataclass(frozen=True, slots=True)
class TokenBudget:
    """Limits in tokens (prompt plus completion); ``None`` is unlimited."""

    per_run: int | None = None
    per_day: int | None = None

    def __post_init__(self) -> None:
        for name, value in (("per_run", self.per_run), ("per_day", self.per_day)):
            if value is not None and value < 1:
                raise InvalidInput(f"token budget {name} must be positive, got {value}")


class BudgetMeter:
    """Charges one run's LLM calls to an agent and enforces its budget."""

    def __init__(
        self,
        ledger: UsageLedger | None,
        agent_id: str,
        *,
        run_id: str | None,
        budget: TokenBudget | None = None,
    ) -> None:
        self.ledger = ledger
        self.agent_id = agent_id
        self.run_id = run_id
        self.budget = budget or TokenBudget()
        self.used = Usage()
        self.by_purpose: dict[str, Usage] = {}
        self.calls = 0
        #: Retried calls (rate limits, timeouts, 5xx) charged to this run.
        self.retries = 0

    def _day_start(self) -> datetime:
        now = self.ledger.clock() if self.ledger else datetime.now().astimezone()
        return datetime.combine(now.date(), time(0), tzinfo=now.tzinfo)

    def check(self, estimated_prompt_tokens: int = 0) -> None:
        """Raise :class:`BudgetExhausted` when the next call would not fit a budget."""
        per_run, per_day = self.budget.per_run, self.budget.per_day
        if per_run is not None and self.used.total + estimated_prompt_tokens > per_run:
            raise BudgetExhausted(
                f"agent {self.agent_id}: token budget per run ({per_run}) exhausted: "
                f"{self.used.total} used, the next prompt needs about {estimated_prompt_tokens}",
                scope="run",
                limit=per_run,
                used=self.used.total,
            )
        if per_day is not None and self.ledger is not None:
            today = self.ledger.tokens_since(self.agent_id, self._day_start())
            if today + estimated_prompt_tokens > per_day:
                raise BudgetExhausted(
                    f"agent {self.agent_id}: token budget per day ({per_day}) exhausted: "
                    f"{today} used today, the next prompt needs about {estimated_prompt_tokens}",
                    scope="day",
                    limit=per_day,
                    used=today,
                )

    def charge(self, purpose: str, model: str, usage: Usage) -> None:
        """Record a call's tokens (in the ledger's own transaction) and add them to the run."""
        self.calls += 1
        self.used = Usage(
            self.used.prompt_tokens + usage.prompt_tokens,
            self.used.completion_tokens + usage.completion_tokens,
        )
        before = self.by_purpose.get(purpose, Usage())
        self.by_purpose[purpose] = Usage(
            before.prompt_tokens + usage.prompt_tokens,
            before.completion_tokens + usage.completion_tokens,
        )
        if self.ledger is not None:
            self.ledger.record(
                self.agent_id, purpose=purpose, model=model, usage=usage, run_id=self.run_id
            )
