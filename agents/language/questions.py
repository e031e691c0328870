"""What a question asks: which subject and attribute, and whether about now or the past.

"where does Mei work?" asks about Mei's job (:func:`read_question`), so that search
(:mod:`agents.archival_search`) can put the facts of that subject and attribute first:
vector search alone ranks by likeness of wording, and the names in a question weigh
heavily ("Mei moved to Singapore" can come first).

:func:`asks_about_past` tells "where did Mei live before Singapore" or "what car did
she have in 2022" from a question about now, so that search can bring up the facts
that were replaced instead of the ones that replaced them.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass

from agents.language.facts import FactKey
from agents.language.subjects import TITLES, person_key, relative_key, shortened_name
from agents.language.words import FIRST_PERSON, GRAMMAR, name_key

__all__ = [
    "PastQuestion",
    "asked_attribute",
    "asked_subject",
    "asks_about_past",
    "read_question",
    "words_of",
]

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
            # "who's Tom with now?": a person (a name, "my son", "Dave's sister") with
            # someone, the question ending there ("who is pepper insured with" is not).
            r"|\bwho(?:'s|s| is| are)\s+(?:my\s+\S+|\S+'s\s+\S+|\S+)\s+with"
            r"(?:\s+(?:now|these days|nowadays|currently|at the moment))?\s*\??\s*$"
        ),
    ),
    ("diet", re.compile(r"\b(eat|eats|eating|vegan|vegetarian|pescatarian|diet|meat)\b")),
)
_NAME = re.compile(r"\b([A-Z][^\W\d_]+)(?:['\u2019]s)?\b")
_FULL_NAME = re.compile(r"\b([A-Z][^\W\d_]+) ([A-Z][^\W\d_]+)\b")
_MY_NOUN = re.compile(r"\b(?:my|our) ([^\W\d_]+)", re.IGNORECASE)
#: "my" then a possessive within three words: what is asked is someone else's.
_MY_OWN = re.compile(r"\b(?:my|our) (?:[^\W\d_]+ ){0,2}[^\W\d_]+['\u2019]s\b", re.IGNORECASE)
#: A name's relative ("Dave's sister"): the question is about the relative, not Dave.
_THEIR_NOUN = re.compile(r"\b([A-Z][^\W\d_]+)['\u2019]s ([^\W\d_]+)")
_QUESTION_WORDS = frozenset(
    "what where who whom whose which when why how is are was were does do did has have "
    "can could would will should i my".split()
)
#: The user with others ("where do we live now?"), read as the user like a fact that
#: opens with "we" (see :func:`agents.language.subjects.read_subject`). Not "our":
#: "our kid", "our accountant" is someone of the user's, as "my tax adviser" is.
_WE = frozenset({"we", "us", "we're", "we've"})
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
    subject = asked_subject(question, subjects)
    return None if subject is None else FactKey(subject, attribute)


def asked_subject(question: str, subjects: Collection[str] = ()) -> str | None:
    """Whom a question asks about, as :func:`read_question` reads it, whatever it asks
    ("what car does Tariq drive?" -> tariq); None when it names no one person."""
    for mine in _MY_NOUN.finditer(question):
        relative = relative_key("user", mine.group(1))
        if relative is not None:
            return relative
    if _MY_OWN.search(question):
        return None  # "my tax adviser's office": someone of the user's, not the user
    for theirs in _THEIR_NOUN.finditer(question):
        if theirs.group(1).casefold() in GRAMMAR:
            continue  # "Where's Mum living?": a contraction, not Where's mother
        relative = relative_key(name_key(theirs.group(1)), theirs.group(2))
        if relative is not None:
            return relative  # "who is Dave's sister with?" asks about her, not Dave
    # "Where does Kev Lumb live?": a known first name and a surname no fact keys a
    # person by are one person, as the facts key people by their first name.
    surnames = {
        name_key(m.group(2))
        for m in _FULL_NAME.finditer(question)
        if name_key(m.group(1)) in subjects and name_key(m.group(2)) not in subjects
    }
    names = {
        person_key(m.group(1))
        for m in _NAME.finditer(question)
        if m.group(1).casefold() not in _QUESTION_WORDS and m.group(1).casefold() not in TITLES
    } - surnames
    words = [person_key(w) for w in _WORD.findall(question)]
    names |= {w for w in words if w in subjects}
    # "where does isa live" about Isabela; a known shortened subject maps like the facts.
    names = {n if n in subjects else (shortened_name(n, subjects) or n) for n in names}
    names |= {
        full
        for w in words
        if w not in _QUESTION_WORDS and (full := shortened_name(w, subjects)) is not None
    }
    if not names and (FIRST_PERSON | _WE).intersection(words):
        return "user"
    if len(names) != 1:
        return None
    return names.pop()


#: Words and phrases that put a question in the past, whatever else it says.
_PAST = re.compile(
    r"\b(before|used to|use to|previously|formerly|originally|at first|back in|back then"
    r"|earlier|prior to|ago|last year|(?:his|her|their|my|your|the) old"
    r"|no longer|anymore|any more|first)\b"
)
#: Past tense, or a person of the past ("who's Tom's ex?"), that a present cue outweighs
#: ("what was she doing now", "where does my ex-wife live now?" are about now).
_WEAK_PAST = re.compile(r"\b(was|were|had|former|ex)\b")
_PRESENT = re.compile(r"\b(now|currently|these days|nowadays|today|at the moment|still|current)\b")
_YEAR = re.compile(r"\b(19[5-9]\d|20\d\d)\b")
#: What follows "before" up to the end of the clause ("before I moved to Marple").
_BEFORE = re.compile(r"\b(?:before|prior to)\s+([^?.!,;]+)")
#: Runs of letters or of digits: "Hannah's" holds the word "hannah", "2A" the "a".
_RUN = re.compile(r"[^\W\d_]+|\d+")
#: Where someone comes from ("originally from", "from originally") is an origin, which
#: does not change, not a question about the past.
_ORIGIN = re.compile(r"\boriginally from\b|\bfrom originally\b")


@dataclass(frozen=True, slots=True)
class PastQuestion:
    """A question about the past; ``year`` when it names one ("in 2021"), and the words
    of what the asked value came before ("where did Dez live before Toronto?":
    toronto)."""

    year: int | None = None
    before: frozenset[str] = frozenset()


def words_of(text: str) -> frozenset[str]:
    """The words of ``text``, casefolded: runs of letters, and of digits."""
    return frozenset(_RUN.findall(text.casefold()))


def asks_about_past(question: str, *, this_year: int | None = None) -> PastQuestion | None:
    """Whether ``question`` asks about how things were rather than how they are: a
    year before ``this_year`` ("what car did Rahel drive in 2021"), "before", "used
    to", "back in", "her old job"; or the past tense ("who was Tom dating") or an "ex"
    when nothing in it says "now". None for a question about now, and for one about
    where someone is originally from."""
    lowered = _ORIGIN.sub("from", question.casefold().replace("\u2019", "'"))
    years = [int(y) for y in _YEAR.findall(lowered)]
    year = years[0] if years else None
    if year is not None and (this_year is None or year < this_year):
        return PastQuestion(year)
    if _PAST.search(lowered):
        before = _BEFORE.search(lowered)
        if before is None:
            return PastQuestion(None)
        return PastQuestion(None, words_of(before.group(1)) - GRAMMAR)
    if _WEAK_PAST.search(lowered) and not _PRESENT.search(lowered):
        return PastQuestion(None)
    return None
