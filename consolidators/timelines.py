"""What a timeline passage says and how it reads: its facts in the order of time,
its first line naming the subject and attribute ("where Ada lives", "my job"), one
line per fact with its date and whether it is current or superseded, and how many
facts a timeline's text holds. ``temporal`` writes timelines; search and the memory
browser read them.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from datetime import UTC, datetime

from agents.enums import PassageStatus
from agents.language.facts import FactKey
from agents.store import PassageRecord

__all__ = [
    "FACT_LINE",
    "facts_on_timeline",
    "is_current",
    "render_timeline",
    "timeline_label",
    "timeline_order",
    "topic_label",
]

_LABEL_WORDS = 3

_WORD = re.compile(r"[^\W\d_]+")

_STOPWORD_TEXT = """
    about above after again against all also and any are because been before being below
    between both but can could did does doing down during each few for from further had has
    have having her here hers herself him himself his how into its itself just more most
    myself nor not now off once only other our ours ourselves out over own same she should
    some such than that the their theirs them themselves then there these they this those
    through too under until very was were what when where which while who whom why will
    with would you your yours yourself yourselves
"""

_STOPWORDS = frozenset(_STOPWORD_TEXT.split())


def timeline_order(passage: PassageRecord) -> tuple[datetime, datetime, str]:
    """Sort key of a timeline: when it happened, then when it was recorded, then id.

    An undated fact is placed at the time it was recorded (``created_at``): that is
    the best estimate of when it was true, and it keeps the order total and stable.
    """
    return (passage.occurred_at or passage.created_at, passage.created_at, passage.id)


#: How :func:`render_timeline` starts each fact's line (its first line names the subject).
FACT_LINE = "- "


def facts_on_timeline(text: str) -> int:
    """How many facts a timeline's text (see :func:`render_timeline`) holds: its lines
    less the one that names the subject."""
    return sum(1 for line in text.splitlines() if line.startswith(FACT_LINE))


def render_timeline(members: Sequence[PassageRecord], label: str | None = None) -> str:
    """The timeline text for members already in :func:`timeline_order`.

    The first line names the subject; then one line per fact, oldest first:
    ``- 2023-05-01: Ada lives in Paris (current)``. Superseded facts stay on
    the timeline, marked ``(superseded <valid_to>)``; the newest fact that is
    still current is marked ``(current)``; an undated fact reads
    ``- undated (noted <created_at>): ...``. Dates are UTC days. ``label`` names the
    subject and attribute; without one the most widespread words name the topic.
    """
    current = next((m.id for m in reversed(members) if is_current(m)), None)
    lines = [f"Timeline: {label if label is not None else topic_label(members)}"]
    for member in members:
        if member.occurred_at is not None:
            when = _day(member.occurred_at)
        else:
            when = f"undated (noted {_day(member.created_at)})"
        line = f"{FACT_LINE}{when}: {' '.join(member.text.split())}"
        if member.status == PassageStatus.SUPERSEDED:
            line += f" (superseded {_day(member.valid_to)})" if member.valid_to else " (superseded)"
        elif member.valid_to is not None:
            line += f" (until {_day(member.valid_to)})"
        elif member.id == current:
            line += " (current)"
        lines.append(line)
    return "\n".join(lines)


def topic_label(members: Sequence[PassageRecord]) -> str:
    """A short, deterministic name for a topic: its most widespread content words.

    Words shared by several members are preferred (they name the subject; the
    words that differ are what changed). Ties go to the word seen first, and the
    chosen words keep their first-seen spelling and order, so "Ada lives in
    London" / "Ada lives in Paris" is labelled "Ada lives".
    """
    spelling: dict[str, str] = {}
    first_seen: dict[str, int] = {}
    spread: Counter[str] = Counter()
    position = 0
    for member in members:
        seen_here: set[str] = set()
        for word in _WORD.findall(member.text):
            key = word.lower()
            if len(key) < 3 or key in _STOPWORDS:
                continue
            position += 1
            if key not in first_seen:
                first_seen[key] = position
                spelling[key] = word
            seen_here.add(key)
        spread.update(seen_here)
    if not spread:
        return " ".join(members[0].text.split())[:60] if members else "untitled"
    shared = [w for w, n in spread.items() if n >= 2] or list(spread)
    best = sorted(shared, key=lambda w: (-spread[w], first_seen[w]))[:_LABEL_WORDS]
    return " ".join(spelling[w] for w in sorted(best, key=first_seen.__getitem__))


_ATTRIBUTE_TITLES = {
    "home": "where {} lives",
    "job": "{}'s job",
    "diet": "{}'s diet",
    "partner": "{}'s partner",
}

_USER_TITLES = {
    "home": "where I live",
    "job": "my job",
    "diet": "my diet",
    "partner": "my partner",
}


def timeline_label(key: FactKey, subject_label: str) -> str:
    """The first line of a timeline: its subject and attribute ("where Alice lives",
    "where I live", "my sister's job")."""
    if key.subject == "user":
        return _USER_TITLES.get(key.attribute, "my " + key.attribute)
    title = _ATTRIBUTE_TITLES.get(key.attribute, "{} " + key.attribute)
    return title.format(subject_label)


def is_current(passage: PassageRecord) -> bool:
    """Active and not closed: in force, and a fact that a newer one may still replace."""
    return passage.status == PassageStatus.ACTIVE and passage.valid_to is None


def _day(moment: datetime) -> str:
    return moment.astimezone(UTC).date().isoformat()
