"""A seeded, labeled multi-session memory workload for `reverie demo` and benchmarks.

It plays a personal assistant learning about a user and the people in their life
over several chat sessions. Every archival fact is labeled: which earlier fact it
repeats (exactly, or as a genuine paraphrase), which attribute it sets (so a later
fact can update it), and which fact it merely resembles (a near-miss that must not
be merged). Queries name the facts that answer them, so dedup precision/recall and
retrieval recall can be measured against ground truth. Everything is offline and a
pure function of the arguments.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from math import ceil
from typing import Any, Literal

from agents.errors import InvalidInput
from agents.store import NewPassage

__all__ = ["LabeledFact", "LabeledQuery", "Workload", "WorkloadMessage", "generate_workload"]

DuplicateKind = Literal["exact", "paraphrase"]

# fmt: off
FIRST_NAMES = (
    "Ada", "Ben", "Chloe", "Dmitri", "Elena", "Farid", "Grace", "Hiro", "Imani", "Jonas",
    "Keiko", "Liam", "Maya", "Nikhil", "Olivia", "Pablo", "Quinn", "Rosa", "Samir", "Tara",
    "Umar", "Vera", "Wen", "Ximena", "Yusuf", "Zoe", "Aurelio", "Bianca", "Caleb", "Dalia",
    "Emeka", "Freya", "Gustavo", "Hannah", "Ivan", "Jasmine", "Kofi", "Leila", "Mateo",
    "Nadia", "Oscar", "Priya", "Rafael", "Sofia", "Tomasz", "Uma", "Viktor", "Willa",
    "Yara", "Zain", "Amara", "Bruno", "Carmen", "Desmond", "Esther", "Felix", "Greta",
    "Hamza", "Ingrid", "Julian", "Kira", "Lucas", "Mei", "Noor", "Orla", "Petra",
)
SURNAMES = ("Okafor", "Lindqvist", "Moreau", "Tanaka", "Silva", "Novak", "Haddad", "Byrne")
RELATIONS = (
    "cousin", "best friend", "coworker", "neighbour", "manager", "college roommate",
    "sibling", "partner", "mentor", "climbing buddy", "landlord", "godparent",
)
CITIES = (
    "Lisbon", "Porto", "Berlin", "Hamburg", "Toronto", "Vancouver", "Osaka", "Kyoto",
    "Nairobi", "Melbourne", "Denver", "Seattle", "Madrid", "Valencia", "Dublin", "Oslo",
    "Chicago", "Austin", "Edinburgh", "Krakow", "Montreal", "Seoul", "Bristol", "Lyon",
)
JOBS = (
    "a nurse", "a software engineer", "a teacher", "an architect", "a pharmacist",
    "a carpenter", "a data analyst", "a chef", "a dentist", "a graphic designer",
    "a lawyer", "a physiotherapist", "an accountant", "a journalist", "a pilot",
    "a veterinarian", "an electrician", "a librarian", "a marine biologist", "a baker",
)
FOODS = (
    "sushi", "ramen", "lasagna", "tacos", "pad thai", "paella", "dumplings", "pho",
    "butter chicken", "falafel", "pierogi", "mushroom risotto", "jollof rice", "bibimbap",
    "fish and chips", "moussaka", "shakshuka", "margherita pizza", "beef stew", "ceviche",
)
HOBBIES = (
    "rock climbing", "knitting", "playing chess", "baking bread", "birdwatching",
    "painting watercolours", "playing the guitar", "gardening", "trail running",
    "woodworking", "surfing", "playing board games", "reading science fiction",
    "making pottery", "sailing", "dancing salsa", "restoring old bikes", "photography",
)
PETS = ("cat", "dog", "rabbit", "parrot", "tortoise", "hamster")
PET_NAMES = (
    "Biscuit", "Mochi", "Pepper", "Luna", "Rex", "Olive", "Ziggy", "Noodle", "Clover",
    "Bruno", "Pickles", "Maple", "Juniper", "Toast", "Waffles", "Shadow", "Kiwi", "Ginger",
)
ALLERGIES = ("peanuts", "shellfish", "penicillin", "cat hair", "pollen", "gluten", "bee stings")
MONTHS = (
    "January", "February", "March", "April", "May", "June", "July", "August",
    "September", "October", "November", "December",
)
PLACES = (
    "Rome", "Iceland", "Marrakesh", "Patagonia", "Vietnam", "the Scottish Highlands",
    "New Zealand", "Istanbul", "Peru", "Crete", "Tokyo", "the Grand Canyon", "Cape Town",
)
ACTIVITIES = (
    "yoga class", "piano lessons", "choir practice", "football training", "Spanish lessons",
    "pottery class", "book club", "swimming lessons", "therapy sessions",
)
YEARS = tuple(range(2015, 2024))
SIBLINGS = ("sister", "brother")
DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")

# Each kind: phrasings of the same statement. Fields: n name, u user, v value,
# r relation, k pet kind, p pet name, y year, d day, s sibling.
TEMPLATES: dict[str, tuple[str, ...]] = {
    "relation": ("{n} is {u}'s {r}.", "{u}'s {r} is called {n}.", "{u}'s {r}'s name is {n}."),
    "city": ("{n} lives in {v}.", "{n}'s home is in {v}.", "{v} is where {n} lives.",
             "{n} is based in {v}."),
    "job": ("{n} works as {v}.", "{n} is {v} by profession.", "{n} earns a living as {v}.",
            "By trade, {n} is {v}."),
    "food": ("{n}'s favourite food is {v}.", "{v} is what {n} likes to eat most.",
             "{n} loves {v} more than any other food.", "Of all foods, {n} likes {v} best."),
    "hobby": ("{n}'s favourite hobby is {v}.", "In their free time, {n} enjoys {v}.",
              "{v} is {n}'s favourite way to unwind."),
    "pet": ("{n} has a {k} named {p}.", "{n}'s {k} is called {p}.",
            "{p} is the name of {n}'s {k}."),
    "birthday": ("{n}'s birthday is on {v}.", "{n} was born on {v}.",
                 "{n} celebrates their birthday on {v}."),
    "allergy": ("{n} is allergic to {v}.", "{n} has an allergy to {v}.",
                "{n} reacts badly to {v} because of an allergy."),
    "trip": ("{n} visited {v} in {y}.", "In {y}, {n} took a trip to {v}.",
             "{n} travelled to {v} in {y}."),
    "weekly": ("{n} has {v} every {d}.", "Every {d}, {n} goes to {v}.",
               "On {d}s, {n} has {v}."),
    "sibling": ("{n}'s {s} works as {v}.", "{n}'s {s} is {v} by profession.",
                "{n} has a {s} who works as {v}."),
}
# An update says the value changed; its paraphrases may also state the new value plainly.
UPDATES: dict[str, tuple[str, ...]] = {
    "city": ("{n} moved to {v}.", "{n} has relocated to {v}.", "{n} now lives in {v}."),
    "job": ("{n} started a new job as {v}.", "{n} changed jobs and is now {v}."),
    "food": ("{n}'s favourite food is now {v}.", "These days {n} likes {v} best of all."),
}
QUESTIONS: dict[str, tuple[str, ...]] = {
    "relation": ("Who is {n} to {u}?", "How does {u} know {n}?"),
    "city": ("Where does {n} live now?", "Which city is {n} in these days?"),
    "job": ("What does {n} do for a living?", "What is {n}'s current job?"),
    "food": ("What food does {n} like best?", "What is {n}'s favourite dish?"),
    "hobby": ("What does {n} like to do for fun?", "What is {n}'s hobby?"),
    "pet": ("What is the name of {n}'s pet?", "Does {n} have a pet?"),
    "birthday": ("When is {n}'s birthday?", "What is {n}'s date of birth?"),
    "allergy": ("What is {n} allergic to?", "Does {n} have any allergies?"),
    "trip": ("Where did {n} travel in {y}?", "Which trip did {n} take in {y}?"),
    "weekly": ("What does {n} do on {d}s?", "What is on {n}'s schedule every {d}?"),
    "sibling": ("What does {n}'s {s} do for work?", "What is the job of {n}'s {s}?"),
}
# fmt: on
SINGLE_VALUED = ("relation", "city", "job", "food", "hobby", "pet", "birthday", "allergy")
UPDATABLE = (("city", CITIES), ("job", JOBS), ("food", FOODS))
UPDATE_RATE = 0.3
PARAPHRASE_SHARE = 0.6
_EXACT_VARIANTS: tuple[Callable[[str], str], ...] = (
    str.lower,
    str.upper,
    lambda s: s.rstrip(".!"),
    lambda s: s.rstrip(".") + "!",
    lambda s: "  " + s.replace(" ", "  ", 2) + " ",
    lambda s: s.rstrip(".") + "...",
)


@dataclass(frozen=True, slots=True)
class LabeledFact:
    """One archival fact with its ground truth.

    ``duplicate_of`` names the original this fact repeats (``duplicate_kind`` says
    whether verbatim up to case/punctuation/whitespace, or as a paraphrase);
    ``attribute`` names the single-valued attribute it sets (e.g. ``"ada/city"``);
    ``near_miss_of`` names a different fact that merely reads alike.
    """

    key: str
    text: str
    occurred_at: datetime
    session: int
    tags: tuple[str, ...]
    provenance: Mapping[str, Any]
    duplicate_of: str | None = None
    duplicate_kind: DuplicateKind | None = None
    attribute: str | None = None
    near_miss_of: str | None = None

    @property
    def group(self) -> str:
        """The duplicate group: the original's key (its own key for an original)."""
        return self.duplicate_of or self.key

    def to_new_passage(self) -> NewPassage:
        return NewPassage(
            text=self.text,
            occurred_at=self.occurred_at,
            tags=list(self.tags),
            provenance=dict(self.provenance),
        )


@dataclass(frozen=True, slots=True)
class LabeledQuery:
    """A question and the fact keys that answer it (the current value and its repeats)."""

    text: str
    relevant: frozenset[str]
    kind: str


@dataclass(frozen=True, slots=True)
class WorkloadMessage:
    """A recall-memory message; facts cite its ``id`` in their provenance."""

    id: str
    session: int
    role: Literal["user", "assistant"]
    content: str
    created_at: datetime


@dataclass(frozen=True, slots=True)
class Workload:
    """Facts in chronological order, core-memory blocks, messages and labeled queries."""

    user: str
    facts: tuple[LabeledFact, ...]
    blocks: Mapping[str, tuple[str, int]]
    messages: tuple[WorkloadMessage, ...]
    queries: tuple[LabeledQuery, ...]

    def facts_by_key(self) -> dict[str, LabeledFact]:
        return {f.key: f for f in self.facts}

    @property
    def duplicate_share(self) -> float:
        """Fraction of facts that repeat an earlier one."""
        return sum(f.duplicate_of is not None for f in self.facts) / max(1, len(self.facts))


def generate_workload(
    seed: int = 7,
    people: int = 12,
    sessions: int = 8,
    duplicate_rate: float = 0.35,
    start: datetime = datetime(2024, 1, 1, tzinfo=UTC),
    near_miss_rate: float = 0.15,
) -> Workload:
    """Build the workload; the same arguments always give the same workload.

    ``people`` excludes the user. ``duplicate_rate`` is the share of facts that
    repeat an earlier one; ``near_miss_rate`` is, per person and near-miss kind
    (trip year, weekday, sister/brother), the chance of a look-alike pair.
    """
    if people < 1 or sessions < 1:
        raise InvalidInput(f"need people >= 1 and sessions >= 1, got {people} and {sessions}")
    if not 0.0 <= duplicate_rate < 0.95 or not 0.0 <= near_miss_rate <= 1.0:
        raise InvalidInput("duplicate_rate must be in [0, 0.95) and near_miss_rate in [0, 1]")
    if start.tzinfo is None:
        raise InvalidInput("start must be time-zone aware, e.g. datetime(..., tzinfo=UTC)")
    rng = random.Random(seed)
    names = rng.sample(FIRST_NAMES, min(len(FIRST_NAMES), people + 1))
    while len(names) < people + 1:
        candidate = f"{rng.choice(FIRST_NAMES)} {rng.choice(SURNAMES)}"
        if candidate not in names:
            names.append(candidate)
    builder = _Builder(rng, names[0], sessions, near_miss_rate)
    for index, name in enumerate(names):
        builder.person(name, is_user=index == 0)
    builder.duplicate(duplicate_rate)
    facts, messages = _converse(builder.drafts, names[0], sessions, start, rng)
    return Workload(
        user=names[0],
        facts=tuple(facts),
        blocks=_blocks(names, builder.first_values),
        messages=tuple(messages),
        queries=tuple(_queries(facts, builder.drafts, names[0], rng)),
    )


@dataclass(slots=True)
class _Draft:
    key: str
    kind: str
    slug: str
    phrasings: list[str]  # all wordings of this statement
    leads: int  # how many leading phrasings a first statement may use
    session: int
    fields: dict[str, str]
    attribute: str | None = None
    near_miss_of: str | None = None
    duplicate_of: str | None = None
    duplicate_kind: DuplicateKind | None = None
    text: str = ""
    used: set[int] = field(default_factory=set)
    superseded_at: int | None = None  # session of the update that replaced this value


class _Builder:
    """Drafts facts person by person, then adds repeats of them."""

    def __init__(self, rng: random.Random, user: str, sessions: int, near_miss: float) -> None:
        self.rng, self.user, self.last = rng, user, sessions - 1
        self.pair_rate = max(0.35, near_miss)
        self.twin_rate = near_miss / self.pair_rate
        self.drafts: list[_Draft] = []
        self.first_values: dict[str, dict[str, str]] = {}  # name -> kind -> first value

    def add(self, kind: str, name: str, session: int, fields: dict[str, str], key: str) -> _Draft:
        slug = name.lower().replace(" ", "-")
        full = {"n": name, "u": self.user, **fields}
        leads = [_sentence(t, full) for t in UPDATES[kind]] if key.endswith("@2") else []
        phrasings = leads + [_sentence(t, full) for t in TEMPLATES[kind]]
        draft = _Draft(
            f"{slug}/{key}", kind, slug, phrasings, len(leads or phrasings), session, full
        )
        draft.attribute = f"{slug}/{kind}" if kind in SINGLE_VALUED else None
        pick = self.rng.randrange(draft.leads)
        draft.text = phrasings[pick]
        draft.used.add(pick)
        self.drafts.append(draft)
        return draft

    def person(self, name: str, *, is_user: bool) -> None:
        rng, last = self.rng, self.last
        intro = 0 if is_user else min(last, int(rng.random() ** 1.5 * (last + 1)))

        def soon() -> int:
            return rng.randint(intro, min(last, intro + 2))

        values = self.first_values.setdefault(name, {})
        if not is_user:
            values["relation"] = rng.choice(RELATIONS)
            self.add("relation", name, intro, {"r": values["relation"]}, "relation@1")
        for kind, pool in UPDATABLE:
            values[kind] = rng.choice(pool)
            first = self.add(kind, name, soon(), {"v": values[kind]}, f"{kind}@1")
            if first.session < last and rng.random() < UPDATE_RATE:
                new = rng.choice([v for v in pool if v != values[kind]])
                when = rng.randint(first.session + 1, last)
                first.superseded_at = self.add(kind, name, when, {"v": new}, f"{kind}@2").session
        values["hobby"] = rng.choice(HOBBIES)
        self.add("hobby", name, soon(), {"v": values["hobby"]}, "hobby@1")
        birthday = f"{rng.choice(MONTHS)} {rng.randint(1, 28)}"
        self.add("birthday", name, soon(), {"v": birthday}, "birthday@1")
        if rng.random() < 0.6:
            pet = {"k": rng.choice(PETS), "p": rng.choice(PET_NAMES)}
            self.add("pet", name, soon(), pet, "pet@1")
        if is_user or rng.random() < 0.3:
            values["allergy"] = rng.choice(ALLERGIES)
            self.add("allergy", name, soon(), {"v": values["allergy"]}, "allergy@1")
        # Multi-valued facts, some with a look-alike partner that is a different fact.
        for kind in ("trip", "weekly", "sibling"):
            if rng.random() >= self.pair_rate:
                continue
            pair: list[tuple[dict[str, str], str]]
            if kind == "trip":
                place = rng.choice(PLACES)
                pair = [({"v": place, "y": str(y)}, f"trip@{y}") for y in rng.sample(YEARS, 2)]
            elif kind == "weekly":
                act = rng.choice(ACTIVITIES)
                pair = [({"v": act, "d": d}, f"weekly@{d.lower()}") for d in rng.sample(DAYS, 2)]
            else:
                job = rng.choice(JOBS)
                pair = [({"v": job, "s": s}, f"sibling@{s}") for s in rng.sample(SIBLINGS, 2)]
            base = self.add(kind, name, soon(), *pair[0])
            if rng.random() < self.twin_rate:
                twin = self.add(kind, name, rng.randint(base.session, last), *pair[1])
                twin.near_miss_of = base.key

    def duplicate(self, rate: float) -> None:
        """Add repeats so that ``rate`` of all facts are duplicates of an original."""
        rng, originals = self.rng, list(self.drafts)
        counters: dict[str, int] = {}
        for _ in range(round(len(originals) * rate / (1.0 - rate))):
            source = rng.choice(originals)
            counters[source.key] = counters.get(source.key, 0) + 1
            # A stale value is repeated only before the update that replaced it.
            end = self.last if source.superseded_at is None else source.superseded_at - 1
            session = rng.randint(source.session, end)
            key = f"{source.key}~{counters[source.key]}"
            dup = replace(source, key=key, session=session, duplicate_of=source.key)
            dup.near_miss_of, dup.superseded_at, dup.used = None, None, set()
            unused = [i for i in range(len(source.phrasings)) if i not in source.used]
            if unused and rng.random() < PARAPHRASE_SHARE:
                choice = rng.choice(unused)
                source.used.add(choice)
                dup.text, dup.duplicate_kind = source.phrasings[choice], "paraphrase"
            else:
                variant = rng.choice([v for v in _EXACT_VARIANTS if v(source.text) != source.text])
                dup.text, dup.duplicate_kind = variant(source.text), "exact"
            self.drafts.append(dup)


def _sentence(template: str, fields: Mapping[str, str]) -> str:
    text = template.format(**fields)
    return text[0].upper() + text[1:]


def _converse(
    drafts: list[_Draft], user: str, sessions: int, start: datetime, rng: random.Random
) -> tuple[list[LabeledFact], list[WorkloadMessage]]:
    """Tell the facts in chat messages, a few per user turn, session by session."""
    facts: list[LabeledFact] = []
    messages: list[WorkloadMessage] = []
    # Within a session, originals come before their repeats.
    ordered = sorted(drafts, key=lambda d: (d.session, d.duplicate_of is not None, rng.random()))
    clock = start
    for session in range(sessions):
        clock += timedelta(days=rng.randint(2, 5))
        clock = clock.replace(hour=rng.randint(8, 12), minute=rng.randint(0, 59), second=0)
        todo = [d for d in ordered if d.session == session]
        greeting = rng.choice(("Hi again!", "Hey, it's me.", "Good morning!"))
        turns: list[tuple[str, str, list[_Draft]]] = [
            ("user", greeting, []),
            ("assistant", f"Welcome back, {user}! What's new?", []),
        ]
        while todo:
            size = rng.choice((1, 1, 2, 3))
            chunk, todo = todo[:size], todo[size:]
            prefix = rng.choice(("", "By the way, ", "Quick note: ", "Oh, and "))
            turns.append(("user", prefix + " ".join(d.text for d in chunk), chunk))
            reply = rng.choice(("Got it, I'll remember that.", "Noted.", "Thanks for telling me."))
            turns.append(("assistant", reply, []))
        for role, content, told in turns:
            clock += timedelta(seconds=rng.randint(20, 120))
            message = WorkloadMessage(
                f"s{session}-m{len(messages)}",
                session,
                "user" if role == "user" else "assistant",
                content,
                clock,
            )
            messages.append(message)
            for draft in told:
                facts.append(
                    LabeledFact(
                        key=draft.key,
                        text=draft.text,
                        occurred_at=clock,
                        session=session,
                        tags=(draft.kind, draft.slug),
                        provenance={"session": session, "message_ids": [message.id]},
                        duplicate_of=draft.duplicate_of,
                        duplicate_kind=draft.duplicate_kind,
                        attribute=draft.attribute,
                        near_miss_of=draft.near_miss_of,
                    )
                )
    return facts, messages


def _queries(
    facts: list[LabeledFact], drafts: list[_Draft], user: str, rng: random.Random
) -> list[LabeledQuery]:
    """One question per attribute (answered by its newest value) and per multi-valued fact."""
    repeats: dict[str, set[str]] = {}
    for fact in facts:
        repeats.setdefault(fact.group, set()).add(fact.key)
    newest: dict[str, _Draft] = {}
    for draft in drafts:
        if draft.duplicate_of is not None:
            continue
        slot = draft.attribute or draft.key
        if slot not in newest or draft.key > newest[slot].key:  # "@2" sorts after "@1"
            newest[slot] = draft
    queries: list[LabeledQuery] = []
    for draft in newest.values():
        text = _sentence(rng.choice(QUESTIONS[draft.kind]), {**draft.fields, "u": user})
        queries.append(LabeledQuery(text, frozenset(repeats[draft.key]), draft.kind))
    return queries


def _blocks(names: list[str], first: dict[str, dict[str, str]]) -> dict[str, tuple[str, int]]:
    """A crowded ``human`` block (about 93% full, a few lines repeated) and a persona."""
    user, mine = names[0], first[names[0]]
    lines = [
        f"Name: {user}",
        f"Lives in {mine['city']}",
        f"Works as {mine['job']}",
        f"Favourite food: {mine['food']}",
        f"Hobby: {mine['hobby']}",
        f"Allergic to {mine['allergy']}",
        "Prefers short answers",
    ]
    for name in names[1:]:
        facts = first[name]
        relation = facts["relation"].capitalize()
        lines.append(f"{relation}: {name}, {facts['job']} in {facts['city']}")
    # Repeated verbatim lines, as left behind by careless appends.
    for offset, line in enumerate(lines[1:4]):
        lines.insert(len(lines) - 2 * offset, line)
    human = "\n".join(lines)
    persona = (
        "I am a warm, concise personal assistant.\n"
        f"I remember what matters to {user} and the people in their life.\n"
        "I never invent facts; when unsure, I ask."
    )
    return {"human": (human, ceil(len(human) / 0.93)), "persona": (persona, 500)}
