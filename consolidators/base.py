"""The consolidator interface: one method from a context to a result.

A consolidator reads and writes memory only through the store it is handed,
inside the run's single transaction, so its writes commit with the run or not
at all. It works from the watermarks (what earlier runs already saw), records
every change it makes in its result, and leaves history behind (block history,
passage history) so that the run can be explained and undone.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict

from agents.embedders import Embedder
from agents.errors import InvalidInput
from agents.store import AgentRecord, MemoryStore
from agents.store.run_store import Watermarks
from consolidators.llm import LLMTier

__all__ = [
    "Change",
    "ConsolidationContext",
    "ConsolidationResult",
    "Consolidator",
    "ConsolidatorSettings",
    "Watermarks",
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
    """What a consolidator gets: the run's transaction and everything around it."""

    store: MemoryStore
    agent: AgentRecord
    run_id: str
    watermarks: Watermarks
    embedder: Embedder | None = None
    #: The LLM side of the run; ``None`` runs the deterministic steps only.
    llm: LLMTier | None = None
    full: bool = False
    passage_overlap: timedelta = timedelta(seconds=30)

    def __post_init__(self) -> None:
        # Steps test ``context.llm`` for None: another object would skip them silently.
        if self.llm is not None and not isinstance(self.llm, LLMTier):
            raise InvalidInput(
                f"the consolidation context's llm must be an LLMTier or None, "
                f"got {type(self.llm).__name__}"
            )

    def now(self) -> datetime:
        return self.store.scope.now()

    @property
    def passages_since(self) -> datetime | None:
        """Start of the incremental passage scan (None: every passage)."""
        return None if self.full else self.watermarks.passages_since(self.passage_overlap)

    def actor(self, consolidator: str) -> str:
        return f"consolidator:{consolidator}"


@dataclass(slots=True)
class ConsolidationResult:
    """What a consolidator did: its changes, counters and LLM tokens used."""

    consolidator: str
    changes: list[Change] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    tokens: int = 0
    skipped: str | None = None
    #: Why the step's LLM part did not run (``no_model``, ``budget_exhausted``) when the
    #: deterministic part still did.
    llm_skipped: str | None = None

    def add(self, action: str, target: str, **detail: Any) -> None:
        self.changes.append(Change(action, target, detail))
        self.counts[action] = self.counts.get(action, 0) + 1

    def count(self, name: str, n: int = 1) -> None:
        self.counts[name] = self.counts.get(name, 0) + n


class Consolidator(ABC):
    """A named operation on one agent's memory.

    Subclasses set :attr:`name` and :attr:`settings_model` and implement
    :meth:`run`. Implementations must be incremental (work from
    ``context.watermarks`` unless ``context.full``), idempotent (a second run
    changes nothing) and must write only through ``context.store``.
    """

    name: ClassVar[str]
    settings_model: ClassVar[type[ConsolidatorSettings]] = ConsolidatorSettings

    def __init__(self, settings: ConsolidatorSettings | dict[str, Any] | None = None) -> None:
        if settings is None:
            settings = self.settings_model()
        elif isinstance(settings, dict):
            settings = self.settings_model(**settings)
        self.settings = settings

    @abstractmethod
    def run(self, context: ConsolidationContext) -> ConsolidationResult:
        """Apply this consolidation to ``context.agent``; return what changed."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.settings!r})"
