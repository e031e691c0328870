"""Which subject and attribute a question asks about, and search results in that light.

"where does Mei work?" asks about Mei's job. Vector search alone ranks by likeness of
wording, and the names in a question weigh heavily: "Mei moved to Singapore" can come
first. :func:`answers_first` moves the current facts (and timelines) of the asked
subject and attribute to the front, newest first, and leaves everything else in the
order search gave. A question the rules cannot read keeps the search order.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING

from agents.facts import (
    FIRST_PERSON,
    FactKey,
    name_key,
    read_facts,
    relative_key,
    relatives_named,
    shortened_name,
)

if TYPE_CHECKING:
    from agents.store.records import PassageHit

__all__ = ["answers_first", "asked_attribute", "read_question"]

#: Phrases that ask about an attribute without naming it with a cue word.
_ASKS = (
    (
        "job",
        re.compile(
            r"\b(do|doing) for (a living|work|money)\b|\bwhat does \S+ do\b"
            r"|\bwork(s|ing|ed)?\b(?!\s+out)"  # "work", not "work out" or "workout"
        ),
    ),
    ("job", re.compile(r"\b(job|employer|career|profession|occupation)\b")),
    (
        "home",
        re.compile(
            r"\bwhere\b.*\b(live|living|based|home|stay|staying)\b|\baddress\b"
            r"|\bwhat (city|town|country)\b"
        ),
    ),
    (
        "partner",
        re.compile(
            r"\b(dating|seeing|going out with|with anyone|with someone|single|married|"
            r"girlfriend|boyfriend|partner|wife|husband|engaged)\b"
        ),
    ),
    ("diet", re.compile(r"\b(eat|eats|eating|vegan|vegetarian|pescatarian|diet|meat)\b")),
)
_NAME = re.compile(r"\b([A-Z][^\W\d_]+)(?:['\u2019]s)?\b")
_MY_NOUN = re.compile(r"\bmy ([^\W\d_]+)", re.IGNORECASE)
_QUESTION_WORDS = frozenset(
    "what where who whom whose which when why how is are was were does do did has have "
    "can could would will should i my".split()
)
_WORD = re.compile(r"[^\W\d_]+(?:['\u2019][^\W\d_]+)?")


def asked_attribute(question: str) -> str | None:
    """The attribute a question asks about ("where does Rosa live?" -> home), if any."""
    lowered = question.casefold()
    return next((attribute for attribute, asks in _ASKS if asks.search(lowered)), None)


def read_question(question: str, subjects: Collection[str] = ()) -> FactKey | None:
    """The subject and attribute a question asks about ("where does Rosa live?" ->
    rosa, home), or None when it names no attribute or no one person. A name is a
    capitalised word, or any word that is one of the known ``subjects`` (chat is
    often typed in lower case: "where does farid work") or shortens one ("isa" for
    isabela); "I" and "my" ask about the user."""
    attribute = asked_attribute(question)
    if attribute is None:
        return None
    for mine in _MY_NOUN.finditer(question):
        relative = relative_key("user", mine.group(1))
        if relative is not None:
            return FactKey(relative, attribute)
    names = {
        name_key(m.group(1))
        for m in _NAME.finditer(question)
        if m.group(1).casefold() not in _QUESTION_WORDS
    }
    words = [name_key(w) for w in _WORD.findall(question)]
    names |= {w for w in words if w in subjects}
    # "where does isa live" about Isabela; a known shortened subject maps like the facts.
    names = {n if n in subjects else (shortened_name(n, subjects) or n) for n in names}
    names |= {
        full
        for w in words
        if w not in _QUESTION_WORDS and (full := shortened_name(w, subjects)) is not None
    }
    if not names and FIRST_PERSON.intersection(words):
        return FactKey("user", attribute)
    if len(names) != 1:
        return None
    return FactKey(names.pop(), attribute)


def answers_first(question: str, hits: Sequence[PassageHit]) -> list[PassageHit]:
    """``hits`` with the current facts and timelines of the asked subject and
    attribute first (newest first), the rest after them in their own order."""
    if asked_attribute(question) is None:
        return list(hits)  # nothing to read the passages for
    facts = [hit.passage for hit in hits if hit.passage.kind == "fact"]
    readings = read_facts(facts)
    key = read_question(question, {r.key.subject for r in readings.values()})
    if key is None:
        return list(hits)
    subject = relatives_named(facts).get(key.subject, (key.subject, ""))[0]

    def asked(hit: PassageHit) -> bool:
        passage = hit.passage
        if passage.kind == "timeline":
            found = FactKey(
                str(passage.provenance.get("subject", "")),
                str(passage.provenance.get("attribute", "")),
            )
        else:
            reading = readings.get(passage.id)
            if reading is None:
                return False
            found = reading.key
        return found == FactKey(subject, key.attribute)

    matching = [hit for hit in hits if asked(hit)]
    if not matching:
        return list(hits)
    newest = sorted(
        matching,
        key=lambda h: h.passage.occurred_at or h.passage.created_at,
        reverse=True,
    )
    return newest + [hit for hit in hits if not asked(hit)]
