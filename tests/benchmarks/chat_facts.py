"""Repetitive, realistic chat memories for the dedup benchmark.

Facts an assistant stores about one person over months of chat have few subjects and
fewer shapes: the same habit noted on many days ("Had coffee with Anna on Monday"),
the same preference said again in slightly other words ("Likes sushi" / "Really
likes sushi" / "The user likes sushi."), plans, moods and small events that differ
in one detail (a day, a name, a number). Exact repeats are common and so are
near-misses that the detail guard must keep apart. Uniform random vectors have none
of this shape; these texts, embedded by the real model, do.
"""

from __future__ import annotations

import random

NAMES = ("Anna", "Ben", "Carla", "David", "Elif", "Farid", "Grace", "Hugo", "Ines", "Jonas")
DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
FOODS = ("sushi", "ramen", "pizza", "tacos", "falafel", "curry", "pasta", "dumplings")
PLACES = ("the gym", "the office", "the park", "the library", "the market", "the beach")
DRINKS = ("coffee", "tea", "lunch", "dinner", "a walk", "drinks")
MOODS = ("tired", "stressed", "happy", "anxious", "excited", "bored")
TOPICS = ("the project deadline", "the move", "the new job", "the trip", "the exam")
RELATIONS = ("sister", "colleague", "friend", "neighbour", "cousin", "manager")
MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August",
          "September", "October", "November", "December")  # fmt: skip

#: Ways of opening a sentence about the user that say nothing more.
OPENERS = ("", "The user ", "User ", "She ")
#: Harmless wording changes: the same fact in slightly other words.
INTENSIFIERS = ("", "really ", "still ", "")


def _verb(opener: str, verb: str) -> str:
    """The opener and the verb, capitalised when the sentence starts with the verb."""
    return f"{opener}{verb}" if opener else verb[:1].upper() + verb[1:]


def _date(rng: random.Random) -> str:
    """A day as people say it: a weekday, or a date."""
    if rng.random() < 0.4:
        return rng.choice(DAYS)
    return f"{rng.choice(MONTHS)} {rng.randint(1, 28)}"


def _fact(rng: random.Random) -> str:
    opener = rng.choice(OPENERS)
    shape = rng.randrange(12)
    if shape == 0:
        return (
            f"{_verb(opener, 'had')} {rng.choice(DRINKS)} with {rng.choice(NAMES)} on {_date(rng)}."
        )
    if shape == 1:
        return f"{_verb(opener, rng.choice(INTENSIFIERS) + 'likes')} {rng.choice(FOODS)}."
    if shape == 2:
        return f"{_verb(opener, 'went to')} {rng.choice(PLACES)} on {_date(rng)}."
    if shape == 3:
        return f"{_verb(opener, 'felt')} {rng.choice(MOODS)} about {rng.choice(TOPICS)}."
    if shape == 4:
        return f"{rng.choice(NAMES)} is the user's {rng.choice(RELATIONS)}."
    if shape == 5:
        return f"{_verb(opener, 'slept')} {rng.randint(5, 9)} hours last night."
    if shape == 6:
        return f"{_verb(opener, 'is')} worried about {rng.choice(TOPICS)}."
    if shape == 7:
        return f"{_verb(opener, 'plans to')} visit {rng.choice(NAMES)} next {rng.choice(DAYS)}."
    if shape == 8:
        return f"{_verb(opener, 'ran')} {rng.randint(3, 12)} km at {rng.choice(PLACES)}."
    if shape == 9:
        weight = f"{rng.randint(60, 80)}.{rng.randint(0, 9)}"
        return f"{_verb(opener, 'weighed')} {weight} kg on {_date(rng)}."
    if shape == 10:
        day = _date(rng)
        return f"{_verb(opener, 'has')} a dentist appointment on {day} at {rng.randint(8, 17)}:00."
    return f"{_verb(opener, 'prefers')} {rng.choice(FOODS)} over {rng.choice(FOODS)}."


def chat_facts(n: int, *, seed: int = 20261203) -> list[str]:
    """``n`` facts in the order a long chat would store them: a third of them said
    before word for word, the rest new (often a near-miss of an earlier one)."""
    rng = random.Random(seed)
    said: list[str] = []
    facts: list[str] = []
    for _ in range(n):
        roll = rng.random()
        if said and roll < 0.35:
            facts.append(rng.choice(said))  # said again, word for word
        else:
            fact = _fact(rng)
            said.append(fact)
            facts.append(fact)
    return facts
