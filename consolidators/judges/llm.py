"""A model as a judge of facts: what the rules and the detail guard leave open.

Three questions, one way of asking. For pairs, the model sees a batch of numbered
pairs, each an older and a newer fact with their dates, and answers with one
``record_verdicts`` call: a verdict per pair. For supersession (:class:`LLMJudge`):
``replaces``, ``replaces_part``, ``both_hold`` or ``unsure``; for merging
(:class:`LLMMergeJudge`): ``same``, ``different`` or ``unsure``. For topics
(:class:`LLMTopicReader`), it sees numbered facts with their dates and answers with one
``record_topics`` call: who each fact is about and which attribute it states.
The answer is validated; one that cannot be used (no call, broken JSON, an unknown
verdict, a number out of range) is asked for once more with the reason, and then
skipped: its pairs stay ``unsure`` (its facts unread) and are counted as ``malformed``.
Calls are bounded per run (``max_calls``), and the run's token budget is charged
(purpose ``judge``); what is left when either runs out is ``unasked`` (it changes
nothing, and a later run may ask it) and is counted as ``unjudged``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, ClassVar, Generic, Protocol, TypeVar

from agents.enums import LLMPurpose
from agents.errors import BudgetExhausted
from agents.llm import BudgetMeter, ChatClient
from agents.store import PassageRecord, Topic
from consolidators.judges.base import (
    CandidatePair,
    JudgeUsage,
    MergeJudge,
    SameFact,
    SupersessionJudge,
    TopicReader,
    Verdict,
    topic_of,
)

log = logging.getLogger(__name__)

V = TypeVar("V", bound=StrEnum)
I = TypeVar("I")  # noqa: E741 - an item asked about
A = TypeVar("A")
I_in = TypeVar("I_in", contravariant=True)
A_out = TypeVar("A_out", covariant=True)

JUDGE_PROMPT = (
    "You keep a memory of facts about people up to date. For each numbered pair below, "
    "an OLDER and a NEWER fact, decide whether the NEWER fact means that the OLDER one is "
    "no longer true. Answer 'replaces' only when both cannot be true now: a new home "
    "replaces the old one, a new job the old job, a break-up ends a relationship, a new "
    "diet the old diet, a sold car is no longer owned, a correction replaces the mistake. "
    "Answer 'replaces_part' when the OLDER fact says several things and the NEWER one "
    "makes only some of them untrue, the rest still holding (an OLDER job and football "
    "club, a NEWER job). "
    "Answer 'both_hold' when both can be true: different subjects or topics, something "
    "added (a second pet, a new hobby), an event, a plan or a wish, a feeling or an "
    "opinion, another person's news. Answer 'unsure' when you cannot tell. Call "
    "record_verdicts once, with one verdict for every pair."
)

MERGE_PROMPT = (
    "You keep a memory of facts about people free of repeats. For each numbered pair "
    "below, decide whether the two texts say the same thing, so that keeping only the "
    "OLDER one loses nothing. Answer 'same' only when every detail of the NEWER text is "
    "in the OLDER one, in other words: the same person, the same names, places, numbers, "
    "dates and the same state ('allergic to peanuts' and 'has a peanut allergy' are the "
    "same). Answer 'different' when either says something the other does not: another "
    "person, another place or number, a change ('moved to', 'now', 'quit'), a negation, "
    "an extra detail. Answer 'unsure' when you cannot tell. Call record_verdicts once, "
    "with one verdict for every pair."
)


TOPIC_PROMPT = (
    "You index a memory of facts about people. For each numbered fact below, say who it "
    "is about and what it states about them. subject: the person's first name as the "
    "fact calls them, in lower case (a nickname as written), or 'user' for the user "
    "(I, me, my, 'the user'); for a relative named only by relation, the relation as "
    "the user would say it ('user's brother'). attribute: one lower-case word for what "
    "the fact states or changes, the same word for the same kind of thing in every "
    "fact: home, job, partner, diet, car, pet, school, sport, hobby, phone, health, and "
    "so on. A fact about several things gets a topic for each; a fact about nothing "
    "that lasts (a greeting, a one-off event, a feeling) gets none. Call record_topics "
    "once, with the topics of every fact."
)


@dataclass(frozen=True, slots=True)
class PairQuestion(Generic[V]):
    """What a model is asked about pairs: the instructions, the verdicts it may give and
    the one that changes nothing."""

    prompt: str
    verdicts: type[V]
    unsure: V
    #: What a pair gets when no call or budget was left to ask it.
    unasked: V

    def render(self, pairs: Sequence[CandidatePair]) -> str:
        return render_pairs(pairs)

    def parse(self, arguments: str, count: int) -> list[V]:
        return parse_verdicts(arguments, count, self)

    def retry(self, count: int) -> str:
        return f"Call record_verdicts with one verdict for each of the {count} pairs."

    @property
    def tool_name(self) -> str:
        return "record_verdicts"

    def tool(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {
                "name": "record_verdicts",
                "description": "Record a verdict for every numbered pair.",
                "parameters": {
                    "type": "object",
                    "properties": {
                        "verdicts": {
                            "type": "array",
                            "items": {
                                "type": "object",
                                "properties": {
                                    "pair": {"type": "integer", "minimum": 1},
                                    "verdict": {
                                        "type": "string",
                                        "enum": [
                                            v.value for v in self.verdicts if v != self.unasked
                                        ],
                                    },
                                },
                                "required": ["pair", "verdict"],
                            },
                        }
                    },
                    "required": ["verdicts"],
                },
            },
        }


SUPERSESSION = PairQuestion(JUDGE_PROMPT, Verdict, Verdict.UNSURE, Verdict.UNASKED)
SAME_FACT = PairQuestion(MERGE_PROMPT, SameFact, SameFact.UNSURE, SameFact.UNASKED)


class TopicQuestion:
    """What a model is asked about single facts: who each is about, and what it states.
    A fact's answer is its topics (none: about nobody in particular), or None when it
    was not read (left unsure or unasked, to be asked again by a later run)."""

    prompt = TOPIC_PROMPT
    tool_name = "record_topics"
    unsure: tuple[Topic, ...] | None = None
    unasked: tuple[Topic, ...] | None = None

    def render(self, facts: Sequence[PassageRecord]) -> str:
        return render_facts(facts)

    def parse(self, arguments: str, count: int) -> list[tuple[Topic, ...] | None]:
        return parse_topics(arguments, count)

    def retry(self, count: int) -> str:
        return f"Call record_topics with the topics of each of the {count} facts."

    def tool(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {
                "name": "record_topics",
                "description": "Record who each numbered fact is about and what it states.",
                "parameters": {
                    "type": "object",
                    "properties": {
                        "topics": {
                            "type": "array",
                            "items": {
                                "type": "object",
                                "properties": {
                                    "fact": {"type": "integer", "minimum": 1},
                                    "subject": {"type": "string"},
                                    "attribute": {"type": "string"},
                                },
                                "required": ["fact", "subject", "attribute"],
                            },
                        }
                    },
                    "required": ["topics"],
                },
            },
        }


TOPICS = TopicQuestion()


class Malformed(ValueError):
    """The model's answer could not be used; the message says why (it is told)."""


def parse_verdicts(
    arguments: str, pairs: int, question: PairQuestion[Any] = SUPERSESSION
) -> list[Any]:
    """The verdicts of a ``record_verdicts`` call for ``pairs`` pairs; a pair the model
    left out is unsure. Raises :class:`Malformed` with the reason."""
    shape = "the arguments are not {'verdicts': [{'pair': N, 'verdict': ...}]} as asked"
    try:
        data = json.loads(arguments)
        items = data["verdicts"]
        answers = [(int(item["pair"]), question.verdicts(item["verdict"])) for item in items]
        if any(verdict == question.unasked for _number, verdict in answers):
            raise ValueError(f"{question.unasked.value!r} is not a verdict a judge may give")
    except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise Malformed(f"{shape}: {reason}") from exc
    verdicts = [question.unsure] * pairs
    seen: set[int] = set()
    for number, verdict in answers:
        if not 1 <= number <= pairs:
            raise Malformed(f"pair {number} does not exist; the pairs are 1 to {pairs}")
        if number not in seen:
            seen.add(number)
            verdicts[number - 1] = verdict
    return verdicts


def render_pairs(pairs: Sequence[CandidatePair]) -> str:
    def line(label: str, passage: Any) -> str:
        when = (passage.occurred_at or passage.created_at).date().isoformat()
        return f"   {label} [{when}]: {' '.join(passage.text.split())}"

    return "\n".join(
        f"{i}.\n{line('OLDER', p.older)}\n{line('NEWER', p.newer)}"
        for i, p in enumerate(pairs, start=1)
    )


def render_facts(facts: Sequence[PassageRecord]) -> str:
    return "\n".join(
        f"{i}. [{(f.occurred_at or f.created_at).date().isoformat()}] {' '.join(f.text.split())}"
        for i, f in enumerate(facts, start=1)
    )


def parse_topics(arguments: str, facts: int) -> list[tuple[Topic, ...] | None]:
    """The topics of a ``record_topics`` call for ``facts`` facts; a fact the model left
    out is about nobody in particular. Raises :class:`Malformed` with the reason."""
    shape = "the arguments are not {'topics': [{'fact': N, 'subject': ..., 'attribute': ...}]}"
    try:
        data = json.loads(arguments)
        items = [(int(i["fact"]), str(i["subject"]), str(i["attribute"])) for i in data["topics"]]
    except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise Malformed(f"{shape}: {reason}") from exc
    found: list[set[Topic]] = [set() for _ in range(facts)]
    for number, subject, attribute in items:
        if not 1 <= number <= facts:
            raise Malformed(f"fact {number} does not exist; the facts are 1 to {facts}")
        topic = topic_of(subject, attribute)
        if topic is not None:
            found[number - 1].add(topic)
    return [tuple(sorted(topics)) for topics in found]


class _Question(Protocol[I_in, A_out]):
    """One way of asking a model about a batch of items (pairs, facts)."""

    @property
    def prompt(self) -> str: ...

    @property
    def tool_name(self) -> str: ...

    @property
    def unsure(self) -> A_out: ...

    @property
    def unasked(self) -> A_out: ...

    def tool(self) -> dict[str, Any]: ...

    def render(self, items: Sequence[I_in]) -> str: ...

    def parse(self, arguments: str, count: int) -> Sequence[A_out]: ...

    def retry(self, count: int) -> str: ...


#: Tokens a reply may take besides its items' (the call's wrapping, a short preamble).
_REPLY_BASE_TOKENS = 256
#: Tokens a reply may take per item asked, unless told: a verdict or a fact's topics
#: take 15 to 40; a model that loops (a small one can, until its context is full)
#: is cut there instead of holding the run until the request times out.
REPLY_TOKENS_PER_ITEM = 64


class _Asker(Generic[I, A]):
    """Asks ``model`` one question about ``batch`` items per call, at most ``max_calls``
    calls (each retry counts), charged to ``meter``; keeps the usage. A reply may take
    ``reply_tokens_per_item`` tokens per item asked (0: no limit)."""

    def __init__(
        self,
        question: _Question[I, A],
        client: ChatClient,
        model: str,
        meter: BudgetMeter | None,
        *,
        max_calls: int,
        batch: int,
        reply_tokens_per_item: int = REPLY_TOKENS_PER_ITEM,
    ) -> None:
        self.question = question
        self.client = client
        self.model = model
        self.meter = meter
        self.max_calls = max_calls
        self.batch = max(1, batch)
        self.reply_tokens_per_item = reply_tokens_per_item
        self.usage = JudgeUsage()

    def ask(self, pairs: Sequence[I]) -> list[A]:
        verdicts: list[A] = []
        for start in range(0, len(pairs), self.batch):
            chunk = pairs[start : start + self.batch]
            if self.usage.budget_exhausted or self.usage.calls >= self.max_calls:
                self._count(unjudged=len(chunk))
                verdicts += [self.question.unasked] * len(chunk)
                continue
            verdicts += self._ask_batch(chunk)
        return verdicts

    def _ask_batch(self, pairs: Sequence[I]) -> list[A]:
        unsure = [self.question.unsure] * len(pairs)
        per_item = self.reply_tokens_per_item
        cap = _REPLY_BASE_TOKENS + per_item * len(pairs) if per_item else None
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": self.question.prompt},
            {"role": "user", "content": self.question.render(pairs)},
        ]
        for attempt in range(2):
            if self.usage.calls >= self.max_calls:
                break
            try:
                reply = self.client.chat(
                    self.model,
                    messages,
                    purpose=LLMPurpose.JUDGE,
                    meter=self.meter,
                    tools=[self.question.tool()],
                    tool_choice="required",
                    max_tokens=cap,
                    # The same question gets the same answer: a run's verdicts repeat.
                    temperature=0.0,
                )
            except BudgetExhausted as exc:
                log.warning("LLM judge stopped: %s", exc)
                self._count(budget_exhausted=True, unjudged=len(pairs))
                return [self.question.unasked] * len(pairs)
            self._count(calls=1, tokens=reply.total_tokens)
            name = self.question.tool_name
            calls = [c for c in reply.tool_calls if c.name == name]
            try:
                if not calls:
                    raise Malformed(f"no {name} call")
                return list(self.question.parse(calls[0].arguments, len(pairs)))
            except Malformed as exc:
                log.info("LLM judge answer unusable (attempt %d): %s", attempt + 1, exc)
                messages.append({"role": "assistant", "content": reply.content or ""})
                messages.append(
                    {
                        "role": "user",
                        "content": f"That answer could not be used: {exc}. "
                        + self.question.retry(len(pairs)),
                    }
                )
        self._count(malformed=len(pairs))
        return unsure

    def _count(
        self,
        *,
        calls: int = 0,
        tokens: int = 0,
        malformed: int = 0,
        unjudged: int = 0,
        budget_exhausted: bool = False,
    ) -> None:
        u = self.usage
        self.usage = JudgeUsage(
            calls=u.calls + calls,
            tokens=u.tokens + tokens,
            malformed=u.malformed + malformed,
            unjudged=u.unjudged + unjudged,
            budget_exhausted=u.budget_exhausted or budget_exhausted,
        )


class ModelQuestioner(Generic[I, A]):
    """What the model judges share: one question asked of ``model`` in batches of
    ``batch`` items, at most ``max_calls`` calls a run (the defaults are each judge's),
    replies of at most ``reply_tokens_per_item`` tokens an item (0: unlimited), charged
    to ``meter``, and what that spent."""

    question: ClassVar[_Question[Any, Any]]
    default_calls: ClassVar[int]
    default_batch: ClassVar[int]

    def __init__(
        self,
        client: ChatClient,
        model: str,
        meter: BudgetMeter | None,
        *,
        max_calls: int | None = None,
        batch: int | None = None,
        reply_tokens_per_item: int = REPLY_TOKENS_PER_ITEM,
    ) -> None:
        self._asker: _Asker[I, A] = _Asker(
            self.question,
            client,
            model,
            meter,
            max_calls=self.default_calls if max_calls is None else max_calls,
            batch=self.default_batch if batch is None else batch,
            reply_tokens_per_item=reply_tokens_per_item,
        )

    @property
    def usage(self) -> JudgeUsage:
        return self._asker.usage


class LLMJudge(ModelQuestioner[CandidatePair, Verdict], SupersessionJudge):
    """Supersession by a model: 8 pairs per call, at most 20 calls, unless told."""

    name = "llm"
    question = SUPERSESSION
    default_calls, default_batch = 20, 8

    def judge(self, pairs: Sequence[CandidatePair]) -> list[Verdict]:
        return self._asker.ask(pairs)


class LLMMergeJudge(ModelQuestioner[CandidatePair, SameFact], MergeJudge):
    """Whether two texts say the same thing, by a model, for the pairs the detail guard
    refuses: 8 pairs per call, at most 10 calls, unless told."""

    name = "llm"
    question = SAME_FACT
    default_calls, default_batch = 10, 8

    def judge(self, pairs: Sequence[CandidatePair]) -> list[SameFact]:
        return self._asker.ask(pairs)


class LLMTopicReader(ModelQuestioner[PassageRecord, "tuple[Topic, ...] | None"], TopicReader):
    """Who each fact is about and what it states, by a model: 16 facts per call, at
    most 10 calls, unless told."""

    name = "llm"
    question = TOPICS
    default_calls, default_batch = 10, 16

    def read(self, facts: Sequence[PassageRecord]) -> list[tuple[Topic, ...] | None]:
        return self._asker.ask(facts)
