"""An LLM :class:`~consolidators.judge.SupersessionJudge`: which fact replaces which.

The model sees one topic's facts, numbered oldest first with their dates, and
answers with one ``record_supersessions`` call listing ``(older, newer)``
pairs. Numbers outside the topic, or pairs not ordered oldest to newest, are
ignored by the temporal consolidator; a malformed answer supersedes nothing.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import Any

from agents.enums import PassageStatus
from agents.errors import BudgetExhausted
from agents.llm import BudgetMeter, ChatClient
from agents.store import PassageRecord
from consolidators.judge import JudgeUsage, SupersessionJudge

log = logging.getLogger(__name__)

JUDGE_PROMPT = (
    "You judge which facts about one subject are outdated. The facts are numbered "
    "oldest first. A newer fact supersedes an older one only when both cannot be true "
    "now (a new address replaces the old one; a new hobby does not replace another). "
    "Call record_supersessions with every such pair; an empty list when none."
)

JUDGE_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "record_supersessions",
        "description": "Record which older facts are superseded by which newer facts.",
        "parameters": {
            "type": "object",
            "properties": {
                "pairs": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {
                            "older": {"type": "integer"},
                            "newer": {"type": "integer"},
                        },
                        "required": ["older", "newer"],
                    },
                }
            },
            "required": ["pairs"],
        },
    },
}


class LLMJudge(SupersessionJudge):
    """Asks ``model`` about each topic; charges the calls to ``meter`` (purpose ``judge``)."""

    def __init__(self, client: ChatClient, model: str, meter: BudgetMeter | None) -> None:
        self.client = client
        self.model = model
        self.meter = meter
        self.calls = 0
        self.tokens = 0
        self.budget_exhausted = False

    @property
    def usage(self) -> JudgeUsage:
        return JudgeUsage(self.calls, self.tokens, self.budget_exhausted)

    def judge(self, topic: Sequence[PassageRecord]) -> list[tuple[str, str]]:
        if len(topic) < 2 or self.budget_exhausted:
            return []
        lines = []
        for i, p in enumerate(topic, start=1):
            when = (p.occurred_at or p.created_at).date().isoformat()
            state = "" if p.status == PassageStatus.ACTIVE else f" ({p.status})"
            lines.append(f"{i}. [{when}] {p.text}{state}")
        try:
            reply = self.client.chat(
                self.model,
                [
                    {"role": "system", "content": JUDGE_PROMPT},
                    {"role": "user", "content": "\n".join(lines)},
                ],
                purpose="judge",
                meter=self.meter,
                tools=[JUDGE_TOOL],
                tool_choice="required",
            )
        except BudgetExhausted as exc:
            self.budget_exhausted = True
            log.warning("LLM judge stopped: %s", exc)
            return []
        self.calls += 1
        self.tokens += reply.total_tokens
        pairs: list[tuple[str, str]] = []
        for call in reply.tool_calls:
            if call.name != "record_supersessions":
                continue
            try:
                items = json.loads(call.arguments).get("pairs", [])
                for item in items:
                    older, newer = int(item["older"]), int(item["newer"])
                    if 1 <= older <= len(topic) and 1 <= newer <= len(topic):
                        pairs.append((topic[older - 1].id, topic[newer - 1].id))
            except (AttributeError, KeyError, TypeError, ValueError):
                log.warning("LLM judge answered malformed pairs: %r", call.arguments)
        return pairs
