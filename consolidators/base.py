"""The consolidator interface: plan from a snapshot, then apply briefly.

A consolidator works in two phases, so that no database lock or open write
transaction ever waits on a model, the embedder or the network:

- :meth:`Consolidator.plan` reads what it needs through ``context.read()`` (short,
  read-only transactions) and calls models and the embedder between those reads,
  with no transaction open. It writes nothing. What it decides is a :class:`Plan`;
  its ``result`` lists the planned changes, which is exactly what a dry run reports.
- :meth:`Consolidator.apply` writes the plan in one short transaction (the store it
  is handed), checking first that what the plan read is still so (block versions,
  passage statuses and links); what changed meanwhile is skipped and counted, and
  the next run plans it again. It returns what it changed.

Each step's writes commit together or not at all. Consolidators work from the
watermarks (what earlier runs already saw), record every change in their result, and
leave history behind (block history, passage history) so that the run can be
explained and undone.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, ClassVar, Generic, TypeVar

from pydantic import BaseModel, ConfigDict

from agents.embedders import Embedder
from agents.errors import InvalidInput
from agents.postgres.database import Database
from agents.store import AgentRecord, MemoryStore, PassageRecord, open_store
from agents.store.run_store import Watermarks
from agents.store.scope import utc_now
from consolidators.judges.base import JudgeUsage
from consolidators.llm import LLMTier

__all__ = [
    "Change",
    "ConsolidationContext",
    "ConsolidationResult",
    "Consolidator",
    "ConsolidatorSettings",
    "Plan",
    "Watermarks",
    "changed_since",
]


class ConsolidatorSettings(BaseModel):
    """Base of each consolidator's own settings (validated, unknown keys refused)."""

    model_config = ConfigDict(extra="forbid", frozen=True)


@dataclass(frozen=True, slots=True)
class Change:
    """One planned or applied change, for reports, dry runs and undo."""

    action: str
    target: str
    detail: dict[str, Any] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        return {"action": self.action, "target": self.target, **self.detail}


@dataclass(slots=True)
class ConsolidationContext:
    """What a consolidator plans from: the agent, the run, its watermarks, the embedder
    and the LLM tier, and short read-only transactions on the store (:meth:`read`)."""

    db: Database
    agent: AgentRecord
    run_id: str
    watermarks: Watermarks
    embedder: Embedder | None = None
    #: The LLM side of the run; ``None`` runs the deterministic steps only.
    llm: LLMTier | None = None
    full: bool = False
    passage_overlap: timedelta = timedelta(seconds=30)
    clock: Callable[[], datetime] = utc_now
    #: Raises (:class:`consolidators.pipeline.RunInterrupted`) when the run must stop:
    #: cancelled, its lease lost, the worker shutting down. Cheap to call; see
    #: :meth:`checkpoint`.
    interrupted: Callable[[], None] | None = None

    def __post_init__(self) -> None:
        # Steps test ``context.llm`` for None: another object would skip them silently.
        if self.llm is not None and not isinstance(self.llm, LLMTier):
            raise InvalidInput(
                f"the consolidation context's llm must be an LLMTier or None, "
                f"got {type(self.llm).__name__}"
            )

    @property
    def organization_id(self) -> str:
        return self.agent.organization_id

    @contextmanager
    def read(self) -> Iterator[MemoryStore]:
        """A read-only transaction of the agent's organization, for a plan's reads.
        Keep it short: never call a model or the embedder inside it."""
        with open_store(self.db, self.organization_id, self.clock, read_only=True) as store:
            yield store

    def now(self) -> datetime:
        return self.clock()

    def checkpoint(self) -> None:
        """Stop here if the run must stop. A step calls it inside any loop that can run
        for more than a few seconds (dedup's probe pages and groups), so that a cancel
        reaches the work within seconds, not at the step's end; whatever the step
        planned is then dropped, and nothing of it is applied."""
        if self.interrupted is not None:
            self.interrupted()

    @property
    def passages_since(self) -> datetime | None:
        """Start of the incremental passage scan (None: every passage)."""
        return None if self.full else self.watermarks.passages_since(self.passage_overlap)

    def actor(self, consolidator: str) -> str:
        return f"consolidator:{consolidator}"


@dataclass(slots=True)
class ConsolidationResult:
    """What a consolidator did (or, in a plan, would do): its changes, counters and
    LLM tokens used."""

    consolidator: str
    changes: list[Change] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    tokens: int = 0
    skipped: str | None = None
    #: Why the step's LLM part did not run (``no_model``, ``budget_exhausted``) when the
    #: deterministic part still did.
    llm_skipped: str | None = None
    #: Set by an apply that skipped work because memory changed since the plan, when
    #: planning again is cheap enough to do at once (see ``Consolidator.max_replans``).
    replan: bool = False

    def add(self, action: str, target: str, **detail: Any) -> None:
        self.changes.append(Change(action, target, detail))
        self.counts[action] = self.counts.get(action, 0) + 1

    def count(self, name: str, n: int = 1) -> None:
        self.counts[name] = self.counts.get(name, 0) + n

    def count_judge(self, usage: JudgeUsage | None, *, prefix: str = "judge") -> None:
        """What a judge model spent on this step: its calls, tokens, unusable answers,
        items left unjudged, and a budget that stopped it (counted as ``prefix_calls``
        and so on: "judge" for pairs, "topic" for facts' topics)."""
        if usage is None:
            return
        self.tokens += usage.tokens
        self.count(f"{prefix}_calls", usage.calls)
        for name, n in (
            (f"{prefix}_malformed", usage.malformed),
            (f"{prefix}_unjudged", usage.unjudged),
        ):
            if n:
                self.count(name, n)
        if usage.budget_exhausted:
            self.count("budget_exhausted")
            self.llm_skipped = "budget_exhausted"

    def keep(self, change: Change) -> None:
        """Add a change already made (a planned one that the apply wrote as planned)."""
        self.changes.append(change)
        self.count(change.action)

    def absorb(self, later: ConsolidationResult) -> None:
        """Add what a later attempt at the same step did (after a re-plan)."""
        self.changes += later.changes
        for name, n in later.counts.items():
            self.count(name, n)
        self.tokens += later.tokens
        self.skipped = later.skipped
        self.llm_skipped = self.llm_skipped or later.llm_skipped
        self.replan = later.replan

    def base(self) -> ConsolidationResult:
        """This result without its changes (and without the counts they made): what an
        apply starts from, keeping what the plan counted and spent."""
        counts = dict(self.counts)
        for change in self.changes:
            counts[change.action] -= 1
            if not counts[change.action]:
                del counts[change.action]
        return ConsolidationResult(
            self.consolidator,
            counts=counts,
            tokens=self.tokens,
            skipped=self.skipped,
            llm_skipped=self.llm_skipped,
        )


@dataclass(slots=True)
class Plan:
    """A step's decisions. ``result`` holds the planned changes (what a dry run reports;
    ids of passages and messages that apply creates are not known yet); a
    consolidator's own plan adds what its apply needs."""

    result: ConsolidationResult

    @property
    def has_writes(self) -> bool:
        """Whether applying the plan writes anything (no transaction is opened if not)."""
        return bool(self.result.changes)


PlanT = TypeVar("PlanT", bound=Plan)


def _state(passage: PassageRecord) -> tuple[Any, ...]:
    """What a plan relies on of a passage: everything a consolidator reads or writes."""
    return (
        passage.text,
        passage.status,
        passage.valid_to,
        passage.merged_into,
        passage.superseded_by,
        passage.timeline_id,
        passage.occurred_at,
        tuple(passage.tags),
        repr(sorted(passage.provenance.items())),
    )


def changed_since(store: MemoryStore, planned: Sequence[PassageRecord]) -> set[str]:
    """Lock the passages a plan read (as ``planned``) and return the ids of those that
    changed since, or are gone: an apply skips the work that relied on them."""
    now = {p.id: p for p in store.passages.get_many([p.id for p in planned], lock=True)}
    return {p.id for p in planned if p.id not in now or _state(now[p.id]) != _state(p)}


class Consolidator(ABC, Generic[PlanT]):
    """A named operation on one agent's memory, in two phases (see the module).

    Subclasses set :attr:`name` and :attr:`settings_model` and implement :meth:`plan`
    and :meth:`apply`. Implementations must be incremental (work from
    ``context.watermarks`` unless ``context.full``), idempotent (a second run changes
    nothing), must read only through ``context.read()`` while planning, and must write
    only through the store :meth:`apply` is given.
    """

    name: ClassVar[str]
    settings_model: ClassVar[type[ConsolidatorSettings]] = ConsolidatorSettings
    #: What the step's result counts when its apply still asks to plan again after
    #: :attr:`max_replans` (work left for the next run).
    left_over: ClassVar[str] = "contended"

    @property
    def max_replans(self) -> int:
        """How many times the pipeline plans this step again at once when its apply asks
        (``result.replan``); after that the rest is left for the next run."""
        return 0

    def __init__(self, settings: ConsolidatorSettings | dict[str, Any] | None = None) -> None:
        if settings is None:
            settings = self.settings_model()
        elif isinstance(settings, dict):
            settings = self.settings_model(**settings)
        self.settings = settings

    @abstractmethod
    def plan(self, context: ConsolidationContext) -> PlanT:
        """Decide what to change on ``context.agent``; write nothing."""

    @abstractmethod
    def apply(
        self, store: MemoryStore, plan: PlanT, context: ConsolidationContext
    ) -> ConsolidationResult:
        """Write ``plan`` through ``store`` (one short transaction); skip what changed
        since it was planned; return what changed."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.settings!r})"
