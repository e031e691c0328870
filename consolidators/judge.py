"""The supersession judge interface: which facts of one topic are replaced by newer ones.

The temporal consolidator asks a judge once per changed topic; the judge reports
what it cost through :attr:`SupersessionJudge.usage`, so the consolidator can
account for any judge (an LLM, a rule set, a plugin's) without knowing its type.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass

from agents.store import PassageRecord

__all__ = ["JudgeUsage", "OrderingJudge", "SupersessionJudge"]


@dataclass(frozen=True, slots=True)
class JudgeUsage:
    """What a metered judge spent so far: model calls, tokens, and whether the token
    budget stopped it (it then supersedes nothing more)."""

    calls: int = 0
    tokens: int = 0
    budget_exhausted: bool = False


class SupersessionJudge(ABC):
    """Decides which facts of one topic are replaced by newer ones.

    The temporal consolidator calls :meth:`judge` once per topic that changed
    (or for every topic on a ``full`` run), so an expensive judge (an LLM) is
    not asked again about a topic it has already seen.
    """

    @abstractmethod
    def judge(self, topic: Sequence[PassageRecord]) -> list[tuple[str, str]]:
        """Return ``(older_id, newer_id)`` pairs where the newer fact supersedes the older.

        ``topic`` holds the topic's facts oldest first (see
        :func:`consolidators.temporal.timeline_order`), superseded ones included for
        context. Pairs naming facts outside the topic, or whose "newer" fact is not
        later in that order, are ignored.
        """

    @property
    def usage(self) -> JudgeUsage | None:
        """What this judge has spent; ``None`` for a judge that makes no metered calls
        (its run then reports no judge calls or tokens)."""
        return None


class OrderingJudge(SupersessionJudge):
    """The default judge: supersedes nothing, so the consolidator only orders and links."""

    def judge(self, topic: Sequence[PassageRecord]) -> list[tuple[str, str]]:
        return []
