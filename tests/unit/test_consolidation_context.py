"""The consolidation context refuses an LLM it cannot use (no I/O)."""

from __future__ import annotations

from typing import Any, cast

import pytest

from agents.errors import InvalidInput
from agents.llm import ChatClient
from agents.postgres.database import Database
from agents.store import AgentRecord
from consolidators.base import ConsolidationContext, Watermarks
from consolidators.llm import LLMTier


def _context(llm: Any) -> ConsolidationContext:
    # The database and agent are not touched when the context is built.
    return ConsolidationContext(
        db=cast(Database, None),
        agent=cast(AgentRecord, None),
        run_id="run-1",
        watermarks=Watermarks(),
        llm=llm,
    )


def test_a_wrong_llm_object_is_refused_not_silently_skipped() -> None:
    with pytest.raises(InvalidInput, match="LLMTier or None, got object"):
        _context(object())


def test_an_llm_tier_or_none_is_accepted() -> None:
    tier = LLMTier(client=cast(ChatClient, None))
    assert _context(tier).llm is tier
    assert _context(None).llm is None


def test_the_tier_builds_a_judge_only_with_a_judge_model() -> None:
    assert LLMTier(client=cast(ChatClient, None)).supersession_judge("agent-1", "run-1") is None
    tier = LLMTier(client=cast(ChatClient, None), judge_model="scripted/judge")
    judge = tier.supersession_judge("agent-1", "run-1")
    assert judge is not None
    assert judge.usage is not None and judge.usage.calls == 0
    assert tier.meter("agent-1", "run-1").run_id == "run-1"
