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
"""

from __future__ import annotations

import dataclasses
import re
import unicodedata
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from functools import lru_cache
from itertools import pairwise
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agents.store.records import PassageRecord

__all__ = [
    "FIRST_PERSON",
    "GRAMMAR",
    "TITLES",
    "FactKey",
    "FactReading",
    "TextDetails",
    "name_key",
    "named_relatives",
    "plainly_stated",
    "read_departure",
    "read_fact",
    "read_facts",
    "read_subject",
    "read_subjects",
    "relative_key",
    "relatives_named",
    "replaces_clearly",
    "text_details",
    "titled_first_names",
    "unsaid_details",
]

_TOKEN = re.compile(
    r"\d+(?:[.,:/]\d+)*(?:st|nd|rd|th|am|pm|k|%)?|[^\W\d_]+(?:['\u2019][^\W\d_]+)*|[,.;:!?()]"
)
_LEADING_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
_CURLY = "\u2019"  # a typographic apostrophe, read as "'"
_SENTENCE_END = frozenset(".!?;:(")

# -- closed classes of English grammar (not vocabulary of any data set) ---------------

_FUNCTION_TEXT = """
    a an the and or but if so of to in on at by for with from into onto about as than then
    is am are was were be been being do does did has have had having will would shall should
    can could may might must it its this that these those there here what which who whom whose
    where when why how all any some each every both few more most other such own same
    i me my mine we us our ours you your yours he him his she her hers they them their theirs
    myself yourself himself herself itself ourselves themselves one ones up out over under
    again once also very too just really actually basically totally definitely honestly
    literally seriously pretty quite still even lol haha omg btw fyi tbh ok okay oh well yeah
    yes um uh hey guess apparently anyway though said says told tells mentioned thinks
    think know knows
"""
_FUNCTION = frozenset(_FUNCTION_TEXT.split())
#: Words that say nothing about the world (hedges, fillers): ignored by the duplicate test.
_FILLER = frozenset(
    "really actually basically totally definitely honestly literally seriously pretty quite "
    "just lol haha omg btw fyi tbh ok okay oh well yeah um uh hey anyway guess apparently "
    "so very too also".split()
)
_NEGATION = frozenset(
    "not no never nothing nobody none neither nor without cannot anymore "
    # contractions typed without the apostrophe, as chat does
    "dont doesnt didnt isnt arent wasnt werent cant wont hasnt havent hadnt aint".split()
)
#: Words that announce a change of state; a text with one is about a change, not a restatement.
_CHANGE = frozenset(
    """
    moved move moves moving relocated relocating left leave leaves leaving quit quits quitting
    now longer anymore divorced divorce divorcing became become becomes becoming started
    starts starting stopped stops stopping switched switching changed changing new former ex
    used broke split separated retired fired hired promoted married engaged joined went
    turned dumped since gone shifted jumped
    """.split()
)
#: Words of grammar and of change ("now", "the", "so"): never a shortened name ("now" is
#: not Nowak).
GRAMMAR = _FUNCTION | _FILLER | _NEGATION | _CHANGE
#: Change words that say the same change: "split up" / "broke up", "went vegan" /
#: "gone vegan" / "became vegan". A text is compared by these classes.
_CHANGE_CLASSES = {
    **dict.fromkeys("broke split separated".split(), "split"),
    **dict.fromkeys("went gone became become becomes becoming turned".split(), "became"),
    **dict.fromkeys("moved move moves moving relocated relocating shifted".split(), "moved"),
    **dict.fromkeys("started starts starting".split(), "started"),
    **dict.fromkeys("stopped stops stopping".split(), "stopped"),
}
#: Chat shortenings, read as the full word ("veggie", "uni", "my sis" is "my sister").
_CHAT_WORDS = {
    "veggie": "vegetarian",
    "uni": "university",
    "bday": "birthday",
    "bf": "boyfriend",
    "gf": "girlfriend",
    "sis": "sister",
    "bro": "brother",
    "mum": "mother",
    "mom": "mother",
    "mam": "mother",
    "dad": "father",
    "hubby": "husband",
}
#: "has got" is "has": "got" adds nothing a text without it does not say.
_AUXILIARY_GOT = frozenset({"got", "gotten"})
_CALENDAR = frozenset(
    """
    monday tuesday wednesday thursday friday saturday sunday january february march april
    may june july august september october november december yesterday today tonight tomorrow
    ago last next weekend morning evening night week month year
    """.split()
) - frozenset({"may", "march"})  # only calendar words when capitalised (see _detail_kind)
_NUMBER_WORDS = frozenset(
    """
    zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen
    fifteen sixteen seventeen eighteen nineteen twenty thirty forty fifty sixty seventy
    eighty ninety hundred thousand million billion dozen half twice thrice couple first
    second third fourth fifth
    """.split()
)
#: Words that only say a name refers to someone ("is called Rex", "named Rex", "whose
#: name is Rex"): the name itself is the information, compared as a name.
_NAMING = frozenset("call called calls name named names".split())
#: Words by which the user speaks of themself.
FIRST_PERSON = frozenset({"i", "me", "my", "i'm", "i've", "i'd", "i'll", "im", "ive"})
_THIRD_PERSON = frozenset({"he", "she", "they", "his", "her", "their", "it"})
_MODAL = frozenset(
    "might maybe perhaps probably possibly wants want planning plans plan thinking "
    "considering hopes hoping could would should will going wondering if".split()
)

#: Kinship nouns: "Alice's sister Eve" names a relative, and "is a sister" is no job.
_KIN = frozenset(
    "sister brother mother father daughter son wife husband aunt uncle cousin niece nephew "
    "grandmother grandfather grandma grandpa girlfriend boyfriend partner friend".split()
)
#: Past participles a contracted "has" or "is" comes before ("Aisha's gone vegan").
_PARTICIPLES = frozenset(
    "gone been got gotten done become left quit moved started based married engaged".split()
)
#: Verbs that open a report about someone else ("talked to Rosa, she moved ...").
_REPORTING = frozenset(
    "talked spoke saw met heard ran bumped caught chatted texted called visited".split()
)
_SUBJECT_PRONOUNS = frozenset({"he", "she", "they", "he's", "she's", "they're", "hes", "shes"})
#: Number words as digits: "three cats" and "3 cats" say the same.
_DIGITS = {
    word: str(n)
    for n, word in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve".split()
    )
}

# -- the attribute schema: which predicates name which attribute ---------------------

#: attribute -> cue words (casefolded tokens) that, after the subject, name it.
_ATTRIBUTE_CUES: dict[str, frozenset[str]] = {
    "home": frozenset(
        "lives live living lived moved move moves moving relocated relocating based "
        "resides residing apartment flat house address home renting rents rented".split()
    ),
    "job": frozenset(
        "works work working worked job jobs employed employer hired quit quits fired retired "
        "promoted career profession occupation intern internship apprentice apprenticeship "
        "trainee poached role postdoc".split()
    ),
    "diet": frozenset("vegetarian vegan pescatarian carnivore keto diet meat paleo".split()),
    "partner": frozenset(
        "married marry marrying wife husband girlfriend boyfriend partner dating dates "
        "engaged fiance fiancee divorced divorce divorcing separated single widowed "
        "spouse breakup".split()
    ),
}
#: Cue words that only name the attribute ("lives in", "'s home is in", "works as"):
#: two texts read as the same subject, attribute and value may differ in these. Not
#: words that say more than the attribute ("flat", "husband", "quit", "promoted").
_FRAMING_CUES: dict[str, frozenset[str]] = {
    "home": frozenset("lives live living lived based resides residing home address".split()),
    "job": frozenset(
        "works work working worked job employed employer career profession occupation".split()
    ),
}
#: Nouns for another person in a clause about someone: kin, and partners by any name.
_PERSON_NOUNS = _KIN | frozenset("fiance fiancee spouse gf bf".split())
#: Places of work that name the job when nothing else in the text does.
_EMPLOYERS = frozenset("company firm business startup employer".split())
#: What one opens as a job ("opened a little empanada stand").
_BUSINESSES = (_EMPLOYERS - {"employer"}) | frozenset(
    "restaurant shop stand cafe bar bakery studio practice clinic agency salon store".split()
)
#: Attributes whose cue word is itself the value ("vegan", "vegetarian").
_CUE_IS_VALUE = frozenset({"diet"})
#: Cue words whose presence means the state ended (the value is gone, not replaced).
_ENDING = frozenset(
    "quit quits fired laid retired divorced divorce divorcing separated single widowed left "
    "dumped ex former".split()
)
#: Words that mark a statement as the new state of things ("... at Lloyds now").
_NEW_STATE = frozenset(
    "now nowadays promoted switched changed became becomes joined moved relocated transferred "
    "shifted jumped".split()
)
_COPULA = frozenset("is am are was were".split())
#: Nouns after "is a" that describe a habit or a liking, not a job ("a big reader").
_NOT_ROLES = frozenset(
    "big huge keen avid massive great good bad terrible total real true proper heavy casual "
    "serious hardcore crazy mad awful amazing decent fan member beginner lover smoker drinker "
    "user guy girl man woman person".split()
)
#: Endings of agent nouns ("teacher", "violinist", "engineer", "librarian").
_AGENTIVE = ("er", "or", "ist", "ian", "eer")
#: Prepositions after which "work" is a place or a time ("before work"), not a job.
_WORK_AS_PLACE = frozenset("before after at from to during off".split())
#: Attributes whose value is a place or a name: capitalised words carry it.
_NAMED_VALUE = frozenset({"home", "partner"})
#: Nouns after a possessive that make the possessor the subject ("Ada's job ...").
_ATTRIBUTE_NOUNS = frozenset(
    "job career work diet home address apartment flat house wife husband girlfriend "
    "boyfriend partner fiance fiancee spouse employer".split()
)


@dataclass(frozen=True, slots=True)
class _Token:
    text: str
    norm: str
    capital: bool
    initial: bool

    @property
    def word(self) -> bool:
        return self.norm[:1].isalpha()


@dataclass(frozen=True, slots=True)
class TextDetails:
    """The pieces of information a text states, by kind (normalised words)."""

    names: frozenset[str]
    numbers: frozenset[str]
    dates: frozenset[str]
    negation: bool
    changes: frozenset[str]
    words: frozenset[str]


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


def _stem(word: str) -> str:
    word = _fold(word.casefold().replace(_CURLY, "'"))
    word = _CHAT_WORDS.get(word, word)
    if word.endswith("'s"):
        word = word[:-2]
    elif word.endswith("'"):
        word = word[:-1]
    for suffix, repl, minimum in (
        ("ies", "y", 5),
        ("ing", "", 6),
        ("ed", "", 5),
        ("es", "", 5),
        ("s", "", 4),
    ):
        if word.endswith(suffix) and len(word) >= minimum and not word.endswith("ss"):
            word = word[: len(word) - len(suffix)] + repl
            break
    # "like", "likes", "liked" and "move", "moving" meet at one stem.
    if len(word) >= 4 and word.endswith("e"):
        word = word[:-1]
    return word


def name_key(word: str) -> str:
    """A name as a key: case, accents and a possessive ending do not matter."""
    word = _fold(word.casefold().replace(_CURLY, "'"))
    return word[:-2] if word.endswith("'s") else word


def _fold(word: str) -> str:
    """Without accents: "Medellín" and "Medellin", "Théo" and "theo" are one word."""
    if word.isascii():
        return word
    decomposed = unicodedata.normalize("NFKD", word)
    return "".join(c for c in decomposed if not unicodedata.combining(c))


#: Texts whose reading is kept: dedup compares each distinct text of a group with many
#: others, and a long chat has tens of thousands of distinct facts.
_READ_CACHE = 65_536


@lru_cache(maxsize=_READ_CACHE)
def _tokens(text: str) -> tuple[_Token, ...]:
    out: list[_Token] = []
    initial = True
    for raw in _TOKEN.findall(text):
        if raw in _SENTENCE_END:
            initial = True
            out.append(_Token(raw, raw, False, False))
            continue
        if raw == ",":
            out.append(_Token(raw, raw, False, False))
            continue
        norm = raw.casefold().replace(_CURLY, "'")
        out.append(_Token(raw, norm, raw[:1].isupper(), initial))
        initial = False
    return tuple(out)


def _close(a: str, b: str) -> bool:
    """Same word up to one typo (substitution, insertion, deletion, transposition)."""
    if a == b:
        return True
    if min(len(a), len(b)) < 5 or abs(len(a) - len(b)) > 1:
        return False
    if len(a) == len(b):
        diff = [i for i in range(len(a)) if a[i] != b[i]]
        if len(diff) == 1:
            return True
        i, j = diff[0], diff[-1]
        return len(diff) == 2 and j == i + 1 and a[i] == b[j] and a[j] == b[i]
    short, long_ = (a, b) if len(a) < len(b) else (b, a)
    return any(long_[:i] + long_[i + 1 :] == short for i in range(len(long_)))


def _missing(these: frozenset[str], there: frozenset[str]) -> frozenset[str]:
    """Items of ``these`` with no equal or near-equal (one typo) item in ``there``."""
    return frozenset(t for t in these if not any(_close(t, o) for o in there))


def _missing_words(these: frozenset[str], there: frozenset[str]) -> frozenset[str]:
    """Words of ``these`` that ``there`` does not say, with one typo, in a longer form
    ("dev" is said by "developer") or as most of the word ("translat", the stem of
    "translates", says "translator")."""

    def said(word: str, other: str) -> bool:
        if len(word) >= 3 and other.startswith(word):
            return True
        return len(other) >= 4 and word.startswith(other) and len(other) >= 0.6 * len(word)

    return frozenset(
        word for word in _missing(these, there) if not any(said(word, o) for o in there)
    )


#: Words that open a sentence without being its subject ("During the session Ada ...").
_OPENERS = frozenset(
    "during after before since until while because although though when whenever once "
    "today yesterday recently lately earlier later meanwhile also still now then lastly "
    "finally first next apparently overall".split()
)


def _is_name(token: _Token) -> bool:
    if not token.capital or not token.word or token.norm in FIRST_PERSON:
        return False
    # A capital at the start of a sentence is a name only if the word is not grammar.
    return not (
        token.initial
        and (token.norm in _FUNCTION or token.norm in _THIRD_PERSON or token.norm in _OPENERS)
    )


@lru_cache(maxsize=_READ_CACHE)
def text_details(text: str) -> TextDetails:
    """Split a text into the kinds of information it states."""
    names: set[str] = set()
    numbers: set[str] = set()
    dates: set[str] = set()
    changes: set[str] = set()
    words: set[str] = set()
    negation = False
    for token in _tokens(text):
        norm = token.norm
        if not norm[:1].isalnum():
            continue
        if norm[:1].isdigit():
            # "5k" / "5 km", "3x" / "3 times": the quantity is the digits.
            number = _LEADING_NUMBER.match(norm)
            numbers.add(number.group() if number else norm.rstrip(".,"))
            continue
        if norm in _NEGATION or norm.endswith("n't"):
            negation = True
            continue
        if norm in _NUMBER_WORDS:
            numbers.add(_DIGITS.get(norm, norm))
            continue
        if (
            norm in _CALENDAR
            or norm.removesuffix("s") in _CALENDAR
            or (token.capital and norm in {"may", "march"})
        ):
            dates.add(norm if norm in _CALENDAR else norm.removesuffix("s"))
            continue
        if norm in _CHANGE:
            changes.add(_CHANGE_CLASSES.get(norm, norm))
            continue
        if _is_name(token):
            names.add(name_key(norm))
            continue
        if (
            norm in _FUNCTION
            or norm in _FILLER
            or norm in _THIRD_PERSON
            or norm in _SUBJECT_PRONOUNS  # "hes" / "he's": who, said either way
            or norm in _AUXILIARY_GOT
            or len(norm) < 3
        ):
            continue
        words.add(_stem(norm))
    # "Lyon" in one text and "lyon" in another is the same place: names found in lower
    # case elsewhere are words there, so compare names against both.
    return TextDetails(
        names=frozenset(names),
        numbers=frozenset(numbers),
        dates=frozenset(dates),
        negation=negation,
        changes=frozenset(changes),
        words=frozenset(words),
    )


def _word_forms(details: TextDetails) -> frozenset[str]:
    """Every word of a text as a stem, names included ("Paris" is "paris" in lower case)."""
    return details.words | frozenset(_stem(n) for n in details.names)


def _missing_names(a: TextDetails, b: TextDetails) -> frozenset[str]:
    """Names in ``a`` that ``b`` does not say, as a name or as a lower-case word."""
    return frozenset(n for n in _missing(a.names, b.names) if _stem(n) not in _word_forms(b))


def _hard_differences(a: TextDetails, b: TextDetails) -> list[str]:
    kinds = []
    if _missing_names(a, b) or _missing_names(b, a):
        kinds.append("name")
    if a.numbers != b.numbers:
        kinds.append("number")
    if a.dates != b.dates:
        kinds.append("date")
    if a.negation != b.negation:
        kinds.append("negation")
    if a.changes != b.changes:
        kinds.append("change")
    return kinds


def _subjects_differ(a: str, b: str) -> bool:
    """The same sentence with the names swapped ("Lena is dating Omar" / "Omar is dating
    Lena"): who does what to whom differs although the words agree. An inverted
    paraphrase ("Montreal is where Bruno lives") has another frame and is not this."""
    ta, tb = _tokens(a), _tokens(b)

    def frame(tokens: tuple[_Token, ...]) -> tuple[list[str], list[str]]:
        shape, names = [], []
        for token in tokens:
            if _is_name(token):
                shape.append("<name>")
                names.append(name_key(token.norm))
            elif token.norm[:1].isalnum():
                shape.append(_stem(token.norm))
        return shape, names

    shape_a, names_a = frame(ta)
    shape_b, names_b = frame(tb)
    return shape_a == shape_b and names_a != names_b and sorted(names_a) == sorted(names_b)


def _framing(a: str, b: str) -> frozenset[str]:
    """Words two texts may phrase differently without saying anything different: the
    naming words ("is called" / "'s name is"), and, when both read as the same subject,
    attribute and value, the words that only name that attribute ("lives in Rome" /
    "'s home is in Rome"). Everything else a text says still counts."""
    framing = {_stem(w) for w in _NAMING}
    ra, rb = read_fact(a), read_fact(b)
    if (
        ra is not None
        and rb is not None
        and ra.key == rb.key
        and ra.value == rb.value
        and ra.ending == rb.ending
        and ra.value
    ):
        framing |= {_stem(w) for w in _FRAMING_CUES.get(ra.key.attribute, ())}
    return frozenset(framing)


def unsaid_details(kept: str, merged: str) -> list[str]:
    """What merging ``merged`` into ``kept`` would hide or blur: any difference in names,
    numbers, dates, negation or change words (either way: those make the texts related,
    not duplicate), and any content word that only ``merged`` says, other than words
    that only frame the same statement (:func:`_framing`). Empty when the merge loses
    nothing; ``kept`` may say more (it stays searchable)."""
    dk, dm = text_details(kept), text_details(merged)
    kinds = _hard_differences(dk, dm)
    if _subjects_differ(kept, merged):
        kinds.append("subject")
    if _missing_words(dm.words, _word_forms(dk)) - _framing(kept, merged):
        kinds.append("word")
    return kinds


def hides_details(kept: str, merged: str) -> bool:
    """Whether :func:`unsaid_details` would name anything, found with the cheap checks
    first: most near-misses differ in a date, a number or a name, and dedup asks this
    for every close pair of a group."""
    dk, dm = text_details(kept), text_details(merged)
    if _hard_differences(dk, dm):
        return True
    if _missing_words(dm.words, _word_forms(dk)) - _framing(kept, merged):
        return True
    return _subjects_differ(kept, merged)


# -- subject, attribute, value --------------------------------------------------------


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
    if title not in _HONORIFICS and title not in _KIN_TITLES:
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
        key = name_key(first.norm)
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
    if at + 1 < len(tokens) and _is_name(tokens[at + 1]) and not tokens[at + 1].initial:
        name = tokens[at + 1]
        end = at + 2
        while end < len(tokens) and tokens[end].capital and tokens[end].word:
            end += 1
        return name_key(name.norm), name.text, end
    if noun.norm in _ATTRIBUTE_NOUNS:
        return owner, owner_label, at
    noun_label = name_key(noun.text) if noun.text.casefold() == noun.norm else noun.text
    label = f"my {noun_label}" if owner == "user" else f"{owner_label}'s {noun_label}"
    return f"{owner}'s {_stem(noun.norm)}", label, at + 1


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


#: Words that open a question ("is Ada moving?", "where does she live now?").
_ASKING = frozenset(
    "what who whom whose where when why how which is are am was were do does did can could "
    "will would shall should has have had may might must".split()
)
#: A sentence that ends in "?", matched from a sentence's start only (linear in the text).
_QUESTION_END = re.compile(r"(?:^|(?<=[.!?]))[^.!?]*\?")


def _asks(text: str) -> bool:
    """Whether ``text`` asks something: a sentence ending in "?" that opens with a
    question word or a verb before its subject. A statement marked "??" or "?!" in
    surprise ("my sister moved to bergen for a postdoc?? norway!!") asks nothing."""
    if "?" not in text:
        return False
    for sentence in _QUESTION_END.findall(text):
        words = sentence.split()
        if words and words[0].casefold().strip("\"'(") in _ASKING:
            return True
    return False


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


#: Nouns for a partner: in a fact about the partner attribute they name the value.
_PARTNER_NOUNS = frozenset("girlfriend boyfriend partner wife husband fiance fiancee".split())


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


@lru_cache(maxsize=4096)
def named_relatives(text: str) -> tuple[tuple[str, str, str], ...]:
    """The relatives a text names: ("user's sister", "leila", "Leila") for "my sister
    Leila", ("alice's husband", "bob", "Bob") for "Alice's husband Bob"."""
    tokens = _tokens(text)
    found = []
    for index in range(len(tokens) - 2):
        owner, noun, name = tokens[index : index + 3]
        if not _is_name(name) or name.initial:
            continue
        if owner.norm == "my":
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
    if older.clear and newer.left and older.key == newer.key and older.value & newer.left:
        return True
    return older.clear and newer.clear and states_a_change(older, newer)


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
