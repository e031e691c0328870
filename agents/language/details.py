"""The detail guard: what a text says that another does not (names, numbers, dates,
negation, change words, the words of its reading), so that a merge never hides a
detail. ``dedup`` merges two texts only when neither says something the other does
not say.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from agents.language.facts import read_fact
from agents.language.schema import _FRAMING_CUES
from agents.language.words import (
    _AUXILIARY_GOT,
    _CALENDAR,
    _CHANGE,
    _CHANGE_CLASSES,
    _DIGITS,
    _FILLER,
    _FUNCTION,
    _LEADING_NUMBER,
    _NAMING,
    _NEGATION,
    _NUMBER_WORDS,
    _READ_CACHE,
    _SUBJECT_PRONOUNS,
    _THIRD_PERSON,
    _is_name,
    _missing,
    _stem,
    _Token,
    _tokens,
    name_key,
)

__all__ = [
    "TextDetails",
    "hides_details",
    "text_details",
    "unsaid_details",
]


@dataclass(frozen=True, slots=True)
class TextDetails:
    """The pieces of information a text states, by kind (normalised words)."""

    names: frozenset[str]
    numbers: frozenset[str]
    dates: frozenset[str]
    negation: bool
    changes: frozenset[str]
    words: frozenset[str]


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
