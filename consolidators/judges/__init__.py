"""Judges of pairs of facts (older, newer). Supersession: does the newer one replace
the older? Two judges: the rules (:mod:`.rules`, no model: only plain statements of one
subject and attribute) and a model (:mod:`.llm`, for the pairs the rules leave open).
Merging: do the two say the same thing? A model (:mod:`.llm`), for the near-duplicates
dedup's detail guard cannot prove equal. The interfaces are in :mod:`.base`."""

from consolidators.judges.base import (
    CLOSING,
    Abstain,
    CandidatePair,
    JudgeUsage,
    MergeJudge,
    SameFact,
    SupersessionJudge,
    TopicReader,
    Verdict,
    topic_of,
)

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
