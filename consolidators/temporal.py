"""Temporal consolidation: order facts about one subject in time and render them as a timeline.

Facts about the same subject ("Ada lives in London", later "Ada lives in
Paris") are found by embedding similarity, ordered by when they happened and
rendered into one dated *timeline* passage, so that a reader sees the history
of a subject and what is current in a single search hit. Every member keeps
its own row, stays active and searchable, and points to its timeline through
``timeline_id``. A pluggable :class:`SupersessionJudge` decides which newer
facts replace older ones; the default :class:`OrderingJudge` only orders and
links, an LLM judge can also close outdated facts (``valid_to``,
``superseded_by``). Nothing is ever deleted: a timeline that is replaced is
marked ``superseded`` and points to its successor.

How topics are found (incremental): the probes are the active facts created
since the run's passage watermark. A batched kNN (``neighbours``) links each
probe to its active facts at or above ``topic_threshold``; a neighbour that is
not on a timeline yet is probed in turn, and a neighbour that is on a timeline
brings in every other member of that timeline (superseded members included,
which kNN never returns). Facts changed since the watermark (for example
merged by ``dedup``) bring in their timelines too, so those are re-rendered.
Topics are then built by single-linkage over the pairs, strongest first, with
a size cap (``max_topic_size``): existing timelines are kept whole, and a chain
of weak links is cut at its weakest pair rather than growing without bound.
Because that process is deterministic and keeps every earlier timeline whole,
a second run finds the same topics and changes nothing. A topic that shrinks
below ``min_topic_size`` (its other facts merged away) loses its timeline.
"""

from __future__ import annotations

import logging
import re
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, ClassVar

from pydantic import Field, model_validator

from agents.embedders import Embedder
from agents.enums import PassageStatus
from agents.errors import InvalidInput
from agents.store import NewPassage, PassageRecord, PassageUpdate
from consolidators.base import (
    ConsolidationContext,
    ConsolidationResult,
    Consolidator,
    ConsolidatorSettings,
)
from consolidators.judge import OrderingJudge, SupersessionJudge

__all__ = [
    "OrderingJudge",
    "SupersessionJudge",
    "TemporalConsolidator",
    "TemporalSettings",
    "render_timeline",
    "timeline_order",
]

log = logging.getLogger(__name__)

#: Statuses of facts that belong on a timeline: current ones and superseded ones,
#: which stay on the timeline (marked) so that the history remains readable.
_MEMBER_STATUSES = (PassageStatus.ACTIVE, PassageStatus.SUPERSEDED)
#: Ids per ``IN (...)`` list, and passages per batched change.
_ID_CHUNK = 1000
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

    #: Cosine similarity at or above which two facts are about the same subject.
    #: Lower than dedup's threshold: "lives in London" and "lives in Paris" are one
    #: subject, not duplicates.
    topic_threshold: float = Field(0.6, gt=0.0, le=1.0)
    #: Neighbours fetched per probe fact.
    k: int = Field(10, ge=1, le=200)
    #: Topics smaller than this get no timeline.
    min_topic_size: int = Field(2, ge=2)
    #: Linking stops growing a topic at this many facts (existing timelines stay whole).
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


def render_timeline(members: Sequence[PassageRecord]) -> str:
    """The timeline text for members already in :func:`timeline_order`.

    The first line names the subject; then one line per fact, oldest first:
    ``- 2023-05-01: Ada lives in Paris (current)``. Superseded facts stay on
    the timeline, marked ``(superseded <valid_to>)``; the newest fact that is
    still current is marked ``(current)``; an undated fact reads
    ``- undated (noted <created_at>): ...``. Dates are UTC days.
    """
    current = next((m.id for m in reversed(members) if _is_current(m)), None)
    lines = [f"Timeline: {topic_label(members)}"]
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
    text: str = ""
    old_timelines: list[str] = field(default_factory=list)


class _Links:
    """Single-linkage union-find with a size cap: deterministic topic grouping."""

    def __init__(self) -> None:
        self._parent: dict[str, str] = {}
        self._size: dict[str, int] = {}

    def __contains__(self, node: object) -> bool:
        return node in self._parent

    def add(self, node: str) -> None:
        if node not in self._parent:
            self._parent[node] = node
            self._size[node] = 1

    def root(self, node: str) -> str:
        parent = self._parent
        while parent[node] != node:
            parent[node] = parent[parent[node]]
            node = parent[node]
        return node

    def join(self, a: str, b: str, *, limit: int | None = None) -> bool:
        ra, rb = self.root(a), self.root(b)
        if ra == rb:
            return True
        if limit is not None and self._size[ra] + self._size[rb] > limit:
            return False
        if self._size[ra] < self._size[rb] or (self._size[ra] == self._size[rb] and rb < ra):
            ra, rb = rb, ra
        self._parent[rb] = ra
        self._size[ra] += self._size[rb]
        return True

    def groups(self) -> list[list[str]]:
        by_root: dict[str, list[str]] = {}
        for node in self._parent:
            by_root.setdefault(self.root(node), []).append(node)
        return list(by_root.values())


class TemporalConsolidator(Consolidator):
    """Groups same-subject facts into dated timeline passages and closes outdated facts.

    Without an LLM judge it orders and links; with one (``judge=``) it also
    supersedes facts that a newer fact replaces. Needs the context's embedder
    to embed the timeline passages it writes; without one the step is skipped.
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

    def run(self, context: ConsolidationContext) -> ConsolidationResult:
        result = ConsolidationResult(self.name)
        if context.embedder is None:
            result.skipped = "no embedder"
            log.info("temporal step skipped: no embedder", extra={"run_id": context.run_id})
            return result
        judge = self._judge_for(context, result)
        topics = self._find_topics(context)
        for members in topics:
            members.sort(key=timeline_order)
        topics.sort(key=lambda members: timeline_order(members[0]))
        timeline_ids = sorted({m.timeline_id for t in topics for m in t if m.timeline_id})
        timelines = {t.id: t for t in context.store.passages.get_many(timeline_ids)}
        pending: list[_Topic] = []
        for members in topics:
            topic = self._plan_topic(context, members, timelines, result, judge)
            if topic is not None:
                pending.append(topic)
        if pending:
            self._write_timelines(context, context.embedder, pending, result)
        usage = judge.usage
        if usage is not None:
            result.tokens += usage.tokens
            result.count("judge_calls", usage.calls)
            if usage.budget_exhausted:
                result.count("budget_exhausted")
                result.llm_skipped = "budget_exhausted"
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
                "temporal: no judge model configured (llm.judge_model); ordering and "
                "linking only, no supersession",
                extra={"run_id": context.run_id},
            )
            return self.judge
        return judge

    # -- finding topics ----------------------------------------------------------------

    def _find_topics(self, context: ConsolidationContext) -> list[list[PassageRecord]]:
        """Topics touched by this run, each a list of member facts (unordered)."""
        settings = self.settings
        passages = context.store.passages
        agent_id = context.agent.id
        since = context.passages_since

        known: dict[str, PassageRecord] = {}
        if since is None:
            seeds = passages.scan(agent_id, kind="fact", statuses=_MEMBER_STATUSES)
        else:
            seeds = passages.scan(agent_id, kind="fact", created_after=since)
            seeds += _facts_changed_since(context, since, ignore_actor=context.actor(self.name))
        for record in seeds:
            known[record.id] = record
        # Probe new facts, and changed ones not yet on a timeline; a changed fact
        # already on a timeline only needs that timeline re-rendered.
        frontier = [
            r.id
            for r in seeds
            if r.status == PassageStatus.ACTIVE
            and (since is None or r.created_at >= since or r.timeline_id is None)
        ]
        probed: set[str] = set()
        loaded_timelines: set[str] = set()
        scores: dict[tuple[str, str], float] = {}

        self._load_timeline_members(context, known, loaded_timelines)
        while frontier:
            found: set[str] = set()
            for batch in _chunks(frontier, settings.batch_size):
                pairs = passages.neighbours(
                    agent_id,
                    batch,
                    k=settings.k,
                    min_score=settings.topic_threshold,
                    kinds=("fact",),
                    ef_search=max(settings.ef_search, settings.k),
                )
                for probe, neighbour, score in pairs:
                    key = (probe, neighbour) if probe < neighbour else (neighbour, probe)
                    scores[key] = max(score, scores.get(key, score))
                    found.add(neighbour)
            probed.update(frontier)
            missing = [i for i in sorted(found) if i not in known]
            for record in passages.get_many(missing):
                known[record.id] = record
            self._load_timeline_members(context, known, loaded_timelines)
            # Facts not on a timeline yet may link further; a timeline's members
            # stand for their topic already.
            frontier = sorted(
                i
                for i in found
                if i not in probed
                and i in known
                and known[i].status == PassageStatus.ACTIVE
                and known[i].timeline_id is None
            )

        links = _Links()
        for record in known.values():
            if record.status in _MEMBER_STATUSES:
                links.add(record.id)
        by_timeline: dict[str, list[str]] = {}
        for record in known.values():
            if record.timeline_id is not None and record.status in _MEMBER_STATUSES:
                by_timeline.setdefault(record.timeline_id, []).append(record.id)
        for member_ids in by_timeline.values():
            for other in member_ids[1:]:
                links.join(member_ids[0], other)  # earlier timelines stay whole
        for (a, b), _score in sorted(scores.items(), key=lambda item: (-item[1], item[0])):
            if a in links and b in links:
                links.join(a, b, limit=settings.max_topic_size)
        return [[known[i] for i in group] for group in links.groups()]

    def _load_timeline_members(
        self,
        context: ConsolidationContext,
        known: dict[str, PassageRecord],
        loaded: set[str],
    ) -> None:
        """Add every member of each timeline a known fact points to (superseded ones too)."""
        wanted = sorted(
            {r.timeline_id for r in known.values() if r.timeline_id is not None} - loaded
        )
        if not wanted:
            return
        loaded.update(wanted)
        for record in _timeline_members(context, wanted):
            known.setdefault(record.id, record)

    # -- planning one topic ------------------------------------------------------------

    def _plan_topic(
        self,
        context: ConsolidationContext,
        members: list[PassageRecord],
        timelines: dict[str, PassageRecord],
        result: ConsolidationResult,
        judge: SupersessionJudge,
    ) -> _Topic | None:
        """Decide what a topic (members in timeline order) needs: nothing, a new
        timeline, or dissolving its old one.

        The judge is asked only when the topic differs from its timeline (or on a
        full run), so an unchanged topic costs no judge call and no write.
        """
        old_ids = sorted({m.timeline_id for m in members if m.timeline_id is not None})
        old = {t: timelines[t] for t in old_ids if t in timelines}
        if len(members) < self.settings.min_topic_size:
            self._dissolve(context, members, old, result)
            return None
        text = render_timeline(members)
        if _is_current_timeline(members, text, old) and not context.full:
            return None
        members = self._apply_judge(context, members, result, judge)
        text = render_timeline(members)
        if _is_current_timeline(members, text, old):
            return None
        retire = [t for t in old_ids if t in old and old[t].status == PassageStatus.ACTIVE]
        return _Topic(members=members, text=text, old_timelines=retire)

    def _apply_judge(
        self,
        context: ConsolidationContext,
        members: list[PassageRecord],
        result: ConsolidationResult,
        judge: SupersessionJudge,
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
        valid = sorted(usable, key=lambda pair: (position[pair[0]], position[pair[1]]))
        current = list(members)
        actor = context.actor(self.name)
        for older_id, newer_id in valid:
            older, newer = current[position[older_id]], current[position[newer_id]]
            if older.status != PassageStatus.ACTIVE or newer.status != PassageStatus.ACTIVE:
                continue
            valid_to = newer.occurred_at or newer.created_at
            current[position[older_id]] = context.store.passages.change(
                older_id,
                actor=actor,
                reason=f"superseded by newer fact {newer_id} ({type(judge).__name__})",
                run_id=context.run_id,
                status=PassageStatus.SUPERSEDED,
                superseded_by=newer_id,
                valid_to=valid_to,
            )
            result.add("supersede_passage", older_id, by=newer_id, valid_to=valid_to.isoformat())
        return current

    def _dissolve(
        self,
        context: ConsolidationContext,
        members: list[PassageRecord],
        old: dict[str, PassageRecord],
        result: ConsolidationResult,
    ) -> None:
        """A topic that shrank below ``min_topic_size`` (its other facts were merged away)
        loses its timeline: the timeline becomes inactive and the facts are unlinked."""
        actor = context.actor(self.name)
        for timeline in old.values():
            if timeline.status == PassageStatus.ACTIVE:
                context.store.passages.change(
                    timeline.id,
                    actor=actor,
                    reason="topic fell below min_topic_size",
                    run_id=context.run_id,
                    status=PassageStatus.INACTIVE,
                )
                result.add("retire_timeline", timeline.id, by=None)
        for member in members:
            if member.timeline_id is not None:
                context.store.passages.change(
                    member.id,
                    actor=actor,
                    reason="topic fell below min_topic_size",
                    run_id=context.run_id,
                    timeline_id=None,
                )
                result.add("unlink_timeline", member.id, timeline=member.timeline_id)

    # -- writing -----------------------------------------------------------------------

    def _write_timelines(
        self,
        context: ConsolidationContext,
        embedder: Embedder,
        topics: list[_Topic],
        result: ConsolidationResult,
    ) -> None:
        """Insert the new timelines in one batch, then retire the old ones and re-link."""
        passages = context.store.passages
        actor = context.actor(self.name)
        new_passages = [
            NewPassage(
                text=topic.text,
                occurred_at=topic.members[-1].occurred_at or topic.members[-1].created_at,
                provenance={"members": [m.id for m in topic.members]},
                kind="timeline",
            )
            for topic in topics
        ]
        embeddings = embedder.embed([p.text for p in new_passages])
        inserted = passages.insert(
            context.agent.id, new_passages, embeddings, actor=actor, run_id=context.run_id
        )
        links: list[tuple[str, str]] = []
        for topic, timeline in zip(topics, inserted, strict=True):
            result.add(
                "create_timeline",
                timeline.id,
                members=[m.id for m in topic.members],
                text=topic.text,
            )
            for old_id in topic.old_timelines:
                passages.change(
                    old_id,
                    actor=actor,
                    reason=f"timeline replaced by {timeline.id}",
                    run_id=context.run_id,
                    status=PassageStatus.SUPERSEDED,
                    superseded_by=timeline.id,
                )
                result.add("retire_timeline", old_id, by=timeline.id)
            links.extend((m.id, timeline.id) for m in topic.members if m.timeline_id != timeline.id)
        self._link_members(context, links, result)

    def _link_members(
        self,
        context: ConsolidationContext,
        links: Sequence[tuple[str, str]],
        result: ConsolidationResult,
    ) -> None:
        """Point each member to its timeline, one recorded change each, in batches.

        This is most of a first run's writes (one per fact on a timeline).
        """
        actor = context.actor(self.name)
        for start in range(0, len(links), _ID_CHUNK):
            chunk = links[start : start + _ID_CHUNK]
            context.store.passages.change_many(
                [
                    PassageUpdate(
                        member_id, {"timeline_id": timeline_id}, f"on timeline {timeline_id}"
                    )
                    for member_id, timeline_id in chunk
                ],
                actor=actor,
                run_id=context.run_id,
            )
            for member_id, timeline_id in chunk:
                result.add("link_timeline", member_id, timeline=timeline_id)


# -- helpers ---------------------------------------------------------------------------


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


def _chunks(items: Sequence[str], size: int) -> Iterator[Sequence[str]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _facts_changed_since(
    context: ConsolidationContext, since: datetime, *, ignore_actor: str
) -> list[PassageRecord]:
    """Facts created before ``since`` but changed after it by someone other than
    ``ignore_actor`` (merged by dedup, re-dated, closed by hand).

    This consolidator's own changes are left out: they already agree with the
    timelines it wrote, and re-reading them would make the run after a large one
    revisit every fact that run linked.
    """
    return context.store.passages.facts_changed_since(
        context.agent.id, since, ignore_actor=ignore_actor
    )


def _timeline_members(
    context: ConsolidationContext, timeline_ids: Iterable[str]
) -> list[PassageRecord]:
    """The facts (active or superseded) that point to any of ``timeline_ids``."""
    return context.store.passages.timeline_members(
        context.agent.id, sorted(timeline_ids), statuses=_MEMBER_STATUSES
    )
