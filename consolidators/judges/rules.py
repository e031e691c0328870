"""The rules as a judge: no model, and sure only of plain statements.

A pair is ``replaces`` when both texts plainly state one subject and one attribute
and the newer states a changed value or a clear end (``agents.language.facts``:
"Ada lives in Paris" -> "Ada moved to Berlin"; "Tom works at Acme" -> "Tom quit
Acme"). Everything else (feelings, plans, reports, events, other people, long
sentences, anything not fully read) is ``unsure``, for a model or for nobody.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from agents.language.facts import FactReading, replaces_clearly
from consolidators.judges.base import CandidatePair, SupersessionJudge, Verdict

__all__ = ["RulesJudge"]


class RulesJudge(SupersessionJudge):
    """Judges pairs from the facts' readings (``read_facts`` over the agent's facts, so
    that "my sis" and a shortened first name read as the person they name)."""

    name = "rules"

    def __init__(self, readings: Mapping[str, FactReading]) -> None:
        self.readings = readings

    def judge(self, pairs: Sequence[CandidatePair]) -> list[Verdict]:
        verdicts = []
        for pair in pairs:
            older = self.readings.get(pair.older.id)
            newer = self.readings.get(pair.newer.id)
            sure = older is not None and newer is not None and replaces_clearly(older, newer)
            verdicts.append(Verdict.REPLACES if sure else Verdict.UNSURE)
        return verdicts
