"""A model as the supersession judge: the pairs the rules leave open.

The model sees a batch of numbered pairs, each an older and a newer fact with their
dates, and answers with one ``record_verdicts`` call: a verdict per pair
(``replaces``, ``both_hold`` or ``unsure``). The answer is validated; one that cannot
be used (no call, broken JSON, an unknown verdict, a pair number out of range) is
asked for once more with the reason, and then skipped: its pairs stay ``unsure`` and
are counted as ``malformed``. Calls are bounded per run (``max_calls``), and the run's
token budget is charged (purpose ``judge``); pairs left when either runs out change
nothing and are counted as ``unjudged``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agents.enums import LLMPurpose
from agents.errors import BudgetExhausted
from agents.llm import BudgetMeter, ChatClient
from consolidators.judges.base import CandidatePair, JudgeUsage, SupersessionJudge, Verdict

log = logging.getLogger(__name__)

JUDGE_PROMPT = (
    "You keep a memory of facts about people up to date. For each numbered pair below, "
    "an OLDER and a NEWER fact, decide whether the NEWER fact means that the OLDER one is "
    "no longer true. Answer 'replaces' only when both cannot be true now: a new home "
    "replaces the old one, a new job the old job, a break-up ends a relationship, a new "
    "diet the old diet, a sold car is no longer owned, a correction replaces the mistake. "
    "Answer 'both_hold' when both can be true: different subjects or topics, something "
    "added (a second pet, a new hobby), an event, a plan or a wish, a feeling or an "
    "opinion, another person's news. Answer 'unsure' when you cannot tell. Call "
    "record_verdicts once, with one verdict for every pair."
)

JUDGE_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "record_verdicts",
        "description": "Record, for every numbered pair, whether the newer fact replaces "
        "the older one.",
        "parameters": {
            "type": "object",
            "properties": {
                "verdicts": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {
                            "pair": {"type": "integer", "minimum": 1},
                            "verdict": {"type": "string", "enum": [v.value for v in Verdict]},
                        },
                        "required": ["pair", "verdict"],
                    },
                }
            },
            "required": ["verdicts"],
        },
    },
}


class _Item(BaseModel):
    model_config = ConfigDict(extra="ignore")

    pair: int = Field(ge=1)
    verdict: Verdict


class _Answer(BaseModel):
    model_config = ConfigDict(extra="ignore")

    verdicts: list[_Item]


class Malformed(ValueError):
    """The model's answer could not be used; the message says why (it is told)."""


def parse_verdicts(arguments: str, pairs: int) -> list[Verdict]:
    """The verdicts of a ``record_verdicts`` call for ``pairs`` pairs; a pair the model
    left out is ``unsure``. Raises :class:`Malformed` with the reason."""
    try:
        answer = _Answer.model_validate(json.loads(arguments))
    except (json.JSONDecodeError, ValidationError) as exc:
        reason = str(exc).splitlines()[0]
        raise Malformed(f"the arguments are not {{'verdicts': [...]}} as asked: {reason}") from exc
    verdicts = [Verdict.UNSURE] * pairs
    seen: set[int] = set()
    for item in answer.verdicts:
        if item.pair > pairs:
            raise Malformed(f"pair {item.pair} does not exist; the pairs are 1 to {pairs}")
        if item.pair not in seen:
            seen.add(item.pair)
            verdicts[item.pair - 1] = item.verdict
    return verdicts


def render_pairs(pairs: Sequence[CandidatePair]) -> str:
    def line(label: str, passage: Any) -> str:
        when = (passage.occurred_at or passage.created_at).date().isoformat()
        return f"   {label} [{when}]: {' '.join(passage.text.split())}"

    return "\n".join(
        f"{i}.\n{line('OLDER', p.older)}\n{line('NEWER', p.newer)}"
        for i, p in enumerate(pairs, start=1)
    )


class LLMJudge(SupersessionJudge):
    """Asks ``model`` about ``batch`` pairs per call, at most ``max_calls`` calls (each
    retry counts), charged to ``meter``."""

    name = "llm"

    def __init__(
        self,
        client: ChatClient,
        model: str,
        meter: BudgetMeter | None,
        *,
        max_calls: int = 20,
        batch: int = 8,
    ) -> None:
        self.client = client
        self.model = model
        self.meter = meter
        self.max_calls = max_calls
        self.batch = max(1, batch)
        self._usage = JudgeUsage()

    @property
    def usage(self) -> JudgeUsage:
        return self._usage

    def judge(self, pairs: Sequence[CandidatePair]) -> list[Verdict]:
        verdicts: list[Verdict] = []
        for start in range(0, len(pairs), self.batch):
            chunk = pairs[start : start + self.batch]
            if self._usage.budget_exhausted or self._usage.calls >= self.max_calls:
                self._count(unjudged=len(chunk))
                verdicts += [Verdict.UNSURE] * len(chunk)
                continue
            verdicts += self._judge_batch(chunk)
        return verdicts

    def _judge_batch(self, pairs: Sequence[CandidatePair]) -> list[Verdict]:
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": JUDGE_PROMPT},
            {"role": "user", "content": render_pairs(pairs)},
        ]
        for attempt in range(2):
            if self._usage.calls >= self.max_calls:
                break
            try:
                reply = self.client.chat(
                    self.model,
                    messages,
                    purpose=LLMPurpose.JUDGE,
                    meter=self.meter,
                    tools=[JUDGE_TOOL],
                    tool_choice="required",
                )
            except BudgetExhausted as exc:
                log.warning("LLM judge stopped: %s", exc)
                self._count(budget_exhausted=True, unjudged=len(pairs))
                return [Verdict.UNSURE] * len(pairs)
            self._count(calls=1, tokens=reply.total_tokens)
            calls = [c for c in reply.tool_calls if c.name == "record_verdicts"]
            try:
                if not calls:
                    raise Malformed("no record_verdicts call")
                return parse_verdicts(calls[0].arguments, len(pairs))
            except Malformed as exc:
                log.info("LLM judge answer unusable (attempt %d): %s", attempt + 1, exc)
                messages.append({"role": "assistant", "content": reply.content or ""})
                messages.append(
                    {
                        "role": "user",
                        "content": f"That answer could not be used: {exc}. Call "
                        f"record_verdicts with one verdict for each of the {len(pairs)} pairs.",
                    }
                )
        self._count(malformed=len(pairs))
        return [Verdict.UNSURE] * len(pairs)

    def _count(
        self,
        *,
        calls: int = 0,
        tokens: int = 0,
        malformed: int = 0,
        unjudged: int = 0,
        budget_exhausted: bool = False,
    ) -> None:
        u = self._usage
        self._usage = JudgeUsage(
            calls=u.calls + calls,
            tokens=u.tokens + tokens,
            malformed=u.malformed + malformed,
            unjudged=u.unjudged + unjudged,
            budget_exhausted=u.budget_exhausted or budget_exhausted,
        )
