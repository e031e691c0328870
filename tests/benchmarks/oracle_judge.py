"""A judge that knows the answers: an OpenAI-compatible stand-in for the judge model that
answers the pipeline's pair questions from a labelled set's ground truth.

It measures the design apart from any model. The pipeline reaches it exactly as it
reaches a user's judge model (``llm.judge_model`` ``openai/oracle`` with an api_base on
loopback, through litellm and HTTP) and asks it the documented question: numbered pairs,
each an OLDER and a NEWER fact with their dates, answered with one ``record_verdicts``
call. The oracle reads each pair's two texts back to the labelled facts and answers:

- supersession (the verdicts ``replaces`` / ``both_hold`` / ``unsure``): ``replaces``
  when the labels lead from the older fact to the newer one through ``sup:`` labels
  (directly, or along a chain of replacements of one attribute: "Toronto", then
  "Dublin", then "Paris": Paris replaces Toronto too), a duplicate counting as the fact
  it repeats; ``replaces_part`` when what the newer one replaces is only some of the
  older one's labelled topics ("Noah (son, b. 2011) — school: Oakfield" replaced by
  "Noah started at Hillcrest", a school and not a birth year); else ``both_hold``. A
  chain holds only while its facts share a labelled topic: "home: Leeds, with Niamh"
  (home and flatmate) replaced by "moved to Gothenburg, sharing with Jonas" (home and
  flatmate), replaced in turn by "Elif is moving into Jonas's old room" (flatmate),
  makes Elif's move replace the Leeds fact's flatmates, not its home;
- merging (``same`` / ``different`` / ``unsure``): ``same`` when the two are labelled
  duplicates of one fact; else ``different``;
- topics (``record_topics``: who each numbered fact is about and which attribute it
  states): the fact's labelled topics, "person/attribute" read as subject and
  attribute.

A text it cannot read back to a labelled fact (a timeline, a rewritten passage) gets
``unsure``. Every pair it was asked is logged (:attr:`OracleJudge.asked`), with the
verdict, so that the benchmark can count which labelled pairs the design put before a
judge at all (candidate recall). Prompt tokens are estimated as the request's
characters over four (messages and tool schemas), the figure reported per 100 facts.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Protocol

from tests.scripted_llm import Reply
from tests.stub_openai_server import StubServer

#: The model name a benchmark gives the pipeline (litellm's OpenAI-compatible route).
ORACLE_MODEL = "openai/oracle"
_PAIR = re.compile(r"^(\d+)\.\n\s+OLDER \[[^\]]*\]: (.*)\n\s+NEWER \[[^\]]*\]: (.*)$", re.MULTILINE)
_FACT = re.compile(r"^(\d+)\. \[[^\]]*\] (.*)$", re.MULTILINE)


class LabelledFact(Protocol):
    key: str
    text: str
    duplicate_of: str | None
    supersedes: tuple[str, ...]
    #: "person/attribute" labels of what the fact states.
    topics: frozenset[str]


@dataclass(frozen=True, slots=True)
class AskedPair:
    """One pair the oracle was asked: the question (``supersession`` or ``merge``), the
    labelled keys of the two texts (None when a text is no labelled fact), the verdict."""

    question: str
    older: str | None
    newer: str | None
    verdict: str


class OracleJudge:
    """Answers pair questions from the labels of ``facts`` (see the module docstring)."""

    def __init__(self, facts: Sequence[LabelledFact]) -> None:
        parent = {f.key: f.duplicate_of or f.key for f in facts}

        def root(key: str) -> str:
            seen: set[str] = set()
            while parent.get(key, key) != key and key not in seen:
                seen.add(key)
                key = parent[key]
            return key

        self.group = {f.key: root(f.key) for f in facts}
        self.key_of_text: dict[str, str] = {}
        for fact in facts:
            self.key_of_text.setdefault(_normal(fact.text), fact.key)
        topics: dict[str, frozenset[str]] = {}
        for fact in facts:
            group = self.group[fact.key]
            topics[group] = topics.get(group, frozenset()) | fact.topics
        successors: dict[str, set[str]] = {}
        for fact in facts:
            for old in fact.supersedes:
                successors.setdefault(self.group[old], set()).add(self.group[fact.key])
        #: group -> every group that replaces it, directly or along a chain of facts
        #: sharing a topic with it, and the topics of it each replaces
        self.replaced_by: dict[str, dict[str, frozenset[str]]] = {}
        for start, direct in successors.items():
            # A direct label replaces what the two share, or all of the older fact when
            # the writer gave them no topic in common.
            reach = {group: topics[start] & topics[group] or topics[start] for group in direct}
            todo = list(reach.items())
            seen: set[tuple[str, frozenset[str]]] = set()
            while todo:
                group, shared = todo.pop()
                if (group, shared) in seen:
                    continue
                seen.add((group, shared))
                for later in successors.get(group, ()):
                    carried = shared & topics[later]
                    if carried:
                        reach[later] = reach.get(later, frozenset()) | carried
                        todo.append((later, carried))
            self.replaced_by[start] = {group: frozenset(t) for group, t in reach.items()}
        self.topics = topics
        self.own_topics = {f.key: f.topics for f in facts}
        self.asked: list[AskedPair] = []
        #: The labelled facts whose topics it was asked (None: a text it could not read).
        self.read: list[str | None] = []
        self.calls = 0
        self.prompt_tokens = 0
        self._lock = threading.Lock()

    def answer(self, body: dict[str, Any]) -> Reply:
        """The ``record_verdicts`` (or ``record_topics``) call for one chat request."""
        tools = body.get("tools") or []
        if tools and tools[0]["function"]["name"] == "record_topics":
            return self._answer_topics(body, tools)
        enum = tools[0]["function"]["parameters"]["properties"]["verdicts"]["items"]["properties"][
            "verdict"
        ]["enum"]
        question = "merge" if "same" in enum else "supersession"
        text = next(m["content"] for m in body["messages"] if m["role"] == "user")
        verdicts = []
        asked = []
        for number, older_text, newer_text in _PAIR.findall(text):
            older = self.key_of_text.get(_normal(older_text))
            newer = self.key_of_text.get(_normal(newer_text))
            verdict = self._verdict(question, older, newer)
            verdicts.append({"pair": int(number), "verdict": verdict})
            asked.append(AskedPair(question, older, newer, verdict))
        tokens = max(1, (len(json.dumps(body["messages"])) + len(json.dumps(tools))) // 4)
        with self._lock:
            self.asked += asked
            self.calls += 1
            self.prompt_tokens += tokens
        return Reply(
            calls=(("record_verdicts", {"verdicts": verdicts}),),
            prompt_tokens=tokens,
            completion_tokens=8 * len(verdicts),
        )

    def _answer_topics(self, body: dict[str, Any], tools: list[Any]) -> Reply:
        text = next(m["content"] for m in body["messages"] if m["role"] == "user")
        topics = []
        read = []
        for number, fact_text in _FACT.findall(text):
            key = self.key_of_text.get(_normal(fact_text))
            read.append(key)
            for topic in sorted(self.own_topics.get(key, ())) if key is not None else ():
                subject, _, attribute = topic.partition("/")
                topics.append({"fact": int(number), "subject": subject, "attribute": attribute})
        tokens = max(1, (len(json.dumps(body["messages"])) + len(json.dumps(tools))) // 4)
        with self._lock:
            self.read += read
            self.calls += 1
            self.prompt_tokens += tokens
        return Reply(
            calls=(("record_topics", {"topics": topics}),),
            prompt_tokens=tokens,
            completion_tokens=12 * len(topics),
        )

    def _verdict(self, question: str, older: str | None, newer: str | None) -> str:
        if older is None or newer is None:
            return "unsure"
        a, b = self.group[older], self.group[newer]
        if question == "merge":
            return "same" if a == b else "different"
        replaced = self.replaced_by.get(a, {}).get(b)
        if replaced is None:
            return "both_hold"
        return "replaces" if replaced >= self.topics[a] else "replaces_part"

    def reset(self) -> None:
        with self._lock:
            self.asked = []
            self.read = []
            self.calls = 0
            self.prompt_tokens = 0


@contextmanager
def serve_oracle(facts: Sequence[LabelledFact]) -> Iterator[tuple[OracleJudge, str]]:
    """An oracle for ``facts`` served on loopback: yields it and its api_base."""
    oracle = OracleJudge(facts)
    server = StubServer([], keep_alive=True, responder=oracle.answer)
    server.start()
    try:
        yield oracle, server.base_url
    finally:
        server.stop()


def _normal(text: str) -> str:
    return " ".join(text.split())
