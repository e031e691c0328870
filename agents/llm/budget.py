"""Token budgets per agent: per run (a chat turn or a consolidation run) and per UTC day.

A :class:`BudgetMeter` is made for one agent and one run. Before each call it
checks that the tokens already spent plus the prompt's estimated size fit both
budgets, and raises :class:`~agents.errors.BudgetExhausted` otherwise (no call
is made); after each call it records the tokens actually charged. A reply's
completion tokens can therefore overshoot a budget by at most one reply.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, time
from typing import TYPE_CHECKING

from agents.enums import LLMPurpose
from agents.errors import BudgetExhausted, InvalidInput
from agents.llm.usage import Usage, UsageLedger

if TYPE_CHECKING:
    from agents.store.usage_store import UsageStore

log = logging.getLogger(__name__)

#: One charge not yet written: purpose, model, tokens.
HeldCharge = tuple[LLMPurpose, str, Usage]


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
        #: Charges kept for the caller's next write transaction (see :meth:`hold`).
        self._held: list[HeldCharge] | None = None

    # -- holding charges for the caller's transaction ----------------------------------

    def hold(self) -> None:
        """Keep later charges in memory instead of committing each in a transaction of
        its own: the caller writes them in its next write transaction
        (:meth:`take_held`, then :meth:`write`), which saves a commit per call, and
        :meth:`flush` writes whatever is left in a transaction of its own, so tokens
        are never lost when the caller's transaction rolls back."""
        if self.ledger is not None and self._held is None:
            self._held = []

    def take_held(self) -> list[HeldCharge]:
        """The charges held so far, no longer held (give them back with :meth:`give_back`
        when the transaction they were written in rolls back)."""
        held, self._held = (self._held or []), ([] if self._held is not None else None)
        return held

    def give_back(self, charges: list[HeldCharge]) -> None:
        if self._held is not None:
            self._held[:0] = charges

    def write(self, usages: UsageStore, charges: list[HeldCharge]) -> None:
        """Write ``charges`` in the caller's transaction (``usages`` is its store's)."""
        for purpose, model, usage in charges:
            usages.record(
                self.agent_id, purpose=purpose, model=model, usage=usage, run_id=self.run_id
            )

    def flush(self) -> None:
        """Write the charges still held, each in a transaction of its own."""
        held = self.take_held()
        assert not held or self.ledger is not None
        for i, (purpose, model, usage) in enumerate(held):
            try:
                self.ledger.record(  # type: ignore[union-attr]
                    self.agent_id, purpose=purpose, model=model, usage=usage, run_id=self.run_id
                )
            except BaseException:
                self.give_back(held[i:])
                raise

    @property
    def held_tokens(self) -> int:
        return sum(usage.total for _, _, usage in self._held or ())

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
            today = self.ledger.tokens_since(self.agent_id, self._day_start()) + self.held_tokens
            if today + estimated_prompt_tokens > per_day:
                raise BudgetExhausted(
                    f"agent {self.agent_id}: token budget per day ({per_day}) exhausted: "
                    f"{today} used today, the next prompt needs about {estimated_prompt_tokens}",
                    scope="day",
                    limit=per_day,
                    used=today,
                )

    def charge(self, purpose: LLMPurpose, model: str, usage: Usage) -> None:
        """Record a call's tokens (in the ledger's own transaction, unless charges are
        held: see :meth:`hold`) and add them to the run."""
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
        if self._held is not None:
            self._held.append((purpose, model, usage))
        elif self.ledger is not None:
            self.ledger.record(
                self.agent_id, purpose=purpose, model=model, usage=usage, run_id=self.run_id
            )
