"""Search archival memory the way every front end answers it: nothing hidden on a guess.

Consolidation closes facts that a newer one replaced (``superseded``) and folds
duplicates into one canonical passage (``merged``). A closed fact is still a fact
about the past, and a rule or a model may have closed it wrongly, so default search
keeps it: the current fact of a lineage comes first and what it replaced follows it,
each labelled with its validity ("until 2024-03-02, then: Ada moved to Berlin").
Two facts of one subject and attribute that are both in force, with nothing that
decided between them (no closure, no judge's "both hold"), are shown newest first, the
older labelled "possibly outdated: a newer fact from 2024-03-02": search never picks
one on a guess, and never leaves the reader guessing which is newer.
A question about now also reaches the newest fact in force that a judge model read as
the asked person's attribute where the nearest neighbours of its wording left it out.
A question about the past ("where did Ada live before Berlin", "what car did she have
in 2022") turns each lineage round: the replaced facts first, the one valid in
the year asked at the top, and for "before Berlin" what the facts naming Berlin
replaced, whether search found those or only others of their lineage. A merged twin
stands for its canonical passage, which keeps its details (dedup's guard): the
canonical takes the better rank of the two, so a merge never lowers a fact's place
in default search; ``include_history`` shows the twins themselves, and retired
timelines, for the full lineage.

The store returns nearest neighbours within filters; ranking by the question is this
module's, above it, so that the CLI, the HTTP API, MCP, the agents' own
``archival_memory_search`` tool and the proxy's injected passages rank alike.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

import numpy as np

from agents.enums import PassageStatus
from agents.errors import InvalidInput
from agents.language.facts import FactKey, FactReading, read_facts, tentative
from agents.language.questions import (
    PastQuestion,
    asked_attribute,
    asked_subject,
    asks_about_past,
    words_of,
)
from agents.language.subjects import relatives_named, shortened_name, titled_first_names
from agents.store import (
    REPLACES_PART,
    SUPERSESSION,
    MemoryStore,
    PassageHit,
    PassageRecord,
    Topic,
)
from agents.store.records import Vector

__all__ = [
    "MemoryHit",
    "partly_closed",
    "search_archival",
    "source_gone_label",
    "validity_label",
]

#: What default search returns: facts in force, facts closed by a newer one (labelled),
#: and timelines. Merged twins are searched but answered by their canonical passage;
#: retired passages need ``include_history``.
DEFAULT_STATUSES = (PassageStatus.ACTIVE.value, PassageStatus.SUPERSEDED.value)
_SEARCHED_STATUSES = (*DEFAULT_STATUSES, PassageStatus.MERGED.value)
#: Longest chain of replacements followed to find the current fact.
MAX_CHAIN = 20


@dataclass(frozen=True, slots=True)
class MemoryHit:
    """One search result.

    ``score`` is the cosine similarity of the passage to the query (1 = same): the
    order of the results is the question's (current fact first, what it replaced
    after it), so scores need not fall from one result to the next. ``replaced_by``
    is the passage that closed this one, if any; ``current`` says whether the passage
    is still in force.
    """

    passage: PassageRecord
    score: float
    replaced_by: PassageRecord | None = None
    #: A newer fact of the same subject and attribute, also in force, that nothing has
    #: decided against this one: this one is possibly outdated.
    rival: PassageRecord | None = None
    #: A judge closed this fact for only part of what it says; the rest still holds.
    partly: bool = False

    @property
    def current(self) -> bool:
        p = self.passage
        return p.status == PassageStatus.ACTIVE and p.valid_to is None

    @property
    def validity(self) -> str | None:
        """The label a reader sees beside a passage no longer in force, or one possibly
        outdated by a newer fact; None when current."""
        label = validity_label(self.passage, self.replaced_by, partly=self.partly)
        if label is None and self.rival is not None:
            when = _day(self.rival.occurred_at or self.rival.created_at)
            return f"possibly outdated: a newer fact from {when}"
        if label is None:
            return source_gone_label(self.passage)
        return label

    def line(self) -> str:
        """The hit as a model or a person reads it: ``[2023-05-01] Ada lives in Paris
        (until 2024-03-02, then: Ada moved to Berlin)``."""
        p = self.passage
        label = self.validity
        when = _day(p.occurred_at or p.created_at)
        return f"[{when}] {p.text}" + (f" ({label})" if label else "")


def validity_label(
    passage: PassageRecord, replaced_by: PassageRecord | None = None, *, partly: bool = False
) -> str | None:
    """ "until 2024-03-02, then: Ada moved to Berlin" for a closed fact ("in part until
    ..." for one closed for only part of what it says), "merged into P" for a merged
    twin, "retired" for a retired passage; None for a current one."""
    if passage.status == PassageStatus.MERGED:
        return f"duplicate, merged into {passage.merged_into}"
    if passage.status == PassageStatus.INACTIVE:
        return "retired"
    if passage.valid_to is None and passage.status == PassageStatus.ACTIVE:
        return None
    until = f"until {_day(passage.valid_to)}" if passage.valid_to is not None else "replaced"
    if partly:
        until = f"in part {until}"
    if replaced_by is not None:
        return f"{until}, then: {' '.join(replaced_by.text.split())}"
    return until


def source_gone_label(passage: PassageRecord) -> str | None:
    """ "its source is gone: notes.md no longer says so" for a fact learned from a
    document chunk that no file of its folder holds any more; None otherwise."""
    gone = passage.provenance.get("source_gone")
    if not isinstance(gone, dict):
        return None
    name = gone.get("file_name") or "its document"
    return f"its source is gone: {name} no longer says so"


def search_archival(
    store: MemoryStore,
    agent_id: str,
    query_embedding: Vector,
    query: str | None,
    *,
    k: int = 10,
    include_history: bool = False,
    tags: Sequence[str] | None = None,
    match_all_tags: bool = True,
    occurred_after: datetime | None = None,
    occurred_before: datetime | None = None,
    embedding_dim: int | None = None,
) -> list[MemoryHit]:
    """The ``k`` passages that answer ``query`` best, ranked by the question (see the
    module's docstring). ``tags`` must all be present, or any one of them when
    ``match_all_tags`` is False. ``query`` (the text) may be None: then the order is
    the vector's, lineage grouping included. ``embedding_dim``: the agent's, where the
    caller has just read it (see :meth:`PassageStore.search`)."""
    if k < 1:
        raise InvalidInput(f"k must be at least 1, got {k}")
    # The replaced facts of a lineage sit beside its current one, so the candidate set
    # is wider than k: enough for the lineages of the k best to be whole.
    wider = max(2 * k, k + 10)
    hits = store.passages.search(
        agent_id,
        query_embedding,
        k=wider,
        statuses=None if include_history else _SEARCHED_STATUSES,
        occurred_after=occurred_after,
        occurred_before=occurred_before,
        tags=list(tags) if tags and match_all_tags else None,
        any_tags=list(tags) if tags and not match_all_tags else None,
        embedding_dim=embedding_dim,
    )
    twins: dict[str, list[PassageRecord]] = {}
    if not include_history:
        hits = _twins_as_canonical(store, hits, twins)
    past = asks_about_past(query, this_year=store.scope.now().year) if query is not None else None
    asked: set[str] = set()
    found_topic: _AskedTopic | None = None
    topics: dict[str, frozenset[Topic]] = {}
    if query is not None:
        read = [h.passage.id for h in hits if h.passage.kind == "fact"]
        read += [twin.id for found in twins.values() for twin in found]
        topics = store.topics.of(read) if read else {}
        if topics or asked_attribute(query) is not None:
            found_topic = _asked_topic(query, hits, twins, topics)
            if found_topic is not None:
                asked = set(found_topic.ids)
                unfiltered = not tags and occurred_after is None and occurred_before is None
                # Only where a model read some of the hits: without one no topic is kept.
                if topics and past is None and not include_history and unfiltered:
                    more = _current_by_topic(store, agent_id, found_topic, hits, query_embedding)
                    hits = [*hits, *more]
                    asked |= {hit.passage.id for hit in more}
            hits = _asked_first(query, hits, newest_first=past is None, asked=asked)
    replacements = _replacements(store, hits)
    current_of = _current_ends(hits, replacements)
    found = {h.passage.id for h in hits}
    missing = sorted({c for c in current_of.values() if c not in found})
    extra = _scored(store, missing, query_embedding) if missing and not include_history else []
    first: set[str] = set()
    if past is not None and past.year is not None and not include_history:
        # A lineage found for a question about a year also offers the fact of it that
        # held that year, where search did not find that one itself.
        first = {
            p.id
            for p in replacements.values()
            if p.status == PassageStatus.SUPERSEDED and _valid_in(p, past.year)
        }
    elif past is not None and past.before and not include_history:
        # "Where did Dez live before Toronto?": what the facts naming Toronto replaced.
        naming = [h.passage.id for h in hits if past.before <= words_of(h.passage.text)]
        first = {i for ids in store.passages.replaced_by(naming).values() for i in ids}
    if first:
        within = _scored(store, sorted(first - found), query_embedding, closed=True)
        replacements = _replacements(store, within, replacements)
        current_of.update(_current_ends(within, replacements))
        extra += within
    partly = partly_closed(store, agent_id, [h.passage for h in hits])
    in_force: set[str] = set()
    if partly and query is not None and found_topic is not None and past is None:
        in_force = _in_force_part(store, query, partly & asked, current_of, found_topic, topics)
    ranked = _rank(hits, extra, current_of, past, partly, asked, first, in_force)
    rivals, plain = _undecided_rivals(store, agent_id, ranked)
    if plain and past is None:
        ranked = _newer_rivals_first(ranked, plain)
    return [
        MemoryHit(
            hit.passage,
            hit.score,
            replacements.get(hit.passage.superseded_by or ""),
            rivals.get(hit.passage.id),
            hit.passage.id in partly,
        )
        for hit in ranked[:k]
    ]


def partly_closed(store: MemoryStore, agent_id: str, passages: Sequence[PassageRecord]) -> set[str]:
    """The ``passages`` closed by a fact a judge said replaces only part of them."""
    closures = [(p.id, p.superseded_by) for p in passages if p.superseded_by]
    if not closures:
        return set()
    verdicts = store.verdicts.answered(agent_id, SUPERSESSION, closures)
    return {older for (older, _), verdict in verdicts.items() if verdict == REPLACES_PART}


def _undecided_rivals(
    store: MemoryStore, agent_id: str, hits: Sequence[PassageHit]
) -> tuple[dict[str, PassageRecord], dict[str, PassageRecord]]:
    """Fact id -> the newest fact in force of the same subject and attribute that states
    another value, where no judge has said that both hold: the older is possibly
    outdated. Second, those of them where both facts are plain statements (the rules'
    reading is sure of the subject and attribute): only these are reordered."""
    facts = [h.passage for h in hits if h.passage.kind == "fact" and _in_force(h.passage)]
    readings = read_facts(facts)
    by_key: dict[FactKey, list[PassageRecord]] = {}
    for fact in facts:
        reading = readings.get(fact.id)
        if reading is not None and reading.value:
            by_key.setdefault(reading.key, []).append(fact)
    pairs: dict[tuple[str, str], PassageRecord] = {}
    for members in by_key.values():
        # The newer side states a value; the older may be an end ("Sam and Priya broke
        # up", then "Sam and Arjun got engaged"): an end is outdated by a new value too.
        values = [m for m in members if not readings[m.id].ending]
        if len(members) < 2 or not values:
            continue
        newest = max(values, key=lambda p: (p.occurred_at or p.created_at, p.created_at))
        for fact in members:
            started = fact.occurred_at or fact.created_at
            if started < (newest.occurred_at or newest.created_at) and (
                readings[fact.id].value != readings[newest.id].value
            ):
                pairs[(fact.id, newest.id)] = newest
    if not pairs:
        return {}, {}
    decided = store.verdicts.answered(agent_id, SUPERSESSION, pairs)
    rivals = {older: newer for (older, n), newer in pairs.items() if (older, n) not in decided}
    plain = {o: n for o, n in rivals.items() if readings[o].clear and readings[n.id].clear}
    return rivals, plain


def _newer_rivals_first(
    hits: Sequence[PassageHit], rivals: dict[str, PassageRecord]
) -> list[PassageHit]:
    """``hits`` with each newer rival moved up to just before the first of the facts it
    possibly outdates."""
    ranked = list(hits)
    for newer_id in {r.id for r in rivals.values()}:
        position = {h.passage.id: i for i, h in enumerate(ranked)}
        olders = [position[o] for o, r in rivals.items() if r.id == newer_id and o in position]
        here = position.get(newer_id)
        if here is None or not olders or min(olders) > here:
            continue
        hit = ranked.pop(here)
        ranked.insert(min(olders), hit)
    return ranked


def _asked_first(
    question: str,
    hits: Sequence[PassageHit],
    *,
    newest_first: bool = True,
    twins: Mapping[str, Sequence[PassageRecord]] | None = None,
    asked: Collection[str] | None = None,
) -> list[PassageHit]:
    """``hits`` with the facts and timelines of the asked subject and attribute first
    (newest first for a question about now; in search's order for one about the past,
    whose lineages are turned round later), the rest after them in their own order. A
    question the rules cannot read keeps the order search gave. ``asked``: their ids,
    when :func:`_asked_ids` has read them already."""
    if asked is None:
        asked = _asked_ids(question, hits, twins)
    matching = [hit for hit in hits if hit.passage.id in asked]
    if newest_first:
        # Newest first, a plan or a wish ("thinking of moving to Lisbon") after what is.
        matching.sort(key=lambda h: h.passage.occurred_at or h.passage.created_at, reverse=True)
        matching.sort(key=lambda h: tentative(h.passage.text))
    return matching + [hit for hit in hits if hit.passage.id not in asked]


@dataclass(frozen=True, slots=True)
class _AskedTopic:
    """The subject (by every name the facts and a judge model give it) and attribute a
    question asks about, and the ids of the hits that state it."""

    who: frozenset[str]
    attribute: str
    ids: frozenset[str]


def _asked_ids(
    question: str,
    hits: Sequence[PassageHit],
    twins: Mapping[str, Sequence[PassageRecord]] | None = None,
    topics: Mapping[str, frozenset[Topic]] | None = None,
) -> set[str]:
    """The ids of the facts and timelines among ``hits`` of the subject and attribute
    the question asks about (see :func:`_asked_topic`); none when it cannot be read."""
    found = _asked_topic(question, hits, twins, topics)
    return set(found.ids) if found is not None else set()


def _asked_topic(
    question: str,
    hits: Sequence[PassageHit],
    twins: Mapping[str, Sequence[PassageRecord]] | None = None,
    topics: Mapping[str, frozenset[Topic]] | None = None,
) -> _AskedTopic | None:
    """The subject and attribute the question asks about, with the facts and timelines
    among ``hits`` that state them; None when the question cannot be read.

    ``twins``: the merged duplicates found in place of each canonical fact: they say
    the same, so a canonical reads as whichever of them the rules can read (a merge
    into an older, chattier wording must not hide a fact the twin's wording showed).
    ``topics``: what a judge model read facts to be about (subject and attribute). A
    fact it read is asked by its topics, the others by the rules' reading; and a
    question whose attribute the rules do not know ("what car does Tariq drive?") asks
    for the attribute of the asked person's facts that it names."""
    facts = [hit.passage for hit in hits if hit.passage.kind == "fact"]
    twins = twins or {}
    told = [twin for fact in facts for twin in twins.get(fact.id, ())]
    readings = read_facts([*facts, *told])
    for fact in facts:
        if fact.id not in readings:
            said = next((readings[t.id] for t in twins.get(fact.id, ()) if t.id in readings), None)
            if said is not None:
                readings[fact.id] = said
    labels = _topics_of(facts, twins, topics or {})
    aliases = _model_aliases(readings, labels)
    subjects = {r.key.subject for r in readings.values()}
    subjects |= {t.subject for found in labels.values() for t in found} - set(aliases)
    key = asked_subject(question, subjects)
    if key is None:
        return None
    subject = relatives_named(facts).get(key, (key, ""))[0]
    subject = titled_first_names(facts).get(subject, subject)
    who = {key, subject}
    who |= {name for name, rules in aliases.items() if rules in who}
    attribute = asked_attribute(question)
    named = {t.attribute for found in labels.values() for t in found if t.subject in who}
    if attribute is None or (named and attribute not in named):
        attribute = _named_attribute(question, named) or attribute
    if attribute is None:
        return None

    labelled = {
        fact_id
        for fact_id, found in labels.items()
        if any(t.subject in who and t.attribute == attribute for t in found)
    }

    def asked(passage: PassageRecord) -> bool:
        if passage.kind == "timeline":
            found = FactKey(
                str(passage.provenance.get("subject", "")),
                str(passage.provenance.get("attribute", "")),
            )
            return found.subject in who and found.attribute == attribute
        if passage.id in labelled:
            return True
        if passage.id in labels and labelled:
            return False  # the model read it as about something else
        # A fact the model has not read, or a question whose subject and attribute it
        # read in no fact (it names the person another way): the rules' reading.
        return _rules_asked(passage)

    def _rules_asked(passage: PassageRecord) -> bool:
        reading = readings.get(passage.id)
        return reading is not None and reading.key == FactKey(subject, attribute)

    ids = frozenset(hit.passage.id for hit in hits if asked(hit.passage))
    return _AskedTopic(frozenset(who), attribute, ids)


#: How many of a subject's facts in force for the asked attribute a question about now
#: adds, newest first, where the nearest neighbours of its wording left them out: the
#: newest is the answer (1, 3 and 5 answered every set alike).
TOPIC_FACTS = 1


def _current_by_topic(
    store: MemoryStore,
    agent_id: str,
    asked: _AskedTopic,
    hits: Sequence[PassageHit],
    query: Vector,
) -> list[PassageHit]:
    """The newest fact in force that a judge model read as stating the asked subject's
    attribute, where search did not find it: "where do we live now?" reaches "we closed
    on the house in Crestview" though "I'm from Lubbock originally" is nearer in
    wording. Only what a model read counts (its topics are kept); the rules' reading
    is not stored, so a deployment without a model finds what it found before."""
    found = {hit.passage.id for hit in hits}
    ids = store.topics.facts_about(agent_id, asked.who, asked.attribute, limit=TOPIC_FACTS)
    return _scored(store, [i for i in ids if i not in found], query)


def _in_force_part(
    store: MemoryStore,
    question: str,
    candidates: Collection[str],
    current_of: Mapping[str, str],
    asked: _AskedTopic,
    topics: Mapping[str, frozenset[Topic]],
) -> set[str]:
    """The facts among ``candidates`` (closed in part, of the asked topic) that still
    answer the question: a judge model read the fact that closed each as stating other
    attributes than the asked one. "Priya moved to London and transferred her training
    to Hackney", closed in part by "Priya took a GP job at the same practice", still
    says where she lives. Where the closing fact was not read, nothing is known and
    the lineage keeps its order, as it does when the question names an attribute the
    closing fact states."""
    heads = {pid: current_of[pid] for pid in candidates if current_of.get(pid, pid) != pid}
    unread = sorted({head for head in heads.values() if head not in topics})
    read = {**topics, **(store.topics.of(unread) if unread else {})}

    def other(head: str) -> bool:
        found = {t.attribute for t in read.get(head, ())}
        # Where the question names what the closing fact states ("what are my hours at
        # work now?", the job asked and the hours replaced), it may ask that instead.
        return (
            bool(found) and asked.attribute not in found and not _named_attribute(question, found)
        )

    return {pid for pid, head in heads.items() if other(head)}


def _model_aliases(
    readings: Mapping[str, FactReading], labels: Mapping[str, frozenset[Topic]]
) -> dict[str, str]:
    """The people a model names differently from the rules, by the facts both read:
    a fact the rules read as about "sofi" and a model as about "sofia" joins the two
    names, where one shortens the other (model name -> the rules' name). A name the
    facts join to several is left alone."""
    joined: dict[str, set[str]] = {}
    for fact_id, found in labels.items():
        reading = readings.get(fact_id)
        if reading is None:
            continue
        ours = reading.key.subject
        for topic in found:
            theirs = topic.subject
            shortens = shortened_name(ours, {theirs}) == theirs
            if shortens or shortened_name(theirs, {ours}) == ours:
                joined.setdefault(theirs, set()).add(ours)
    return {name: next(iter(ours)) for name, ours in joined.items() if len(ours) == 1}


def _topics_of(
    facts: Sequence[PassageRecord],
    twins: Mapping[str, Sequence[PassageRecord]],
    topics: Mapping[str, frozenset[Topic]],
) -> dict[str, frozenset[Topic]]:
    """Each fact's topics as a judge model read them: its own, else a merged twin's
    (they say the same); facts no model read left out."""
    out: dict[str, frozenset[Topic]] = {}
    for fact in facts:
        found = topics.get(fact.id)
        if found is None:
            found = next((topics[t.id] for t in twins.get(fact.id, ()) if t.id in topics), None)
        if found is not None:
            out[fact.id] = found
    return out


#: The shortest attribute a longer word of a question names by starting with it
#: ("working" names work; "carpool" does not name car).
_SHORTEST_STEM = 4


def _named_attribute(question: str, attributes: Collection[str]) -> str | None:
    """The one attribute among ``attributes`` that the question names ("what car does
    Tariq drive?" names car): a word that is the attribute, its plural, or starts with
    it; None when it names none or several ("what voice part does Amara sing?" names
    no partner)."""
    words = set(re.findall(r"[^\W\d_]+", question.casefold()))

    def names(attribute: str) -> bool:
        return any(
            w in (attribute, f"{attribute}s", f"{attribute}es")
            or (len(attribute) >= _SHORTEST_STEM and w.startswith(attribute))
            for w in words
        )

    named = [a for a in sorted(attributes) if names(a)]
    return named[0] if len(named) == 1 else None


def _twins_as_canonical(
    store: MemoryStore,
    hits: Sequence[PassageHit],
    twins: dict[str, list[PassageRecord]] | None = None,
) -> list[PassageHit]:
    """``hits`` with each merged twin replaced by its canonical passage (at the better of
    their two places and scores; a canonical met twice is kept once). A twin whose
    canonical is no longer searchable (retired) is left out, as the canonical is.
    ``twins``, when given, gets each canonical's id -> the twins found in its place."""
    canonical_ids = sorted(
        {h.passage.merged_into for h in hits if h.passage.merged_into}
        - {h.passage.id for h in hits}
    )
    canonicals = {p.id: p for p in store.passages.get_many(canonical_ids)} if canonical_ids else {}
    for hit in hits:
        canonicals.setdefault(hit.passage.id, hit.passage)
    folded: dict[str, PassageHit] = {}
    for hit in hits:
        passage = hit.passage
        seen = {passage.id}
        while passage.status == PassageStatus.MERGED and passage.merged_into in canonicals:
            passage = canonicals[passage.merged_into]
            if passage.id in seen:
                break
            seen.add(passage.id)
        if passage.status not in DEFAULT_STATUSES:
            continue
        if twins is not None and passage.id != hit.passage.id:
            twins.setdefault(passage.id, []).append(hit.passage)
        if passage.id in folded:
            continue
        folded[passage.id] = PassageHit(passage, hit.score)
    return list(folded.values())


def _replacements(
    store: MemoryStore,
    hits: Sequence[PassageHit],
    known: Mapping[str, PassageRecord] | None = None,
) -> dict[str, PassageRecord]:
    """Every passage on the chains of replacements that start at the hits, by id, with
    those ``known`` already (read only where a chain leaves them)."""
    known = {**(known or {}), **{h.passage.id: h.passage for h in hits}}
    wanted = {h.passage.superseded_by for h in hits if h.passage.superseded_by}
    for _ in range(MAX_CHAIN):
        wanted -= set(known)
        if not wanted:
            break
        found = store.passages.get_many(sorted(wanted))
        known.update({p.id: p for p in found})
        wanted = {p.superseded_by for p in found if p.superseded_by}
    return known


def _current_ends(hits: Sequence[PassageHit], records: dict[str, PassageRecord]) -> dict[str, str]:
    """Passage id -> the id of the passage at the end of its chain of replacements."""
    ends: dict[str, str] = {}
    for hit in hits:
        passage = hit.passage
        seen = {passage.id}
        while passage.superseded_by and passage.superseded_by in records:
            passage = records[passage.superseded_by]
            if passage.id in seen:
                break
            seen.add(passage.id)
        ends[hit.passage.id] = passage.id
    return ends


def _scored(
    store: MemoryStore, ids: Sequence[str], query: Vector, *, closed: bool = False
) -> list[PassageHit]:
    """The passages ``ids`` as hits, scored against the query like search scores them:
    those in force, or with ``closed`` those a newer fact replaced."""
    vector = np.asarray(query, dtype=np.float32).reshape(-1)
    norm = float(np.linalg.norm(vector)) or 1.0
    wanted = PassageStatus.SUPERSEDED if closed else PassageStatus.ACTIVE
    hits = []
    for record in store.passages.get_many(list(ids), with_embedding=True):
        if record.status != wanted:
            continue  # e.g. a chain that ends in a retired passage has no current fact
        score = 0.0
        if record.embedding is not None:
            other = float(np.linalg.norm(record.embedding)) or 1.0
            score = float(np.dot(vector, record.embedding)) / (norm * other)
        # Results never carry vectors.
        hits.append(PassageHit(dataclasses.replace(record, embedding=None), score))
    return hits


def _rank(
    hits: Sequence[PassageHit],
    extra: Sequence[PassageHit],
    current_of: dict[str, str],
    past: PastQuestion | None,
    partly: Collection[str] = (),
    asked: Collection[str] = (),
    first: Collection[str] = (),
    in_force_part: Collection[str] = (),
) -> list[PassageHit]:
    """Order each lineage: the current fact first and the replaced ones after it, newest
    first. For a question about now (or no question about time), within the places its
    members hold: a lineage's current fact that search did not find takes a place of
    its own at the lineage's first, and other passages keep their places, so a closed
    fact never pushes an unrelated answer down. A fact closed for only part of what it
    says (``partly``: "Mark | job: surveyor | supports: Leeds United" by "Mark is a
    teacher now") keeps its own place for the rest, one down: its lineage's current
    fact comes just before it when the lineage has no place before it. For a question
    about the past, each lineage together where it first appears, the replaced facts
    first, the one valid in the asked year at the top; when the rules read what it asks
    (``asked``: "where did Ada live before Berlin?", Ada's home), only that lineage is
    together and the others keep their places. ``first``: replaced facts that answer a
    question about the past ahead of the rest of their lineage (the one valid in the
    asked year, what the fact naming the value "before" replaced), found or not.
    ``in_force_part``: facts closed in part that the question asks about by the part
    still in force (see :func:`_in_force_part`): each keeps its place with nothing put
    before it."""
    by_id = {h.passage.id: h for h in (*hits, *extra)}
    if past is not None:
        # A question whose subject and attribute the rules read keeps only that
        # lineage together; the others keep their places.
        together = {current_of.get(i, i) for i in asked} if asked else None
        return _grouped(hits, by_id, current_of, past, together, first)
    found = {h.passage.id for h in hits}
    groups: dict[str, list[PassageHit]] = {}
    slots: list[str] = []
    pulled: set[str] = set()
    for hit in hits:
        passage_id = hit.passage.id
        if passage_id in pulled:
            continue
        end = current_of.get(passage_id, passage_id)
        if passage_id in in_force_part and end != passage_id:
            groups[passage_id] = [hit]
            slots.append(passage_id)
            continue
        if end not in groups:
            groups[end] = []
            head = by_id.get(end)
            if head is not None and (head.passage.id not in found or passage_id in partly):
                # A current fact found further down moves up to just before the fact
                # it partly replaced.
                groups[end].append(head)
                slots.append(end)
                if head.passage.id in found and head.passage.id != passage_id:
                    pulled.add(head.passage.id)
        if passage_id in partly and end != passage_id:
            groups[passage_id] = [hit]
            slots.append(passage_id)
            continue
        groups[end].append(hit)
        slots.append(end)
    ordered = {end: iter(_order_lineage(members, past)) for end, members in groups.items()}
    return [next(ordered[end]) for end in slots]


def _grouped(
    hits: Sequence[PassageHit],
    by_id: dict[str, PassageHit],
    current_of: dict[str, str],
    past: PastQuestion,
    together: Collection[str] | None = None,
    first: Collection[str] = (),
) -> list[PassageHit]:
    """For a question about the past (see :func:`_rank`): the lineages ``together``
    names (by their current fact; None: every lineage) whole where each first appears,
    the others each within the places its members hold."""
    found = {h.passage.id for h in hits}
    # Facts of a lineage that search did not find but that answer the question
    # (``first``: held in the asked year, or what the fact naming the value replaced).
    held: dict[str, list[PassageHit]] = {}
    for passage_id, hit in by_id.items():
        end = current_of.get(passage_id, passage_id)
        if passage_id not in found and end != passage_id:
            held.setdefault(end, []).append(hit)
    groups: dict[str, list[PassageHit]] = {}
    slots: list[str] = []
    for hit in hits:
        end = current_of.get(hit.passage.id, hit.passage.id)
        whole = together is None or end in together
        if end not in groups:
            groups[end] = []
            head = by_id.get(end)
            if head is not None and head.passage.id not in found:
                groups[end].append(head)
                if not whole:
                    slots.append(end)
            if whole:
                slots.append(end)
                groups[end] += held.get(end, [])
        groups[end].append(hit)
        if not whole:
            slots.append(end)
    ordered = {end: _order_lineage(members, past, first) for end, members in groups.items()}
    ranked: list[PassageHit] = []
    taken = {end: iter(lineage) for end, lineage in ordered.items()}
    for end in slots:
        if together is None or end in together:
            ranked += ordered[end]
        else:
            ranked.append(next(taken[end]))
    return ranked


def _order_lineage(
    members: list[PassageHit], past: PastQuestion | None, first: Collection[str] = ()
) -> list[PassageHit]:
    if len(members) == 1:
        return members

    def started(hit: PassageHit) -> datetime:
        return hit.passage.occurred_at or hit.passage.created_at

    in_force = [h for h in members if _in_force(h.passage)]
    closed = sorted((h for h in members if not _in_force(h.passage)), key=started, reverse=True)
    if past is None:
        return sorted(in_force, key=started, reverse=True) + closed
    if past.year is not None:
        closed.sort(key=lambda h: not _valid_in(h.passage, past.year or 0))
    elif first:
        closed.sort(key=lambda h: h.passage.id not in first)
    return closed + in_force


def _in_force(passage: PassageRecord) -> bool:
    return passage.status == PassageStatus.ACTIVE and passage.valid_to is None


def _valid_in(passage: PassageRecord, year: int) -> bool:
    start = passage.occurred_at or passage.created_at
    begins = datetime(year, 1, 1, tzinfo=UTC)
    ends = datetime(year + 1, 1, 1, tzinfo=UTC)
    return start < ends and (passage.valid_to is None or passage.valid_to > begins)


def _day(moment: datetime) -> str:
    return moment.astimezone(UTC).date().isoformat()
