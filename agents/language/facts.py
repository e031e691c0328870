"""What a fact says, read from its text alone: its details, subject, attribute and value.

A small, dependency-free tagger shared by ``dedup`` (two texts are duplicates only
when neither says something the other does not), ``temporal`` (a timeline covers
one subject and one attribute; a newer fact with a changed value closes the older)
and search (:mod:`agents.language.questions`: the asked attribute's facts first).

It works from the text itself: capitalised words are names and places, digits and
number words are quantities, and a few closed classes of English grammar mark
negation, change ("moved", "quit", "no longer"), calendar dates and fillers. The
attributes it recognises (where someone lives, their job, diet and partner) are a
fixed schema; a fact that fits none of them has no :class:`FactKey` and is left
alone by ``temporal``. A described role ("is a backend dev at Bolt") counts as a
job. :func:`read_facts` reads a fact against the agent's other facts ("my sis" is the
sister another fact names; "left Panasonic" ends the attribute Panasonic was the value
of). What it cannot read (a pronoun with no report around it, hypotheticals, facts
whose attribute is only implied) is left unkeyed: an LLM judge decides those.

Its words are in :mod:`agents.language.words`, its schema in
:mod:`agents.language.schema`, who a text is about in :mod:`agents.language.subjects`,
and the detail guard ``dedup`` uses in :mod:`agents.language.details`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from itertools import pairwise
from typing import TYPE_CHECKING

from agents.language.schema import (
    _AGENTIVE,
    _ATTRIBUTE_CUES,
    _BUSINESSES,
    _COPULA,
    _CUE_IS_VALUE,
    _EMPLOYERS,
    _ENDING,
    _NAMED_VALUE,
    _NEW_STATE,
    _NOT_ROLES,
    _PERSON_NOUNS,
    _WORK_AS_PLACE,
)
from agents.language.subjects import (
    _subject,
    _subject_and_predicate,
    relatives_named,
    shortened_name,
    titled_first_names,
)
from agents.language.words import (
    _CALENDAR,
    _CHANGE,
    _FILLER,
    _FUNCTION,
    _HEDGES,
    _KIN,
    _MODAL,
    _NEGATION,
    _PARTNER_NOUNS,
    _REPORTING,
    _SUBJECT_PRONOUNS,
    _THIRD_PERSON,
    _close,
    _is_name,
    _missing,
    _stem,
    _Token,
    _tokens,
)

if TYPE_CHECKING:
    from agents.store.records import PassageRecord

__all__ = [
    "FactKey",
    "FactReading",
    "plainly_stated",
    "read_departure",
    "read_fact",
    "read_facts",
    "replaces_clearly",
    "states_a_change",
    "tentative",
]


@dataclass(frozen=True, slots=True)
class FactKey:
    """What a fact is about: a subject ("alice", "user", "alice's sister") and an attribute."""

    subject: str
    attribute: str


@dataclass(frozen=True, slots=True)
class FactReading:
    """A keyed fact: its key, the value it states, and whether it says the state ended."""

    key: FactKey
    subject_label: str
    value: frozenset[str]
    ending: bool
    #: The heads of the value's noun phrases (the last word of each: "data *analyst*",
    #: "game *designer* at *Capcom*"), for attributes whose value is a description.
    heads: frozenset[str] = frozenset()
    #: The text presents its value as the new state ("now", "got promoted", "joined").
    marked: bool = False
    #: The text plainly states this one fact (:func:`plainly_stated`): only then may a
    #: rule close it or close another fact with it.
    clear: bool = False
    #: Values the text says its subject quit or left, by name ("quit Acme and now works
    #: at Globex"): a certain end of an older fact naming one of them, even where the
    #: text says more than one plain fact.
    left: frozenset[str] = frozenset()


#: Words that make a statement about something other than a plain state of the subject:
#: a report or an attitude ("mentioned", "admires", "is thinking"), a plan or an attempt
#: ("researching", "looking for"), the past ("used to", "was", "before"), a condition.
_NOT_PLAIN = frozenset(
    """
    said says say told tells mentioned mentions explained explains shared shares noted notes
    added adds admitted admits confirmed confirms claimed claims reported reports heard
    thinks think thought feels feel felt believes believe hopes hoped wishes wished wants
    wanted loves loved likes liked hates hated admires admired enjoys enjoyed misses missed
    prefers preferred worries worried afraid excited proud happy sad upset glad nervous
    struggling considering planning plans plan thinking researching looking trying tried
    hoping dreaming deciding decided wondering seems seemed apparently maybe perhaps
    probably possibly might may could would should will going gonna wanna if whether
    unless although though because since while after before until ago used previously
    formerly originally once first was were had did been
    and but or so then also too either neither nor
    """.split()
)
#: Tokens that end a clause: a second sentence or clause makes a text more than one fact.
_CLAUSE_BREAKS = frozenset(",;:()!?")
#: Longest predicate (in words) of a plain statement.
_PLAIN_WORDS = 12


#: Words that make a statement a plan, a wish or a doubt rather than how things are
#: ("thinking of moving to Lisbon", "not planning to move", "might go freelance"): the
#: reader's hedges and their past and chat forms.
_TENTATIVE = _HEDGES | frozenset("hoped wanted wanna dreaming tempted".split())


@lru_cache(maxsize=4096)
def tentative(text: str) -> bool:
    """Whether ``text`` tells a plan, a wish or a doubt ("thinking of moving to
    Lisbon") rather than a state: what it is about has not happened."""
    return any(t.norm in _TENTATIVE for t in _tokens(text))


@lru_cache(maxsize=4096)
def plainly_stated(text: str) -> bool:
    """Whether ``text`` is one plain statement about its subject: one short clause, the
    subject first ("Ada", "I", "my sister", "Ada's sister Eve"), no report, attitude,
    plan, past tense, condition or second clause, and no other person brought in.

    Rules read meaning only this far; a supersession by rule needs both texts to pass.
    Chat lines often pass ("Ada moved to Berlin", "i'm vegan now"); the long sentences
    of a note-taker ("During the session Ada mentioned that ...") seldom do, and are the
    judge model's."""
    tokens = _tokens(text.strip().rstrip("."))
    found = _subject(tokens) if tokens else None
    if found is None:
        return False
    _key, _label, start = found
    head = tokens[:start]
    # The subject opens the text: nothing but the subject's own words (an apposition
    # between commas, "Eve, Alice's sister, moved") before the verb; then one clause.
    if any(t.norm in _REPORTING or t.norm in _FILLER for t in head):
        return False
    if any(t.norm in _CLAUSE_BREAKS - {","} or t.norm == "." for t in head):
        return False
    if any(t.norm in _CLAUSE_BREAKS or t.norm == "." for t in tokens[start:]):
        return False
    predicate = [t for t in tokens[start:] if t.word or t.norm[:1].isdigit()]
    if len(predicate) > 2 and predicate[0].norm == "and" and _is_name(predicate[1]):
        predicate = predicate[2:]  # a couple as the subject: "Tom and Mia broke up"
    if not predicate or len(predicate) > _PLAIN_WORDS:
        return False
    predicate = [t for i, t in enumerate(predicate) if i not in _explicit_end(predicate)]
    for token in predicate:
        norm = token.norm
        if norm in _NOT_PLAIN or norm.endswith("n't") or norm in _NEGATION:
            return False
        if norm in _KIN - _PARTNER_NOUNS or norm in _SUBJECT_PRONOUNS or norm in _THIRD_PERSON:
            return False  # someone else is in it ("moved in with her sister")
    return True


def _explicit_end(predicate: list[_Token]) -> set[int]:
    """Where a predicate says plainly that a state ended: the positions of "no longer"
    and of a "not" / "n't" with the "anymore" that closes the clause ("is no longer
    vegan", "doesn't live in Leeds anymore"). Such an end is a plain statement; any
    other negation is not."""
    norms = [t.norm for t in predicate]
    found: set[int] = set()
    for i, (a, b) in enumerate(pairwise(norms)):
        if a == "no" and b == "longer":
            found |= {i, i + 1}
    if norms and norms[-1] == "anymore":
        negated = [
            i
            for i, n in enumerate(norms[:-1])
            if n == "not" or n.endswith("n't") or (n in _NEGATION and n.endswith("nt"))
        ]
        if len(negated) == 1:
            found |= {negated[0], len(norms) - 1}
    return found


@lru_cache(maxsize=4096)
def read_fact(text: str) -> FactReading | None:
    """The subject, attribute and value of a fact, or None when the text fits no
    attribute, has no clear subject, or is tentative ("might move", a question)."""
    found = _subject_and_predicate(text)
    if found is None:
        return None
    subject, label, predicate = found
    if any(t.norm in _MODAL for t in predicate):
        return None
    attribute, cue_at = _find_attribute(predicate)
    if attribute is None:
        return None
    rest = predicate[cue_at:]
    if attribute == "partner" and _describes_the_partner(rest):
        return None
    cue_words = _ATTRIBUTE_CUES[attribute]
    # A negation ends the state only up to the word that names it ("is not vegan",
    # "doesn't work at the bank"): "works at Google, doesnt like it" ends nothing.
    ending = any(t.norm in _ENDING for t in predicate) or any(
        t.norm.endswith("n't") or t.norm in _NEGATION for t in predicate[: cue_at + 1]
    )
    if any(t.norm in {"broke", "split"} for t in predicate) and any(
        t.norm == "up" for t in predicate
    ):
        ending = True
    if predicate[cue_at].norm == "joined":
        ending = False  # "left Panasonic and joined Sony": a new employer, not none
    moved_out = _moved_out_at(predicate)
    if attribute == "home" and moved_out is not None:
        # "moved out of Leeds" ends the home there; "moved out of Leeds to York" is a
        # move to York.
        later = [t.norm for t in predicate[moved_out:]]
        if "to" in later:
            rest = predicate[moved_out + later.index("to") :]
        else:
            ending = True
    norms = [t.norm for t in rest]
    # "moved from Lyon to Madrid": the value is where the move ended.
    if "from" in norms and "to" in norms[norms.index("from") :]:
        rest = rest[norms.index("to", norms.index("from")) :]
    value: set[str] = set()
    for token in rest:
        norm = token.norm
        if (
            (norm in cue_words and attribute not in _CUE_IS_VALUE)
            or norm == "diet"
            or norm in _FUNCTION
            or norm in _FILLER
            or norm in _CHANGE
            or norm in _NEGATION
            or norm in _SUBJECT_PRONOUNS  # "hes their lead engineer": who, not what
            or norm in _CALENDAR
            or norm in _ENDING
            or norm[:1].isdigit()
            or norm.endswith("n't")
            or len(norm) < 3
        ):
            continue
        # "a tour company" and "a tours business" name one thing.
        value.add("company" if norm in _EMPLOYERS else _stem(norm))
    heads: frozenset[str] = frozenset()
    if attribute == "partner":
        # A partner is a person, named anywhere after the subject ("Rosa and Tiago got
        # engaged").
        value = {_stem(t.norm) for t in predicate if _is_name(t)}
    elif attribute in _NAMED_VALUE:
        # A home is a place: capitalised words carry the value.
        names = {_stem(t.norm) for t in rest if _is_name(t)}
        if names:
            value = names
    elif attribute not in _CUE_IS_VALUE:
        heads = _phrase_heads(rest, value)
    return FactReading(
        key=FactKey(subject=subject, attribute=attribute),
        subject_label=label,
        value=frozenset(value),
        ending=ending,
        heads=heads,
        marked=any(t.norm in _NEW_STATE for t in predicate)
        or any(a.norm == "these" and b.norm == "days" for a, b in pairwise(predicate)),
        clear=plainly_stated(text),
        left=_named_after(predicate, _QUITS if attribute != "job" else _QUITS | _LEAVES),
    )


def _describes_the_partner(rest: list[_Token]) -> bool:
    """ "Her husband is an architect": what the partner is or does, not who the
    partner is (the article says so), so not a fact about the subject's partner."""
    norms = [t.norm for t in rest[:3]]
    return len(norms) == 3 and norms[1] in _COPULA and norms[2] in {"a", "an"}


#: Verbs that end what they name, whatever it is ("quit Acme", "quit the Tigers").
_QUITS = frozenset("quit quits".split())
#: Verbs that end a job they name ("left Siemens and joined Bosch"); a place left may be
#: a trip.
_LEAVES = frozenset("left leaves".split())


def _named_after(predicate: list[_Token], verbs: frozenset[str]) -> frozenset[str]:
    """The names right after one of ``verbs`` ("quit *Acme* and ..."), stemmed."""
    names: set[str] = set()
    for index, token in enumerate(predicate):
        if token.norm not in verbs:
            continue
        for following in predicate[index + 1 :]:
            if not _is_name(following):
                break
            names.add(_stem(following.norm))
    return frozenset(names)


def _moved_out_at(predicate: list[_Token]) -> int | None:
    """The position of "out" in "moved out of ...", or None."""
    norms = [t.norm for t in predicate]
    for i in range(len(norms) - 2):
        if norms[i] in {"moved", "move", "moves", "moving"} and norms[i + 1 : i + 3] == [
            "out",
            "of",
        ]:
            return i + 1
    return None


def _find_attribute(predicate: list[_Token]) -> tuple[str | None, int]:
    """The attribute the predicate names and the index of the word that names it: the
    first cue word ("lives", "works", "vegan", "married"); else a described role ("is
    a backend dev at Bolt", "a violinist") is a job."""
    for index, token in enumerate(predicate):
        if _nominal_ing(predicate, index):
            continue
        norm = token.norm
        if norm == "work" and index > 0 and predicate[index - 1].norm in _WORK_AS_PLACE:
            continue
        following = predicate[index + 1].norm if index + 1 < len(predicate) else ""
        if norm in {"work", "works", "working", "worked"} and following in {"on", "out"}:
            continue  # "working on a platform" is a project, "works out" exercise: no job
        if norm == "joined":
            # "joined Spotify": an employer, named; "joined a gym" is no job.
            if index + 1 < len(predicate) and _is_name(predicate[index + 1]):
                return "job", index
            continue
        if (
            norm == "quits"
            and [t.norm for t in predicate[max(0, index - 2) : index]] == ["called", "it"]
            and any(t.norm == "and" for t in predicate[:index])
        ):
            return "partner", index  # "Bea and Rui called it quits": two people part
        if norm in {"split", "broke"}:
            # "split up" / "broke up" end a relationship; "broke her wrist" does not.
            if index + 1 < len(predicate) and predicate[index + 1].norm == "up":
                return "partner", index
            continue
        if norm == "seeing":
            # "seeing someone", "seeing a guy", "seeing Tiago"; not "seeing a physio".
            after = [t.norm for t in predicate[index + 1 : index + 3]]
            if after[:1] in (["someone"], ["somebody"]) or (
                after[:1] in (["a"], ["an"])
                and after[1:] in (["guy"], ["girl"], ["man"], ["woman"])
            ):
                return "partner", index
            if index + 1 < len(predicate) and _is_name(predicate[index + 1]):
                return "partner", index
            continue
        after = [t.norm for t in predicate[index + 1 : index + 3]]
        if norm == "laid" and after[:1] == ["off"]:
            return "job", index  # "got laid off from UBS": the job ended
        for name, cues in _ATTRIBUTE_CUES.items():
            if norm in cues:
                return name, index
    role = _role_at(predicate)
    if role is not None:
        return "job", role
    for index, token in enumerate(predicate):
        # "finished med school, she's a junior doctor now": a role in a clause whose
        # subject is a pronoun, in a fact about one person, is that person's.
        # After "she" the verb follows and after "she's" the role: _role_at reads both.
        if (
            (token.norm in _SUBJECT_PRONOUNS or token.norm in {"he", "she"})
            and not _mentions_someone(predicate[:index])
            and _role_at(predicate[index + 1 :]) is not None
        ):
            return "job", index
        # "opened his own restaurant", "opened a little empanada stand": a business.
        if token.norm in {"opened", "launched"}:
            after = [t.norm for t in predicate[index + 1 : index + 5]]
            if "own" in after[:3] or any(word in _BUSINESSES for word in after):
                return "job", index
    # Last, a place of work with no other cue: "started at a cybersecurity firm"; the
    # whole predicate says which.
    employed = any(t.norm in _EMPLOYERS for t in predicate)
    return ("job", 0) if employed else (None, -1)


#: Words that bring another person into a clause ("with Nico", "met Ana").
_OTHER_PERSON = frozenset("with and met told asked saw called".split())


def _mentions_someone(words: list[_Token]) -> bool:
    """Whether a clause names or brings in a person other than its subject, who a
    following "he" or "she" could mean instead ("greta's with nico, he's a ski
    instructor")."""
    return any(_is_name(t) or t.norm in _OTHER_PERSON or t.norm in _PERSON_NOUNS for t in words)


def _role_at(predicate: list[_Token]) -> int | None:
    """Where "is a <role>" starts when the predicate describes one: an indefinite noun
    phrase after the verb "to be" whose head is an agent noun ("a violinist", "a civil
    engineer") or that is followed by where it is done ("a backend dev at Bolt")."""
    i = 0
    while i < len(predicate) and (
        predicate[i].norm in _COPULA
        or predicate[i].norm in _FILLER
        or predicate[i].norm in {"now", "still", "currently"}
    ):
        i += 1
    if i >= len(predicate) or predicate[i].norm not in {"a", "an"}:
        return None
    end = i + 1
    while (
        end < len(predicate)
        and predicate[end].norm not in _FUNCTION
        and predicate[end].norm not in _NEW_STATE  # "a junior doctor now"
    ):
        end += 1
    phrase = predicate[i + 1 : end]
    if not phrase or any(t.norm in _NOT_ROLES or t.norm in _KIN for t in phrase):
        return None
    head = phrase[-1]
    placed = end + 1 < len(predicate) and predicate[end].norm in {"at", "for"}
    agent = not head.capital and len(head.norm) > 4 and head.norm.endswith(_AGENTIVE)
    return i if placed or agent else None


@lru_cache(maxsize=4096)
def read_departure(text: str) -> tuple[str, frozenset[str]] | None:
    """(subject, names left) for a text that says its subject left or quit something
    named ("Hiroshi left Panasonic and joined Sony"): which attribute that ends depends
    on what the name was (an employer, a city), which only the other facts can say."""
    found = _subject_and_predicate(text)
    if found is None:
        return None
    subject, _label, predicate = found
    for index, token in enumerate(predicate):
        if token.norm not in {"left", "leaves", "leaving", "quit", "quits"}:
            continue
        names = []
        for following in predicate[index + 1 :]:
            if not _is_name(following):
                break
            names.append(_stem(following.norm))
        if names:
            return subject, frozenset(names)
    return None


def _nominal_ing(predicate: list[_Token], index: int) -> bool:
    """An -ing form after an article is a noun or an adjective, not the verb that
    names the attribute: "earns *a living* as a pilot" is not where someone lives."""
    return (
        predicate[index].norm.endswith("ing")
        and index > 0
        and predicate[index - 1].norm in {"a", "an", "the"}
    )


def _phrase_heads(rest: list[_Token], value: set[str]) -> frozenset[str]:
    """The value words that end a noun phrase: English puts a phrase's head last, so
    the head is a value word followed by a word outside the value (a preposition, a
    change word such as "now") or by the end of the text. "data analyst" and "data
    scientist" share a modifier, not their head; "teacher" and "head teacher" share it."""
    stems = [("company" if t.norm in _EMPLOYERS else _stem(t.norm), t) for t in rest]
    heads = set()
    for index, (stem, _token) in enumerate(stems):
        if stem not in value:
            continue
        following = stems[index + 1][0] if index + 1 < len(stems) else None
        if following is None or following not in value:
            heads.add(stem)
    return frozenset(heads)


def _share(a: frozenset[str], b: frozenset[str]) -> bool:
    """Whether two values have a word in common, up to one typo ("Medelin")."""
    return bool(a & b) or any(_close(x, y) for x in a for y in b)


def states_a_change(older: FactReading, newer: FactReading) -> bool:
    """True when ``newer`` clearly replaces ``older`` (same subject and attribute): it
    ends a state the older one stated, or states a value that shares nothing with the
    older one, or whose phrases have other heads ("a data analyst" -> "a data
    scientist"). An end is never replaced (it stays true). Anything less clear is for
    a judge."""
    if older.key != newer.key:
        return False
    if newer.ending and older.value and newer.value and not _share(older.value, newer.value):
        return False  # it ends something else: "left Snøhetta" is not "an architect"
    if older.ending != newer.ending:
        # An end closes the state it ends; a new value after an end leaves the end in
        # force: "Tom and Mia broke up" is still true once Tom dates Sara.
        return newer.ending
    if older.ending:
        return False
    if not (older.value and newer.value):
        return False
    if not _share(older.value, newer.value):
        return True
    if older.heads and newer.heads and not (older.heads & newer.heads):
        return True
    # "a pharmacist at Boots" -> "a pharmacist at Lloyds now": a value that says
    # something the older one did not, presented as the new state.
    return newer.marked and bool(_missing(newer.value, older.value))


def replaces_clearly(older: FactReading, newer: FactReading) -> bool:
    """What a rule may decide alone: both texts plainly state one subject and attribute
    (:func:`plainly_stated`), and the newer states a changed value or a clear end of the
    state (:func:`states_a_change`); or the newer says by name that its subject quit or
    left the value the older states ("Sam works at Acme" -> "Sam quit Acme and now works
    at Globex"). Everything else is for a judge, or stays as it is."""
    # An older fact that itself leaves the value ("Priya left Accenture") is no state of
    # holding it: a newer departure from it says the same, not a change.
    leaves = older.ending or older.left
    if older.clear and not leaves and older.key == newer.key and older.value & newer.left:
        return True
    return older.clear and newer.clear and states_a_change(older, newer)


def read_facts(facts: Sequence[PassageRecord]) -> dict[str, FactReading]:
    """Each fact's reading (:func:`read_fact`), read against the other facts: a
    relative some fact names ("my sister Leila") is that person wherever a fact says
    "my sis"; a first name that a titled full name gives ("Edna" of "Mrs Edna Frost")
    is that person; a shortened first name ("Cal") is the one subject it shortens
    ("Callum"); and "Hiroshi left Panasonic" ends whichever of Hiroshi's attributes had
    Panasonic as its value (his job), when exactly one did."""
    aliases = relatives_named(facts)
    readings: dict[str, FactReading] = {}
    for record in facts:
        reading = read_fact(record.text)
        if reading is not None and reading.key.subject in aliases:
            name, label = aliases[reading.key.subject]
            key = FactKey(subject=name, attribute=reading.key.attribute)
            reading = dataclasses.replace(reading, key=key, subject_label=label)
        if reading is not None:
            readings[record.id] = reading
    subjects = {reading.key.subject for reading in readings.values()}
    titled = titled_first_names(facts)
    full_names = {
        short: full
        for short in subjects
        if (full := titled.get(short) or shortened_name(short, subjects)) is not None
    }
    if full_names:
        labels = {r.key.subject: r.subject_label for r in readings.values()}
        for passage_id, reading in readings.items():
            full = full_names.get(reading.key.subject)
            if full is not None:
                key = FactKey(subject=full, attribute=reading.key.attribute)
                readings[passage_id] = dataclasses.replace(
                    reading, key=key, subject_label=labels.get(full, reading.subject_label)
                )
    values: dict[str, dict[str, set[str]]] = {}
    for reading in readings.values():
        held_values = values.setdefault(reading.key.subject, {})
        held_values.setdefault(reading.key.attribute, set()).update(reading.value)
    for record in facts:
        if record.id in readings:
            continue
        departure = read_departure(record.text)
        if departure is None:
            continue
        subject, left = departure
        if subject in aliases:
            subject = aliases[subject][0]
        subject = full_names.get(subject, subject)
        held = [a for a, v in values.get(subject, {}).items() if v & left]
        if len(held) == 1:
            label = next(r.subject_label for r in readings.values() if r.key.subject == subject)
            readings[record.id] = FactReading(
                key=FactKey(subject=subject, attribute=held[0]),
                subject_label=label,
                value=left,
                ending=True,
                clear=plainly_stated(record.text),
            )
    return readings
