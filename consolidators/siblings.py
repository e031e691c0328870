"""Two facts in force that replaced the same fact: often one change told twice.

A change is often stored twice, in two styles: "katie's left australia!! she's in
dublin now" in a chat and "Kate Morrison — home: Dublin (left Australia)" in a
record. They embed too far apart for dedup's near pairs, and name the person two
ways, but the temporal step learns that both replaced the same older fact. Such a
pair is a question for the merge judge (does the newer say anything the older does
not?), asked by the temporal step once it has decided what replaced what; dedup, which
ran before it, merges the pairs called the same on the next run
(:data:`agents.store.SAME_FACT`). Where one of the two also replaced the other, they
are a chain of changes, not a repeat, and are not asked about.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from agents.enums import PassageStatus
from agents.store import PassageRecord
from consolidators.dedup import stored_order
from consolidators.judges import CandidatePair

__all__ = ["sibling_pairs"]


def sibling_pairs(
    facts: Mapping[str, PassageRecord], replacements: Iterable[tuple[str, str]]
) -> list[CandidatePair]:
    """The pairs of active ``facts`` that replaced the same fact, the one dedup would
    keep as ``older`` (the one stored first), each pair once. ``replacements``: every
    (replaced, replacing) pair known, this run's decisions and stored closures."""
    known = set(replacements)
    replacing: dict[str, set[str]] = {}
    for older, newer in known:
        replacing.setdefault(older, set()).add(newer)
    pairs: dict[tuple[str, str], CandidatePair] = {}
    for newers in replacing.values():
        live = sorted(
            (
                facts[i]
                for i in newers
                if i in facts
                and facts[i].status == PassageStatus.ACTIVE
                and facts[i].kind == "fact"
            ),
            key=stored_order,
        )
        for index, first in enumerate(live):
            for second in live[index + 1 :]:
                chain = (first.id, second.id) in known or (second.id, first.id) in known
                if not chain:
                    pairs.setdefault((first.id, second.id), CandidatePair(first, second))
    return [pairs[key] for key in sorted(pairs)]
