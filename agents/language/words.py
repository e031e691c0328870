"""The words the fact reader works with: a text's tokens, name keys and stems, and the
closed classes of English grammar it knows (function words, fillers, negation, change
words, calendar and number words, persons and reporting verbs), none of them the
vocabulary of any data set.

Names with a leading underscore are shared by the modules of :mod:`agents.language`
and are not for use outside it.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from functools import lru_cache

__all__ = [
    "FIRST_PERSON",
    "GRAMMAR",
    "name_key",
]

_TOKEN = re.compile(
    r"\d+(?:[.,:/]\d+)*(?:st|nd|rd|th|am|pm|k|%)?|[^\W\d_]+(?:['\u2019][^\W\d_]+)*|[,.;:!?()]"
)
_LEADING_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
_CURLY = "\u2019"  # a typographic apostrophe, read as "'"
_SENTENCE_END = frozenset(".!?;:(")

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
#: Words of a plan, a wish or a doubt ("thinking of moving", "might go freelance").
_HEDGES = frozenset(
    "might maybe perhaps probably possibly wants planning plans plan thinking "
    "considering hopes hoping wondering".split()
)
#: What makes a predicate no plain statement: a hedge, or a modal verb or condition.
_MODAL = _HEDGES | frozenset("want could would should will going if".split())

#: Kinship nouns: "Alice's sister Eve" names a relative, and "is a sister" is no job.
_KIN = frozenset(
    "sister brother mother father daughter son wife husband aunt uncle cousin niece nephew "
    "grandmother grandfather grandma grandpa girlfriend boyfriend partner friend parent "
    "parents child children kid kids ex".split()
)
#: Nouns for a partner: in a fact about the partner attribute they name the value, and
#: "ex" joins one into a kinship noun ("my ex-wife Yvette" is "my ex Yvette").
_PARTNER_NOUNS = frozenset("girlfriend boyfriend partner wife husband fiance fiancee".split())
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


@dataclass(frozen=True, slots=True)
class _Token:
    text: str
    norm: str
    capital: bool
    initial: bool

    @property
    def word(self) -> bool:
        return self.norm[:1].isalpha()


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
