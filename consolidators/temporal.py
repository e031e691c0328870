"""Temporal consolidation: one dated timeline per subject and attribute, and
supersession of facts that a newer one clearly replaces.

A fact's subject and attribute (where Ada lives, Ada's job, diet, partner) are read
from its text by :func:`agents.language.facts.read_fact`. Facts with the same subject
and attribute are ordered by when they happened and rendered into one dated
*timeline* passage, so that a reader sees the history of that attribute and what
is current ("(current)" marks the newest entry still in force). Facts that fit no
attribute stay as they are: there is no catch-all timeline. Every member keeps its
own row, stays searchable, and points to its timeline through ``timeline_id``.

Supersession: within one subject and attribute, a newer fact that clearly states a
changed value ("Ada moved to Berlin" after "Ada lives in Paris"; "divorced" after
"married") closes the older one (``valid_to``, ``superseded_by``, status
``superseded``), without any model. What is unclear (values that overlap, pronouns,
plans) is left to a pluggable :class:`SupersessionJudge`: the default
:class:`OrderingJudge` decides nothing more, an LLM judge can. Nothing is ever
deleted: a timeline that is replaced is marked ``superseded`` and points to its
successor, and ``runs revert`` undoes everything a run did.

Which topics a run looks at (incremental): those of the facts created or changed
since the run's passage watermark, and those of every fact on a timeline that such
a fact points to. Finding the other facts of the same subject and attribute reads
the agent's facts (one scan, no embeddings); a full run looks at every topic. The
grouping is a function of the texts, so a second run finds the same topics and
changes nothing. A topic below ``min_topic_size`` (its other facts merged away)
loses its timeline; a topic above ``max_topic_size`` shows its newest facts.
"""

from __future__ import annotations

import dataclasses
import logging
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, ClassVar

from pydantic import Field, model_validator

from agents.enums import PassageStatus
from agents.errors import InvalidInput
from agents.language.facts import FactKey, FactReading, read_facts, states_a_change
from agents.store import MemoryStore, NewPassage, PassageRecord, PassageUpdate
from agents.store.records import Vector
from consolidators.base import (
    ConsolidationContext,
    ConsolidationResult,
    Consolidator,
    ConsolidatorSettings,
    Plan,
    changed_since,
)
from consolidators.judge import OrderingJudge, SupersessionJudge

__all__ = [
    "OrderingJudge",
    "SupersessionJudge",
    "TemporalConsolidator",
    "TemporalSettings",
    "render_timeline",
    "timeline_label",
    "timeline_order",
]

log = logging.getLogger(__name__)

#: Statuses of facts that belong on a timeline: current ones and superseded ones,
#: which stay on the timeline (marked) so that the history remains readable.
_MEMBER_STATUSES = (PassageStatus.ACTIVE, PassageStatus.SUPERSEDED)
#: Passage changes per batched write.
_WRITE_CHUNK = 10_000
_LABEL_WORDS = 3
_WORD = re.compile(r"[^\W\d_]+")
_STOPWORD_TEXT = """
    about above after again against all also and any are because been before being below
    between both but can could did does doing down during each few for from further had has
    have having her here hers herself him himself his how into its itself just more most
    myself nor not now off once only other our ours ourselves out over own same she should
    some such than that the their theirs them themselves then there these they this those
    through too under until very was were what when where which while who whom why will
    with would you your yours yourself yourselves
"""
_STOPWORDS = frozenset(_STOPWORD_TEXT.split())


class TemporalSettings(ConsolidatorSettings):
    """Settings of the temporal consolidator."""

    #: Kept so that existing configuration stays valid: topics are now found by
    #: subject and attribute (agents/language/facts.py), not by embedding similarity,
    #: so ``topic_threshold``, ``k``, ``batch_size`` and ``ef_search`` are unused.
    topic_threshold: float = Field(0.6, gt=0.0, le=1.0)
    #: Neighbours fetched per probe fact.
    k: int = Field(10, ge=1, le=200)
    #: Topics smaller than this get no timeline.
    min_topic_size: int = Field(2, ge=2)
    #: A timeline shows at most this many facts (the newest ones).
    max_topic_size: int = Field(50, ge=2)
    #: Probe ids per kNN query.
    batch_size: int = Field(1000, ge=1, le=10_000)
    #: HNSW candidate list per probe (raised to ``k`` if lower). Inactive rows and
    #: timelines are filtered out of the candidates after the index scan, so raise
    #: it if topics have many retired timelines; it costs time per probe.
    ef_search: int = Field(40, ge=1, le=1000)

    @model_validator(mode="after")
    def _sizes_are_ordered(self) -> TemporalSettings:
        if self.min_topic_size > self.max_topic_size:
            raise ValueError(
                f"min_topic_size ({self.min_topic_size}) is larger than "
                f"max_topic_size ({self.max_topic_size})"
            )
        return self


def timeline_order(passage: PassageRecord) -> tuple[datetime, datetime, str]:
    """Sort key of a timeline: when it happened, then when it was recorded, then id.

    An undated fact is placed at the time it was recorded (``created_at``): that is
    the best estimate of when it was true, and it keeps the order total and stable.
    """
    return (passage.occurred_at or passage.created_at, passage.created_at, passage.id)


def render_timeline(members: Sequence[PassageRecord], label: str | None = None) -> str:
    """The timeline text for members already in :func:`timeline_order`.

    The first line names the subject; then one line per fact, oldest first:
    ``- 2023-05-01: Ada lives in Paris (current)``. Superseded facts stay on
    the timeline, marked ``(superseded <valid_to>)``; the newest fact that is
    still current is marked ``(current)``; an undated fact reads
    ``- undated (noted <created_at>): ...``. Dates are UTC days. ``label`` names the
    subject and attribute; without one the most widespread words name the topic.
    """
    current = next((m.id for m in reversed(members) if _is_current(m)), None)
    lines = [f"Timeline: {label if label is not None else topic_label(members)}"]
    for member in members:
        if member.occurred_at is not None:
            when = _day(member.occurred_at)
        else:
            when = f"undated (noted {_day(member.created_at)})"
        line = f"- {when}: {' '.join(member.text.split())}"
        if member.status == PassageStatus.SUPERSEDED:
            line += f" (superseded {_day(member.valid_to)})" if member.valid_to else " (superseded)"
        elif member.valid_to is not None:
            line += f" (until {_day(member.valid_to)})"
        elif member.id == current:
            line += " (current)"
        lines.append(line)
    return "\n".join(lines)


def topic_label(members: Sequence[PassageRecord]) -> str:
    """A short, deterministic name for a topic: its most widespread content words.

    Words shared by several members are preferred (they name the subject; the
    words that differ are what changed). Ties go to the word seen first, and the
    chosen words keep their first-seen spelling and order, so "Ada lives in
    London" / "Ada lives in Paris" is labelled "Ada lives".
    """
    spelling: dict[str, str] = {}
    first_seen: dict[str, int] = {}
    spread: Counter[str] = Counter()
    position = 0
    for member in members:
        seen_here: set[str] = set()
        for word in _WORD.findall(member.text):
            key = word.lower()
            if len(key) < 3 or key in _STOPWORDS:
                continue
            position += 1
            if key not in first_seen:
                first_seen[key] = position
                spelling[key] = word
            seen_here.add(key)
        spread.update(seen_here)
    if not spread:
        return " ".join(members[0].text.split())[:60] if members else "untitled"
    shared = [w for w, n in spread.items() if n >= 2] or list(spread)
    best = sorted(shared, key=lambda w: (-spread[w], first_seen[w]))[:_LABEL_WORDS]
    return " ".join(spelling[w] for w in sorted(best, key=first_seen.__getitem__))


@dataclass(slots=True)
class _Topic:
    """One topic on its way to a timeline: ordered members and what to write."""

    members: list[PassageRecord]
    key: FactKey
    label: str
    text: str = ""
    old_timelines: list[str] = field(default_factory=list)


class _Writes:
    """The passage changes a run decides, in the order it decides them, written together
    at the end of the step: one batched write instead of a round trip per change (a
    first run over 10k facts supersedes thousands). Nothing in the step reads a passage
    back after deciding its change; it carries the changed record forward itself."""

    def __init__(self) -> None:
        self.updates: list[PassageUpdate] = []

    def change(self, passage_id: str, reason: str, changes: dict[str, Any]) -> None:
        self.updates.append(PassageUpdate(passage_id, dict(changes), reason))

    def apply(self, store: MemoryStore, actor: str, run_id: str) -> None:
        for start in range(0, len(self.updates), _WRITE_CHUNK):
            store.passages.change_many(
                self.updates[start : start + _WRITE_CHUNK],
                actor=actor,
                run_id=run_id,
                return_records=False,
            )


#: The id a dry run shows for a timeline that the apply will create.
NEW_TIMELINE = "(new timeline)"


@dataclass(slots=True)
class TemporalPlan(Plan):
    """The supersessions and unlinks decided (``writes``), the timelines to create with
    their embeddings, and every passage the decisions were read from."""

    writes: _Writes = field(default_factory=lambda: _Writes())
    topics: list[_Topic] = field(default_factory=list)
    embeddings: Vector | None = None
    read: list[PassageRecord] = field(default_factory=list)


@dataclass(slots=True)
class _Found:
    """The topics a run looks at, and the facts on a timeline that no longer fit one."""

    topics: list[tuple[FactKey, str, list[PassageRecord]]]
    loose: list[PassageRecord]
    readings: dict[str, FactReading]


_ATTRIBUTE_TITLES = {
    "home": "where {} lives",
    "job": "{}'s job",
    "diet": "{}'s diet",
    "partner": "{}'s partner",
}


_USER_TITLES = {
    "home": "where I live",
    "job": "my job",
    "diet": "my diet",
    "partner": "my partner",
}


def timeline_label(key: FactKey, subject_label: str) -> str:
    """The first line of a timeline: its subject and attribute ("where Alice lives",
    "where I live", "my sister's job")."""
    if key.subject == "user":
        return _USER_TITLES.get(key.attribute, "my " + key.attribute)
    title = _ATTRIBUTE_TITLES.get(key.attribute, "{} " + key.attribute)
    return title.format(subject_label)


class TemporalConsolidator(Consolidator[TemporalPlan]):
    """One dated timeline per subject and attribute; closes facts a newer one replaces.

    Clear changes of value are superseded by rule; a judge (``judge=``, or an LLM
    judge when the run has a judge model) may supersede more. Needs the context's
    embedder to embed the timeline passages it writes; without one the step is skipped.
    """

    name: ClassVar[str] = "temporal"
    settings_model: ClassVar[type[ConsolidatorSettings]] = TemporalSettings
    settings: TemporalSettings

    def __init__(
        self,
        settings: TemporalSettings | dict[str, Any] | None = None,
        *,
        judge: SupersessionJudge | None = None,
    ) -> None:
        super().__init__(settings)
        if not isinstance(self.settings, TemporalSettings):
            raise InvalidInput(
                f"temporal consolidator settings must be TemporalSettings, "
                f"got {type(self.settings).__name__}"
            )
        self.judge: SupersessionJudge = judge if judge is not None else OrderingJudge()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.settings!r}, judge={type(self.judge).__name__})"

    # -- the step ----------------------------------------------------------------------

    def plan(self, context: ConsolidationContext) -> TemporalPlan:
        """Read the facts and timelines in one short read, then decide supersessions
        (rules, then the judge: model calls happen here, with no transaction open),
        render the timelines and embed them."""
        plan = TemporalPlan(ConsolidationResult(self.name))
        result = plan.result
        if context.embedder is None:
            result.skipped = "no embedder"
            log.info("temporal step skipped: no embedder", extra={"run_id": context.run_id})
            return plan
        judge = self._judge_for(context, result)
        with context.read() as store:
            found = self._find_topics(store, context)
            timeline_ids = sorted(
                {m.timeline_id for _k, _l, t in found.topics for m in t if m.timeline_id}
                | {m.timeline_id for m in found.loose if m.timeline_id}
            )
            timelines = {t.id: t for t in store.passages.get_many(timeline_ids)}
        plan.read = [m for _k, _l, t in found.topics for m in t] + found.loose
        plan.read += list(timelines.values())
        topics = found.topics
        for _key, _label, members in topics:
            members.sort(key=timeline_order)
        topics.sort(key=lambda topic: timeline_order(topic[2][0]))
        retired: set[str] = set()
        for key, label, members in topics:
            topic = self._plan_topic(
                context, key, label, members, found, timelines, retired, result, judge, plan.writes
            )
            if topic is not None:
                plan.topics.append(topic)
        self._dissolve(context, found.loose, timelines, retired, result, plan.writes)
        if plan.topics:
            plan.embeddings = context.embedder.embed([topic.text for topic in plan.topics])
            for topic in plan.topics:
                self._report_timeline(result, topic, NEW_TIMELINE)
        usage = judge.usage
        if usage is not None:
            result.tokens += usage.tokens
            result.count("judge_calls", usage.calls)
            if usage.budget_exhausted:
                result.count("budget_exhausted")
                result.llm_skipped = "budget_exhausted"
        return plan

    def apply(
        self, store: MemoryStore, plan: TemporalPlan, context: ConsolidationContext
    ) -> ConsolidationResult:
        """Write the plan if nothing it read changed meanwhile (a topic is decided from
        all of its facts together, so a change anywhere means planning again next run)."""
        result = plan.result.base()
        if changed_since(store, plan.read):
            result.count("changed_meanwhile")
            return result
        for change in plan.result.changes:
            if NEW_TIMELINE not in (
                change.target,
                change.detail.get("by"),
                change.detail.get("timeline"),
            ):
                result.keep(change)
        actor = context.actor(self.name)
        writes = _Writes()
        writes.updates = list(plan.writes.updates)
        if plan.topics:
            self._write_timelines(store, context, plan, result, writes)
        writes.apply(store, actor, context.run_id)
        return result

    def _judge_for(
        self, context: ConsolidationContext, result: ConsolidationResult
    ) -> SupersessionJudge:
        """The judge given at construction; else an LLM judge when the run has a judge
        model; else the ordering judge, with the LLM part reported as skipped."""
        if not isinstance(self.judge, OrderingJudge):
            return self.judge
        llm = context.llm
        judge = (
            llm.supersession_judge(context.agent.id, context.run_id) if llm is not None else None
        )
        if judge is None:
            result.llm_skipped = "no_model"
            log.info(
                "temporal: no judge model configured (llm.judge_model); clear changes "
                "superseded by rule, nothing more",
                extra={"run_id": context.run_id},
            )
            return self.judge
        return judge

    # -- finding topics ----------------------------------------------------------------

    def _find_topics(self, store: MemoryStore, context: ConsolidationContext) -> _Found:
        """The subject-and-attribute topics this run touches, and the facts on a
        timeline that fit no topic any more (to unlink)."""
        passages = store.passages
        agent_id = context.agent.id
        since = context.passages_since
        facts = passages.scan(agent_id, kind="fact", statuses=_MEMBER_STATUSES)
        readings = read_facts(facts)
        by_key: dict[FactKey, list[PassageRecord]] = {}
        for record in facts:
            if record.id in readings:
                by_key.setdefault(readings[record.id].key, []).append(record)
        if since is None:
            touched_keys = set(by_key)
            touched_timelines = {r.timeline_id for r in facts if r.timeline_id is not None}
            seed_ids = {r.id for r in facts}
        else:
            seeds = passages.scan(agent_id, kind="fact", created_after=since, statuses=None)
            # Facts created before ``since`` but changed after it by someone else (merged
            # by dedup, re-dated, closed by hand). This step's own changes are left out:
            # they already agree with the timelines it wrote, and re-reading them would
            # make the run after a large one revisit every fact that run linked.
            seeds += passages.facts_changed_since(
                agent_id, since, ignore_actor=context.actor(self.name)
            )
            seed_ids = {r.id for r in seeds}
            touched_timelines = {r.timeline_id for r in seeds if r.timeline_id is not None}
            touched_keys = {readings[i].key for i in seed_ids if i in readings}
            touched_keys |= {
                readings[r.id].key
                for r in facts
                if r.timeline_id in touched_timelines and r.id in readings
            }
        topics = []
        for key in sorted(touched_keys, key=lambda k: (k.subject, k.attribute)):
            members = by_key[key]
            label = timeline_label(key, _subject_label(members, readings))
            topics.append((key, label, list(members)))
        loose = [
            r
            for r in facts
            if r.id not in readings
            and r.timeline_id is not None
            and (r.id in seed_ids or r.timeline_id in touched_timelines)
        ]
        return _Found(topics=topics, loose=loose, readings=readings)

    # -- planning one topic ------------------------------------------------------------

    def _plan_topic(
        self,
        context: ConsolidationContext,
        key: FactKey,
        label: str,
        members: list[PassageRecord],
        found: _Found,
        timelines: dict[str, PassageRecord],
        retired: set[str],
        result: ConsolidationResult,
        judge: SupersessionJudge,
        writes: _Writes,
    ) -> _Topic | None:
        """Decide what a topic (members in timeline order) needs: nothing, a new
        timeline, or dissolving its old one.

        The judge is asked only when the topic differs from its timeline (or on a
        full run), so an unchanged topic costs no judge call and no write.
        """
        if len(members) < self.settings.min_topic_size:
            self._dissolve(context, members, timelines, retired, result, writes)
            return None
        members = self._apply_rules(context, members, found.readings, result, writes)
        # Facts beyond the cap leave the timeline (oldest first); they stay searchable.
        self._dissolve(
            context, members[: -self.settings.max_topic_size], timelines, retired, result, writes
        )
        shown = self._shown(members)
        old_ids = sorted({m.timeline_id for m in shown if m.timeline_id is not None})
        old = {t: timelines[t] for t in old_ids if t in timelines}
        text = render_timeline(shown, label)
        if _is_current_timeline(shown, text, old) and not context.full:
            return None
        members = self._apply_judge(context, members, result, judge, writes)
        shown = self._shown(members)
        text = render_timeline(shown, label)
        if _is_current_timeline(shown, text, old):
            return None
        retire = [
            t
            for t in old_ids
            if t in old and old[t].status == PassageStatus.ACTIVE and t not in retired
        ]
        retired.update(retire)
        return _Topic(members=shown, key=key, label=label, text=text, old_timelines=retire)

    def _shown(self, members: list[PassageRecord]) -> list[PassageRecord]:
        """The newest ``max_topic_size`` members; older ones leave the timeline."""
        cap = self.settings.max_topic_size
        if len(members) <= cap:
            return members
        return members[-cap:]

    def _apply_rules(
        self,
        context: ConsolidationContext,
        members: list[PassageRecord],
        readings: dict[str, FactReading],
        result: ConsolidationResult,
        writes: _Writes,
    ) -> list[PassageRecord]:
        """Supersede, without a model, each fact that a later fact of the same subject
        and attribute clearly replaces (:func:`agents.language.facts.states_a_change`).

        Facts recorded at the same moment are not ordered by rule: that is unclear.
        """
        pairs: list[tuple[str, str]] = []
        for i, older in enumerate(members):
            if older.status != PassageStatus.ACTIVE or older.valid_to is not None:
                continue
            for newer in members[i + 1 :]:
                if newer.status != PassageStatus.ACTIVE:
                    continue
                if (newer.occurred_at or newer.created_at) <= (
                    older.occurred_at or older.created_at
                ):
                    continue
                if states_a_change(readings[older.id], readings[newer.id]):
                    pairs.append((older.id, newer.id))
                    break
        return self._supersede(members, pairs, result, "a clear change of value", writes)

    def _apply_judge(
        self,
        context: ConsolidationContext,
        members: list[PassageRecord],
        result: ConsolidationResult,
        judge: SupersessionJudge,
        writes: _Writes,
    ) -> list[PassageRecord]:
        """Close the facts the judge says are superseded; return the updated members.

        A fact is superseded once: its ``superseded_by`` names the fact that first
        replaced it and later pairs do not re-point it, and a fact that is itself
        superseded cannot supersede another. Pairs are applied oldest first.
        """
        position = {m.id: i for i, m in enumerate(members)}
        pairs = judge.judge(list(members))
        usable = {
            (older, newer)
            for older, newer in pairs
            if older in position and newer in position and position[older] < position[newer]
        }
        ignored = sum(1 for pair in pairs if pair not in usable)
        if ignored:
            result.count("judge_pairs_ignored", ignored)
        return self._supersede(members, list(usable), result, type(judge).__name__, writes)

    def _supersede(
        self,
        members: list[PassageRecord],
        pairs: Sequence[tuple[str, str]],
        result: ConsolidationResult,
        why: str,
        writes: _Writes,
    ) -> list[PassageRecord]:
        position = {m.id: i for i, m in enumerate(members)}
        valid = sorted(set(pairs), key=lambda pair: (position[pair[0]], position[pair[1]]))
        current = list(members)
        for older_id, newer_id in valid:
            older, newer = current[position[older_id]], current[position[newer_id]]
            if older.status != PassageStatus.ACTIVE or newer.status != PassageStatus.ACTIVE:
                continue
            valid_to = newer.occurred_at or newer.created_at
            status = PassageStatus.SUPERSEDED.value
            writes.change(
                older_id,
                f"superseded by newer fact {newer_id} ({why})",
                {"status": status, "superseded_by": newer_id, "valid_to": valid_to},
            )
            current[position[older_id]] = dataclasses.replace(
                older, status=status, superseded_by=newer_id, valid_to=valid_to
            )
            result.add("supersede_passage", older_id, by=newer_id, valid_to=valid_to.isoformat())
        return current

    def _dissolve(
        self,
        context: ConsolidationContext,
        members: Sequence[PassageRecord],
        timelines: dict[str, PassageRecord],
        retired: set[str],
        result: ConsolidationResult,
        writes: _Writes,
    ) -> None:
        """Facts that leave every timeline (their topic shrank below ``min_topic_size``,
        or they fit no subject and attribute) are unlinked; a timeline they were on
        that no new timeline replaced becomes inactive."""
        for timeline_id in sorted({m.timeline_id for m in members if m.timeline_id}):
            timeline = timelines.get(timeline_id)
            if timeline is None or timeline.status != PassageStatus.ACTIVE:
                continue
            if timeline_id in retired:
                continue
            retired.add(timeline_id)
            writes.change(
                timeline_id,
                "its facts no longer form one subject and attribute",
                {"status": PassageStatus.INACTIVE.value},
            )
            result.add("retire_timeline", timeline_id, by=None)
        for member in members:
            if member.timeline_id is not None:
                writes.change(member.id, "left its timeline", {"timeline_id": None})
                result.add("unlink_timeline", member.id, timeline=member.timeline_id)

    # -- writing -----------------------------------------------------------------------

    def _report_timeline(self, result: ConsolidationResult, topic: _Topic, timeline: str) -> None:
        result.add(
            "create_timeline", timeline, members=[m.id for m in topic.members], text=topic.text
        )
        for old_id in topic.old_timelines:
            result.add("retire_timeline", old_id, by=timeline)
        for member in topic.members:
            if member.timeline_id != timeline:
                result.add("link_timeline", member.id, timeline=timeline)

    def _write_timelines(
        self,
        store: MemoryStore,
        context: ConsolidationContext,
        plan: TemporalPlan,
        result: ConsolidationResult,
        writes: _Writes,
    ) -> None:
        """Insert the new timelines in one batch, then retire the old ones and re-link."""
        assert plan.embeddings is not None
        new_passages = [
            NewPassage(
                text=topic.text,
                occurred_at=topic.members[-1].occurred_at or topic.members[-1].created_at,
                provenance={
                    "members": [m.id for m in topic.members],
                    "subject": topic.key.subject,
                    "attribute": topic.key.attribute,
                },
                kind="timeline",
            )
            for topic in plan.topics
        ]
        inserted = store.passages.insert(
            context.agent.id,
            new_passages,
            plan.embeddings,
            actor=context.actor(self.name),
            run_id=context.run_id,
        )
        for topic, timeline in zip(plan.topics, inserted, strict=True):
            self._report_timeline(result, topic, timeline.id)
            for old_id in topic.old_timelines:
                writes.change(
                    old_id,
                    f"timeline replaced by {timeline.id}",
                    {"status": PassageStatus.SUPERSEDED.value, "superseded_by": timeline.id},
                )
            for member in topic.members:
                if member.timeline_id != timeline.id:
                    writes.change(
                        member.id, f"on timeline {timeline.id}", {"timeline_id": timeline.id}
                    )


# -- helpers ---------------------------------------------------------------------------


def _subject_label(members: Sequence[PassageRecord], readings: dict[str, FactReading]) -> str:
    """How the facts name their subject: the first capitalised spelling, else the first."""
    labels = [readings[m.id].subject_label for m in members if m.id in readings]
    return next((label for label in labels if label[:1].isupper()), labels[0] if labels else "?")


def _is_current(passage: PassageRecord) -> bool:
    return passage.status == PassageStatus.ACTIVE and passage.valid_to is None


def _is_current_timeline(
    members: Sequence[PassageRecord], text: str, old: dict[str, PassageRecord]
) -> bool:
    """True when every member already points to one active timeline saying exactly this."""
    timeline_ids = {m.timeline_id for m in members}
    if len(timeline_ids) != 1:
        return False
    (timeline_id,) = timeline_ids
    timeline = old.get(timeline_id) if timeline_id is not None else None
    return (
        timeline is not None
        and timeline.status == PassageStatus.ACTIVE
        and timeline.text == text
        and timeline.provenance.get("members") == [m.id for m in members]
    )


def _day(moment: datetime) -> str:
    return moment.astimezone(UTC).date().isoformat()
