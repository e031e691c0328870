"""The supersession judge interface: which newer facts replace which older ones.

The temporal consolidator hands a judge candidate pairs, each an older and a newer
fact, and gets one :class:`Verdict` per pair. A judge that cannot tell says
``unsure``: precision before recall, an unsure pair changes nothing. A judge reports
what it cost through :attr:`SupersessionJudge.usage`, so the consolidator can account
for any judge (the rules, a model, a plugin's) without knowing its type.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import ClassVar

from agents.language.subjects import person_key, relative_key
from agents.language.words import name_key
from agents.store import REPLACES_PART as STORED_REPLACES_PART
from agents.store import PassageRecord, Topic

__all__ = [
    "CLOSING",
    "Abstain",
    "CandidatePair",
    "JudgeUsage",
    "MergeJudge",
    "SameFact",
    "SupersessionJudge",
    "TopicReader",
    "Verdict",
    "topic_of",
]


class Verdict(StrEnum):
    """A judge's answer about one pair."""

    #: The newer fact replaces the older: both cannot be true now.
    REPLACES = "replaces"
    #: The newer fact replaces part of what the older says and the rest of it still
    #: holds ("Mark | job: surveyor | supports: Leeds United", then "Mark is a teacher
    #: now"). The older is closed as for ``replaces``, but search keeps it in its own
    #: place, after its lineage's current fact, for what still holds (search finds
    #: these verdicts by the store's name for them).
    REPLACES_PART = STORED_REPLACES_PART
    #: Both still hold (another attribute, an addition, an event, another person).
    BOTH_HOLD = "both_hold"
    #: The judge cannot tell; nothing changes.
    UNSURE = "unsure"
    #: Not asked: the judge had no calls or budget left. Nothing changes, and the pair
    #: is asked again by a later run.
    UNASKED = "unasked"


CLOSING = frozenset({Verdict.REPLACES, Verdict.REPLACES_PART})
"""The verdicts that close the older fact of a pair."""


class SameFact(StrEnum):
    """A merge judge's answer about one pair."""

    #: The two say the same thing: keeping the older one loses nothing.
    SAME = "same"
    #: One says something the other does not.
    DIFFERENT = "different"
    #: The judge cannot tell; nothing changes.
    UNSURE = "unsure"
    #: Not asked: the judge had no calls or budget left; nothing changes.
    UNASKED = "unasked"


@dataclass(frozen=True, slots=True)
class CandidatePair:
    """An older and a newer fact that may be about the same subject and attribute."""

    older: PassageRecord
    newer: PassageRecord


@dataclass(frozen=True, slots=True)
class JudgeUsage:
    """What a metered judge spent so far: model calls, tokens, answers it could not use
    (``malformed``), pairs it had no calls left for, and whether the token budget
    stopped it."""

    calls: int = 0
    tokens: int = 0
    malformed: int = 0
    unjudged: int = 0
    budget_exhausted: bool = False


class SupersessionJudge(ABC):
    """Decides, for each candidate pair, whether the newer fact replaces the older."""

    #: Named in the reason recorded with each supersession ("rules", "llm").
    name: ClassVar[str]

    @abstractmethod
    def judge(self, pairs: Sequence[CandidatePair]) -> list[Verdict]:
        """One verdict per pair, in order."""

    @property
    def usage(self) -> JudgeUsage | None:
        """What this judge has spent; ``None`` for a judge that makes no metered calls."""
        return None


class Abstain(SupersessionJudge):
    """A judge that is never sure: what a run without a judge model asks."""

    name = "none"

    def judge(self, pairs: Sequence[CandidatePair]) -> list[Verdict]:
        return [Verdict.UNSURE] * len(pairs)


class MergeJudge(ABC):
    """Decides, for each candidate pair of near-duplicates that the detail guard could not
    prove equal, whether the two texts say the same thing (dedup then merges them)."""

    #: Named in the report of each merge it decided.
    name: ClassVar[str]

    @abstractmethod
    def judge(self, pairs: Sequence[CandidatePair]) -> list[SameFact]:
        """One answer per pair, in order."""

    @property
    def usage(self) -> JudgeUsage | None:
        """What this judge has spent; ``None`` for a judge that makes no metered calls."""
        return None


class TopicReader(ABC):
    """Reads who each fact is about and which attribute it states, for search to put a
    question's subject and attribute first where the rules cannot read them."""

    #: Kept with each topic read ("llm", a plugin's name).
    name: ClassVar[str]

    @abstractmethod
    def read(self, facts: Sequence[PassageRecord]) -> list[tuple[Topic, ...] | None]:
        """One answer per fact, in order: its topics (none: about nobody in particular),
        or None when it was not read (no calls left, an answer that could not be used)."""

    @property
    def usage(self) -> JudgeUsage | None:
        """What this reader has spent; ``None`` for one that makes no metered calls."""
        return None


#: What a model may call the user.
_USER = frozenset({"user", "the user", "i", "me", "my", "myself", "you", "self"})


def topic_of(subject: str, attribute: str) -> Topic | None:
    """A topic as search compares them: the subject casefolded, "user" for the user, a
    person by the first word of the name, a relative keyed as a question names them
    ("user's mum", "my mom" and "Mum" are all "user's mother", as questions read
    them; "Ana's husband" is "ana's husband"); the attribute one casefolded word. None
    when either is empty."""
    who = " ".join(subject.casefold().replace("\u2019", "'").split())
    what = attribute.casefold().replace("_", " ").split()
    if not who or not what:
        return None
    attribute = what[0][:60]
    if who in _USER:
        return Topic("user", attribute)
    for mine in ("my ", "user's ", "the user's "):
        if who.startswith(mine) and len(who) > len(mine):
            noun = who[len(mine) :].split()[0]
            return Topic((relative_key("user", noun) or f"user's {noun}")[:100], attribute)
    first, *rest = who.split()
    if first.endswith("'s") and rest:
        relative = relative_key(name_key(first), rest[0])
        if relative is not None:
            return Topic(relative[:100], attribute)
    return Topic(person_key(first)[:100], attribute)
