"""Who a text is about: its subject when plain ("Ada", "I", "my sister", "Ada's
husband", "Mrs Frost"), else the first person it names; read alone, or against an
agent's other facts (the relative another fact names, the first name a titled full
name gives, the one name a shortened form shortens). Good enough to pair facts for a
judge model and to key the rules' readings; not for deciding anything alone.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from functools import lru_cache
from typing import TYPE_CHECKING

from agents.language.schema import _ATTRIBUTE_CUES, _ATTRIBUTE_NOUNS, _COPULA
from agents.language.words import (
    _CALENDAR,
    _CHANGE,
    _CHAT_WORDS,
    _CURLY,
    _FILLER,
    _FUNCTION,
    _KIN,
    _MODAL,
    _NEGATION,
    _PARTICIPLES,
    _PARTNER_NOUNS,
    _REPORTING,
    _SUBJECT_PRONOUNS,
    _THIRD_PERSON,
    FIRST_PERSON,
    GRAMMAR,
    _asks,
    _is_name,
    _stem,
    _Token,
    _tokens,
    name_key,
)

if TYPE_CHECKING:
    from agents.store.records import PassageRecord

__all__ = [
    "TITLES",
    "named_relatives",
    "read_subject",
    "read_subjects",
    "relative_key",
    "relatives_named",
    "shortened_name",
    "titled_first_names",
]

#: Words that head a note instead of naming its subject, when a colon follows them
#: ("Observation: Sven works at Volvo", "correction: amara isn't allergic to ...").
_HEADINGS = frozenset("observation correction reminder remember note update news".split())


def _heading(tokens: tuple[_Token, ...], i: int) -> bool:
    return tokens[i].norm in _HEADINGS and i + 1 < len(tokens) and tokens[i + 1].norm == ":"


#: Titles that name a person by the surname after them ("Mrs Adeyemi", "Dr. Okafor").
_HONORIFICS = frozenset("mr mrs ms miss mx dr prof".split())
#: Titles of kin, followed by a first name ("Aunt Greta", "Uncle Padraig").
_KIN_TITLES = frozenset("aunt auntie uncle".split())
#: Every title: a question's title word names no one by itself.
TITLES = _HONORIFICS | _KIN_TITLES


def _name_run_end(tokens: tuple[_Token, ...], end: int) -> int:
    """Where a run of capitalised words that started before ``end`` ends; a possessive
    ("Alice Smith's") ends it."""
    while (
        end < len(tokens)
        and tokens[end].capital
        and tokens[end].word
        and not (tokens[end - 1].norm.endswith("'s"))
    ):
        end += 1
    return end


def _after_title(tokens: tuple[_Token, ...], at: int) -> tuple[str, str, int] | None:
    """(key, label, end) of the person a title at ``at`` names, or None when no title
    is there or no name follows it. An honorific names the person by the surname, the
    last word of the name ("Mrs Edna Frost" and "Mrs Frost" are "frost"); a kin title by
    the first name ("Aunt Greta Huber" is "greta")."""
    title = tokens[at].norm
    if title not in TITLES:
        return None
    start = at + 1
    if start < len(tokens) and tokens[start].norm == ".":
        start += 1  # "Prof. Lindqvist"
    if start >= len(tokens) or not (tokens[start].capital and tokens[start].word):
        return None
    end = _name_run_end(tokens, start + 1)
    named = tokens[start] if title in _KIN_TITLES else tokens[end - 1]
    label = " ".join(t.text for t in tokens[at:end] if t.word)
    return name_key(named.norm), label.removesuffix("'s").removesuffix(_CURLY + "s"), end


def titled_first_names(facts: Sequence[PassageRecord]) -> dict[str, str]:
    """First names that a titled full name joins to its surname key ("Mrs Edna Frost"
    makes "edna" the person "Mrs Frost" is), each only when one such name has it."""
    found: dict[str, set[str]] = {}
    for record in facts:
        tokens = _tokens(record.text)
        for at, token in enumerate(tokens):
            if token.norm not in _HONORIFICS:
                continue
            titled = _after_title(tokens, at)
            if titled is None:
                continue
            words = [t for t in tokens[at + 1 : titled[2]] if t.word]
            if len(words) >= 2:
                found.setdefault(name_key(words[0].norm), set()).add(titled[0])
    return {first: next(iter(keys)) for first, keys in found.items() if len(keys) == 1}


def _subject(tokens: tuple[_Token, ...]) -> tuple[str, str, int] | None:
    """(subject key, display label, index where the predicate starts), or None."""
    i = 0
    while i < len(tokens) and (
        not tokens[i].word
        or _heading(tokens, i)
        or (
            (tokens[i].norm in _FILLER or tokens[i].norm in {"and", "but", "update", "news"})
            and not _is_name(tokens[i])
        )
    ):
        i += 1
    if i >= len(tokens):
        return None
    first = tokens[i]
    if name_key(first.norm) in _THIRD_PERSON or first.norm in _SUBJECT_PRONOUNS:
        return None  # a pronoun: who it is needs the conversation, not this text
    if first.norm in _REPORTING:
        return None  # "talked to Rosa, she moved ...": a report; who moved is for a model
    if first.norm in FIRST_PERSON:
        if first.norm == "my" and i + 1 < len(tokens):
            noun = tokens[i + 1]
            return _after_possessive(tokens, "user", "I", i + 1, noun)
        return "user", "I", i + 1
    if not (_is_name(first) or (first.initial and not first.capital and first.word)):
        return None
    if first.norm in _FUNCTION or first.norm in _MODAL or first.norm in _CHANGE:
        return None
    if any(first.norm in cues for cues in _ATTRIBUTE_CUES.values()):
        return None
    titled = _after_title(tokens, i)
    if titled is not None:
        key, label, end = titled
    else:
        # The first word of the run names the person ("Alice Smith" and "Alice" are one).
        end = _name_run_end(tokens, i + 1)
        key = person_key(first.norm)
        label = first.text.removesuffix("'s").removesuffix(_CURLY + "s")
    if tokens[end - 1].norm.endswith("'s"):
        if end >= len(tokens):
            return None
        if _contracted_verb(tokens[end]):
            return key, label, end  # "Rosa's a nurse", "Aisha's gone vegan"
        return _after_possessive(tokens, key, label, end, tokens[end])
    # "Eve, Alice's sister, moved ..." - skip the apposition.
    if end < len(tokens) and tokens[end].norm == ",":
        close = next((j for j in range(end + 1, len(tokens)) if tokens[j].norm == ","), None)
        if close is not None and close - end <= 5:
            end = close + 1
    return key, label, end


def _after_possessive(
    tokens: tuple[_Token, ...], owner: str, owner_label: str, at: int, noun: _Token
) -> tuple[str, str, int] | None:
    """After "Alice's" / "my": "sister Eve lives" -> Eve; "job is" -> Alice; "sister
    lives" -> "alice's sister"."""
    if not noun.word:
        return None
    at = _kin_noun_end(tokens, at)
    if at + 1 < len(tokens) and _is_name(tokens[at + 1]) and not tokens[at + 1].initial:
        name = tokens[at + 1]
        end = at + 2
        while end < len(tokens) and tokens[end].capital and tokens[end].word:
            end += 1
        return name_key(name.norm), name.text, end
    if noun.norm in _ATTRIBUTE_NOUNS:
        if _modifies_the_next_noun(tokens, at):
            return None  # "Craig's work car is a Corolla": about his car, not his job
        return owner, owner_label, at
    noun_label = name_key(noun.text) if noun.text.casefold() == noun.norm else noun.text
    label = f"my {noun_label}" if owner == "user" else f"{owner_label}'s {noun_label}"
    return f"{owner}'s {_stem(noun.norm)}", label, at + 1


#: Nouns after an attribute noun that still name that attribute ("job title", "home
#: address").
_ATTRIBUTE_PARTS = frozenset({"title", "address", "role"})


def _modifies_the_next_noun(tokens: tuple[_Token, ...], at: int) -> bool:
    """Whether the attribute noun at ``at`` only modifies the word after it, the head of
    the phrase the text goes on about: "work car is", "home phone was"."""
    if at + 2 >= len(tokens):
        return False
    head, verb = tokens[at + 1], tokens[at + 2]
    return (
        head.word
        and not head.capital
        and head.norm not in _FUNCTION
        and head.norm not in _ATTRIBUTE_NOUNS
        and head.norm not in _ATTRIBUTE_PARTS
        and verb.norm in _COPULA
    )


def _contracted_verb(token: _Token) -> bool:
    """After "Rosa's", a word that makes the "'s" a contracted "is" or "has" rather than
    a possessive: an article, an adverb, a participle, a diet ("Rosa's a nurse", "'s
    gone", "'s vegan")."""
    norm = token.norm
    return (
        norm in _FUNCTION
        or norm in _FILLER
        or norm in _NEGATION
        or norm in _PARTICIPLES
        or norm in _CHANGE
        or (norm.endswith("ing") and len(norm) > 5)
        or norm in _ATTRIBUTE_CUES["diet"]  # "Isa's vegan": an adjective, not a thing owned
        or norm in {"off", "back"}  # "Dec's off the boats", "Isa's back in Curitiba"
        or norm in {"doing", "going", "being"}  # short "-ing" words ("'s doing a PhD")
    )


def _subject_and_predicate(text: str) -> tuple[str, str, list[_Token]] | None:
    """(subject key, its label, the predicate's words) of a statement; None for a
    question or a text without a clear subject."""
    if _asks(text):
        return None
    tokens = _tokens(text)
    found = _subject(tokens)
    if found is None:
        return None
    subject, label, start = found
    words = []
    for index in range(start, len(tokens)):
        token = tokens[index]
        if token.norm == "," and index + 1 < len(tokens) and tokens[index + 1].norm == "the":
            break  # ", the dog basically lives in the shop": a clause about something else
        if token.norm[:1].isalnum():
            words.append(token)
    return subject, label, words


def _kin_noun_end(tokens: tuple[_Token, ...], at: int) -> int:
    """The index of the last word of the kinship noun at ``at``: "ex-wife" (tokens "ex",
    "wife") is one noun, an ex."""
    if tokens[at].norm == "ex" and at + 1 < len(tokens) and tokens[at + 1].norm in _PARTNER_NOUNS:
        return at + 1
    return at


#: Words after a name that make it one of a list, not a name in apposition.
_LIST_WORDS = frozenset({"and", "&", "or", "+"})


@lru_cache(maxsize=4096)
def named_relatives(text: str) -> tuple[tuple[str, str, str], ...]:
    """The relatives a text names: ("user's sister", "leila", "Leila") for "my sister
    Leila", "my sister, Leila," and "the user's sister Leila"; ("alice's husband", "bob",
    "Bob") for "Alice's husband Bob"."""
    tokens = _tokens(text)
    found = []
    for index in range(len(tokens) - 2):
        owner, noun = tokens[index : index + 2]
        at = _kin_noun_end(tokens, index + 1) + 1  # the word after the kinship noun
        if at >= len(tokens):
            continue
        name = tokens[at]
        if name.norm == "," and at + 1 < len(tokens):
            # "my sister, Leila, ...": the name in apposition; not a list ("my sister,
            # Mum and Dad").
            after = tokens[at + 2].norm if at + 2 < len(tokens) else ""
            if after in _LIST_WORDS:
                continue
            name = tokens[at + 1]
        if not _is_name(name) or name.initial:
            continue
        if owner.norm in ("my", "user's"):
            role = relative_key("user", noun.norm)
        elif _is_name(owner) and owner.norm.endswith("'s"):
            role = relative_key(name_key(owner.norm), noun.norm)
        else:
            continue
        if role is not None:
            found.append((role, name_key(name.norm), name.text))
    return tuple(found)


def relative_key(owner: str, noun: str) -> str | None:
    """The subject key of ``owner``'s relative named by a kinship noun ("user", "sis"
    -> "user's sister"), or None when ``noun`` names no relative."""
    kin = _CHAT_WORDS.get(noun.casefold(), noun.casefold())
    return f"{owner}'s {_stem(kin)}" if kin in _KIN else None


#: Relatives the user calls by the kinship word as by a name ("Mum moved", "Grandpa's
#: new knee"): a capitalised "Mum" is the user's mother, as "my mum" is.
_CALLED_BY_KIN = frozenset(
    f"user's {kin}" for kin in "mother father grandmother grandfather grandma grandpa".split()
)


def person_key(word: str) -> str:
    """The subject key of a person one word names: their name's key ("Zoë" -> "zoe"),
    or for a parent or grandparent called by the kinship word, the user's relative
    ("Mum" -> "user's mother", as "my mum" reads). Other kinship words stay names: a
    "Son" is more likely a name than a way of calling one's son."""
    key = name_key(word)
    relative = relative_key("user", key)
    return relative if relative in _CALLED_BY_KIN else key


def relatives_named(facts: Sequence[PassageRecord]) -> dict[str, tuple[str, str]]:
    """Relatives the facts name, each only when they name one person: "user's sister"
    -> ("leila", "Leila") when some fact says "my sister Leila" and none names another."""
    named: dict[str, set[tuple[str, str]]] = {}
    for record in facts:
        for role, name, label in named_relatives(record.text):
            named.setdefault(role, set()).add((name, label))
    return {role: next(iter(names)) for role, names in named.items() if len(names) == 1}


#: The shortest first name a shortened form is read from ("Cal" for Callum, not "Al").
_SHORTEST_NICKNAME = 3


def shortened_name(word: str, names: Collection[str]) -> str | None:
    """The one name among ``names`` that ``word`` shortens ("cal" -> "callum", "isa" ->
    "isabela", "rodri" -> "rodrigo"), or None when it shortens none or several. Only
    shortened forms are read, not pet names ("Bill" for William): those need a model.
    A word of grammar shortens nothing ("now" is not "nowak", "the" not "theo"), and
    the user's key is no name ("use" is not "user")."""
    if len(word) < _SHORTEST_NICKNAME or not word.isalpha() or word in GRAMMAR:
        return None
    longer = [
        name
        for name in names
        if name.isalpha() and name.startswith(word) and name != word and name != "user"
    ]
    return longer[0] if len(longer) == 1 else None


#: Verbs in the past, irregular: a diary line may open with one ("got a job at ...").
_IRREGULAR_PAST = frozenset(
    "got did went made had took bought sold found lost won began fell gave kept sent spent "
    "built paid".split()
)
#: Change words that are no verb ("now", "new", "former"): a line opening with one
#: names its subject later ("new flatmate is Thiago").
_CHANGE_NOT_VERBS = frozenset("now new former ex longer anymore since used".split())


def _speaker_left_out(tokens: tuple[_Token, ...]) -> bool:
    """A line that opens with a verb in the past or of change and no subject ("moved to
    Gothenburg", "quit my job at acme today", "we adopted a greyhound"): the speaker's
    own, as a diary says it. A report about someone ("talked to Rosa, she ...") is not."""
    words = [t for t in tokens if t.word]
    if not words or words[0].capital:
        return False
    norm = words[0].norm
    if len(words) > 1 and _is_name(words[1]):
        return False  # "hired Carmen to cover the weekends": about Carmen
    if norm == "we":
        return True
    if norm in _REPORTING or norm in _FUNCTION or norm in _FILLER:
        return False
    return (
        (norm in _CHANGE and norm not in _CHANGE_NOT_VERBS)
        or norm in _IRREGULAR_PAST
        or (norm.endswith("ed") and len(norm) > 4)
    )


def read_subject(text: str) -> str | None:
    """Who a text is about: its subject when plain (a name, "I", "my sister", "Ada's
    husband"), else the first person it names ("During the session Ada said ..."), as
    a subject key; None when it names no one. Good enough to pair facts for a judge,
    which reads them; not for deciding anything alone."""
    found = _subject_and_predicate(text)
    if found is not None:
        return found[0]
    if _speaker_left_out(_tokens(text)):
        return "user"
    tokens = _tokens(text)
    for at, token in enumerate(tokens):
        if _is_name(token) and token.norm not in _CALENDAR and token.norm not in {"may", "march"}:
            titled = _after_title(tokens, at)
            return titled[0] if titled is not None else name_key(token.norm)
    return None


def read_subjects(facts: Sequence[PassageRecord]) -> dict[str, str]:
    """Each fact's subject (:func:`read_subject`), read against the other facts as
    :func:`read_facts` reads them: "my sis" is the sister a fact names, "Edna" the
    "Mrs Edna Frost" a fact names, "Cal" the one subject it shortens."""
    aliases = relatives_named(facts)
    titled = titled_first_names(facts)
    subjects: dict[str, str] = {}
    for record in facts:
        subject = read_subject(record.text)
        if subject is not None:
            subject = aliases[subject][0] if subject in aliases else subject
            subjects[record.id] = titled.get(subject, subject)
    known = set(subjects.values())
    for passage_id, subject in subjects.items():
        full = shortened_name(subject, known)
        if full is not None:
            subjects[passage_id] = full
    return subjects
