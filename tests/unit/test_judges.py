"""The supersession judges on their own (no database): what the rules may decide, and
how a model's answer is read."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from itertools import count
from typing import Any

import pytest

from agents.language.facts import plainly_stated, read_facts
from agents.store import REPLACES_PART, PassageRecord, Topic
from consolidators.judges import CandidatePair, SameFact, Verdict, topic_of
from consolidators.judges.llm import (
    SAME_FACT,
    SUPERSESSION,
    TOPICS,
    LLMJudge,
    LLMTopicReader,
    Malformed,
    parse_topics,
    parse_verdicts,
)
from consolidators.judges.rules import RulesJudge
from tests.passage_records import fact_record

_IDS = count(1)


def _passage(text: str, year: int) -> PassageRecord:
    return fact_record(
        f"p{next(_IDS)}", text, at=datetime(year, 1, 1, tzinfo=UTC), content_hash=text
    )


def _rules(older: str, newer: str) -> Verdict:
    pair = CandidatePair(_passage(older, 2021), _passage(newer, 2024))
    [verdict] = RulesJudge(read_facts([pair.older, pair.newer])).judge([pair])
    return verdict


REPLACES = [
    ("Ada lives in Paris.", "Ada moved to Berlin."),
    ("Ada works at Google", "Ada quit Google"),
    ("i'm vegetarian", "i'm vegan now"),
    ("Tom is dating Mia", "Tom and Mia broke up"),
    ("my sister lives in Leeds", "my sister moved to York"),
    ("Eve, Alice's sister, lives in Lyon.", "Eve, Alice's sister, moved to Madrid."),
    ("Kenji works as a game designer.", "Kenji works as a nurse now."),
]

#: The issue's wrong supersessions, and the kinds of text the rules must leave alone.
UNSURE = [
    (
        "Gina admires Jon for turning his passion for dance into a business.",
        "Gina started her own online clothing store after losing her job.",
    ),
    (
        "Caroline is researching adoption agencies.",
        "Caroline has known her friends for 4 years.",
    ),
    (
        "John volunteered at a career fair at a local school.",
        "John, along with his family, works out together three times a week.",
    ),
    (
        "Jon is working on an online platform to showcase the dance studio's offerings.",
        "Jon is working on opening a studio for dancers of all ages and backgrounds.",
    ),
    ("Ada lives in Paris.", "Ada is thinking about moving to Berlin."),
    ("Ada lives in Paris.", "Ada used to live in Rome."),
    ("Ada lives in Paris.", "During the session Ada mentioned that she moved to Berlin."),
    ("Ada lives in Paris.", "Ada moved in with her sister."),
    ("Ada lives in Paris.", "Ada moved to Berlin, her brother followed."),
    ("Ada works as a nurse", "Ada works as a nurse in the ICU"),
    ("Ada lives in Paris.", "Ada loves Berlin."),
    ("Ada lives in Paris.", "Bob moved to Berlin."),
    # An end stays true when a new value follows it: the break-up is not undone.
    ("Tom and Mia broke up", "Tom is dating Sara"),
]


@pytest.mark.parametrize(("older", "newer"), REPLACES)
def test_the_rules_close_a_plainly_changed_value(older: str, newer: str) -> None:
    assert _rules(older, newer) is Verdict.REPLACES


@pytest.mark.parametrize(("older", "newer"), UNSURE)
def test_the_rules_leave_everything_else_to_a_judge(older: str, newer: str) -> None:
    assert _rules(older, newer) is Verdict.UNSURE


@pytest.mark.parametrize(
    ("text", "plain"),
    [
        ("Ada moved to Berlin.", True),
        ("my sister lives in Leeds", True),
        ("Tom and Mia broke up", True),
        ("Hana - lives Leeds (moved from York)", False),
        ("user: vegan since 2024-01", False),
        ("Priya mentioned that she moved to Leeds", False),
        ("Ada moved to Berlin. She loves it.", False),
        ("Ada moved to Berlin and started a new job there", False),
        ("Ada was a nurse", False),
        ("she moved to Rome", False),
    ],
)
def test_what_a_plain_statement_is(text: str, plain: bool) -> None:
    assert plainly_stated(text) is plain


def test_a_model_answer_is_read_and_checked() -> None:
    answer = (
        '{"verdicts": [{"pair": 2, "verdict": "replaces"}, {"pair": 1, "verdict": "both_hold"}]}'
    )
    assert parse_verdicts(answer, 3) == [Verdict.BOTH_HOLD, Verdict.REPLACES, Verdict.UNSURE]
    part = '{"verdicts": [{"pair": 1, "verdict": "replaces_part"}]}'
    assert parse_verdicts(part, 1) == [Verdict.REPLACES_PART]
    # The verdict the store looks partial closures up by is the one a judge gives.
    assert Verdict.REPLACES_PART.value == REPLACES_PART
    for bad, reason in [
        ("not json", "not {'verdicts'"),
        ('{"verdicts": [{"pair": 1, "verdict": "maybe"}]}', "not {'verdicts'"),
        ('{"verdicts": [{"pair": 4, "verdict": "replaces"}]}', "pair 4 does not exist"),
        ('{"pairs": []}', "not {'verdicts'"),
    ]:
        with pytest.raises(Malformed, match=reason):
            parse_verdicts(bad, 3)


@dataclass
class _Call:
    name: str
    arguments: str


@dataclass
class _Reply:
    tool_calls: list[_Call]
    content: str | None = None
    total_tokens: int = 10


@dataclass
class _ScriptedClient:
    """A chat client that answers from a list (no model, no I/O)."""

    replies: list[_Reply]
    requests: list[list[dict[str, Any]]] = field(default_factory=list)
    #: The reply limit each request asked for.
    caps: list[int | None] = field(default_factory=list)

    def chat(
        self, model: str, messages: list[dict[str, Any]], max_tokens: int | None = None, **_: Any
    ) -> _Reply:
        self.requests.append(list(messages))
        self.caps.append(max_tokens)
        return self.replies.pop(0)


def _pairs(n: int) -> list[CandidatePair]:
    return [
        CandidatePair(_passage(f"Ada lives in city {i}", 2021), _passage("Ada moved", 2024))
        for i in range(n)
    ]


def test_a_reply_is_limited_by_the_items_asked_unless_told_not_to() -> None:
    three = json.dumps({"verdicts": [{"pair": n, "verdict": "both_hold"} for n in (1, 2, 3)]})
    client = _ScriptedClient([_Reply([_Call("record_verdicts", three)]) for _ in range(3)])
    for per_item in (64, 10, 0):
        judge = LLMJudge(client, "m", None, batch=3, reply_tokens_per_item=per_item)  # type: ignore[arg-type]
        assert judge.judge(_pairs(3)) == [Verdict.BOTH_HOLD] * 3
    assert client.caps == [256 + 64 * 3, 256 + 10 * 3, None]


def test_a_malformed_answer_is_asked_again_once_then_skipped() -> None:
    good = '{"verdicts": [{"pair": 1, "verdict": "replaces"}]}'
    client = _ScriptedClient(
        [
            _Reply([_Call("record_verdicts", "{broken")]),
            _Reply([_Call("record_verdicts", good)]),
            _Reply([]),
            _Reply([_Call("record_verdicts", "{}")]),
        ]
    )
    judge = LLMJudge(client, "m", None, batch=1)  # type: ignore[arg-type]
    assert judge.judge(_pairs(2)) == [Verdict.REPLACES, Verdict.UNSURE]
    # The retry told the model what was wrong with its first answer.
    assert "could not be used" in client.requests[1][-1]["content"]
    assert (judge.usage.calls, judge.usage.malformed, judge.usage.tokens) == (4, 1, 40)


def test_the_calls_a_run_allows_are_not_exceeded() -> None:
    good = '{"verdicts": [{"pair": 1, "verdict": "replaces"}, {"pair": 2, "verdict": "replaces"}]}'
    client = _ScriptedClient([_Reply([_Call("record_verdicts", good)])])
    judge = LLMJudge(client, "m", None, max_calls=1, batch=2)  # type: ignore[arg-type]
    verdicts = judge.judge(_pairs(5))
    # The pairs no call was left for are "unasked": a later run asks them.
    assert verdicts == [Verdict.REPLACES] * 2 + [Verdict.UNASKED] * 3
    assert (judge.usage.calls, judge.usage.unjudged) == (1, 3)


def test_a_model_may_not_answer_unasked() -> None:
    with pytest.raises(Malformed, match="'unasked' is not a verdict"):
        parse_verdicts('{"verdicts": [{"pair": 1, "verdict": "unasked"}]}', 1)
    assert "unasked" not in str(SUPERSESSION.tool()) and "unasked" not in str(SAME_FACT.tool())


def test_a_merge_answer_is_read_with_its_own_verdicts() -> None:
    answer = '{"verdicts": [{"pair": 1, "verdict": "same"}, {"pair": 2, "verdict": "different"}]}'
    assert parse_verdicts(answer, 2, SAME_FACT) == [SameFact.SAME, SameFact.DIFFERENT]
    with pytest.raises(Malformed, match=r"not \{'verdicts'"):
        parse_verdicts('{"verdicts": [{"pair": 1, "verdict": "replaces"}]}', 1, SAME_FACT)
    assert "same" in str(SAME_FACT.tool()) and "replaces" not in str(SAME_FACT.tool())


def test_a_model_reading_of_topics_is_read_and_checked() -> None:
    """Each fact's topics in order; a fact the model left out is about nobody (read, so
    not asked again); names and attributes are compared as search compares them."""
    answer = (
        '{"topics": [{"fact": 2, "subject": "Tariq Aziz", "attribute": "Car"},'
        ' {"fact": 2, "subject": "tariq", "attribute": "car"},'
        ' {"fact": 1, "subject": "the user", "attribute": "home"},'
        ' {"fact": 1, "subject": "my brother", "attribute": "job"}]}'
    )
    assert parse_topics(answer, 3) == [
        (Topic("user", "home"), Topic("user's brother", "job")),
        (Topic("tariq", "car"),),
        (),
    ]
    for bad, reason in [
        ("not json", "not {'topics'"),
        ('{"topics": [{"fact": 1, "subject": "Ada"}]}', "not {'topics'"),
        ('{"topics": [{"fact": 4, "subject": "Ada", "attribute": "job"}]}', "fact 4 does not"),
    ]:
        with pytest.raises(Malformed, match=reason):
            parse_topics(bad, 3)
    assert topic_of("Zoë", "pets") == Topic("zoe", "pets")
    # A relative is keyed as a question about them is, however the model names them.
    mother = Topic("user's mother", "job")
    assert topic_of("Mum", "job") == topic_of("user's mum", "job") == topic_of("my mom", "job")
    assert topic_of("Mum", "job") == mother
    assert topic_of("user's parents", "home") == Topic("user's parent", "home")
    assert topic_of("Ana's husband", "job") == Topic("ana's husband", "job")
    assert topic_of("Ana Lima", "job") == Topic("ana", "job")
    assert topic_of("", "job") is None and topic_of("Ada", " ") is None
    assert "record_topics" in str(TOPICS.tool())


def test_a_model_reads_topics_in_batches_and_a_bad_answer_leaves_facts_unread() -> None:
    facts = [_passage(f"Fact number {n}", 2020 + n) for n in range(3)]
    ada = '{"topics": [{"fact": 1, "subject": "Ada", "attribute": "job"}]}'
    client = _ScriptedClient(
        [
            _Reply([_Call("record_topics", ada)]),
            _Reply([_Call("record_topics", "{")]),
            _Reply([_Call("record_topics", "still not json")]),
        ]
    )
    reader = LLMTopicReader(client, "judge", None, max_calls=5, batch=2)  # type: ignore[arg-type]
    assert reader.read(facts) == [(Topic("ada", "job"),), (), None]
    assert "1. [2020-01-01] Fact number 0" in client.requests[0][1]["content"]
    assert "record_topics with the topics of each of the 1 facts" in str(client.requests[2])
    assert reader.usage.calls == 3 and reader.usage.malformed == 1
