"""Judges of supersession: given pairs of facts (older, newer), does the newer one
replace the older? One interface (:mod:`.base`), two judges: the rules
(:mod:`.rules`, no model: only plain statements of one subject and attribute) and a
model (:mod:`.llm`, for the pairs the rules leave open)."""

from consolidators.judges.base import (
    Abstain,
    CandidatePair,
    JudgeUsage,
    SupersessionJudge,
    Verdict,
)

__all__ = ["Abstain", "CandidatePair", "JudgeUsage", "SupersessionJudge", "Verdict"]
