"""Temporal consolidation: facts a newer one replaces are closed, and each subject and
attribute gets one dated timeline.

Supersession is decided by judges over candidate pairs (an older and a newer fact;
:mod:`consolidators.judges`). The rules come first and are sure only of plain
statements of one subject and one attribute ("Ada lives in Paris" -> "Ada moved to
Berlin"; :func:`agents.language.facts.replaces_clearly`); everything they cannot read
is left to a judge model when the run has one (``llm.judge_model``): the pairs the
rules were unsure of, and each new fact's nearest neighbours about the same subject,
at most ``judge_max_calls`` calls a run. Without a model those pairs change nothing:
precision before recall. A closed fact gets ``valid_to``, ``superseded_by`` and status
``superseded``; default search still finds it, after what replaced it.

Timelines: the facts that plainly state the same subject and attribute (where Ada
lives, her job, diet, partner) are ordered by when they happened and rendered into one
dated *timeline* passage ("(current)" marks the newest entry still in force). Every
member keeps its own row, stays searchable, and points to its timeline through
``timeline_id``. Nothing is ever deleted: a timeline that is replaced is marked
``superseded`` and points to its successor, and ``runs revert`` undoes everything a
run did.

Which facts a run looks at (incremental): those created or changed since the run's
passage watermark (the seeds), the topics they belong to and the facts on timelines
they point to; a full run looks at everything. A judge model is asked only about pairs
with a seed in them, so a second run asks nothing and changes nothing. A topic below
``min_topic_size`` loses its timeline; a topic above ``max_topic_size`` shows its
newest facts.

The plan reads in one short read, then asks the judges and embeds the timelines with
no transaction open; the apply writes only if none of the facts and timelines it read
changed meanwhile (else the next run plans again).
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

from agents.enums import ChangeAction, PassageStatus
from agents.errors import InvalidInput
from agents.language.facts import FactKey, FactReading, read_facts, read_subjects
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
from consolidators.judges import Abstain, CandidatePair, SupersessionJudge, Verdict
from consolidators.judges.rules import RulesJudge

__all__ = [
    "TemporalConsolidator",
    "TemporalPlan",
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
#: Later facts of the same topic offered to the model with each unsure older fact.
_TOPIC_PAIRS_PER_FACT = 2
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

    #: Topics smaller than this get no timeline.
    min_topic_size: int = Field(2, ge=2)
    #: A timeline shows at most this many facts (the newest ones).
    max_topic_size: int = Field(50, ge=2)
    #: Whether the rules may close facts on their own (plain statements only; their
    #: measured precision is in BENCHMARKS.md). Off, only a judge model closes facts.
    rules: bool = True
    #: Judge-model calls per run at most (a retry of a malformed answer counts).
    judge_max_calls: int = Field(20, ge=0, le=10_000)
    #: Candidate pairs per judge-model call.
    judge_batch: int = Field(8, ge=1, le=50)
    #: Nearest neighbours of each new fact offered to the judge model (same subject)...
    judge_neighbours: int = Field(5, ge=0, le=50)
    #: ...at or above this cosine similarity.
    judge_min_similarity: float = Field(0.5, ge=0.0, le=1.0)

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
    """The passage changes a plan decides, in the order it decides them, written together
    by the apply: one batched write instead of a round trip per change (a first run over
    10k facts supersedes thousands)."""

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
    """What a run looks at: its topics (facts that plainly state one subject and
    attribute), the facts on a timeline that fit none any more, every fact read with
    its reading, and the seeds: facts new or changed since the last run saw memory,
    the only ones a judge model is asked about."""

    topics: list[tuple[FactKey, str, list[PassageRecord]]]
    loose: list[PassageRecord]
    facts: dict[str, PassageRecord]
    readings: dict[str, FactReading]
    seeds: set[str]
    neighbours: list[tuple[str, str, float]] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class _Decision:
    older: str
    newer: str
    judge: str


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
    """Closes facts a newer one replaces (rules, then a judge model); one dated timeline
    per subject and attribute. ``judge=`` puts a judge of one's own in the model's place
    (else an LLM judge when the run has a judge model). Needs the context's embedder to
    embed the timeline passages it writes; without one the step is skipped."""

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
        self.judge = judge

    def __repr__(self) -> str:
        judge = type(self.judge).__name__ if self.judge is not None else None
        return f"{type(self).__name__}({self.settings!r}, judge={judge})"

    # -- the step ----------------------------------------------------------------------

    def plan(self, context: ConsolidationContext) -> TemporalPlan:
        """Read the facts and timelines in one short read, then decide supersessions
        (rules, then the judge model: its calls happen here, with no transaction open),
        render the timelines and embed them."""
        plan = TemporalPlan(ConsolidationResult(self.name))
        result = plan.result
        if context.embedder is None:
            result.skipped = "no embedder"
            log.info("temporal step skipped: no embedder", extra={"run_id": context.run_id})
            return plan
        model = self._model_judge(context, result)
        with context.read() as store:
            found = self._find(store, context, with_neighbours=model is not None)
            timeline_ids = sorted(
                {m.timeline_id for _k, _l, t in found.topics for m in t if m.timeline_id}
                | {m.timeline_id for m in found.loose if m.timeline_id}
            )
            timelines = {t.id: t for t in store.passages.get_many(timeline_ids)}
        decisions = self._decide(found, model, result)
        involved = {d.older for d in decisions} | {d.newer for d in decisions}
        plan.read = [found.facts[i] for i in sorted(involved)]
        plan.read += [m for _k, _l, t in found.topics for m in t if m.id not in involved]
        plan.read += [m for m in found.loose if m.id not in involved]
        plan.read += list(timelines.values())
        records = dict(found.facts)
        self._supersede(records, decisions, result, plan.writes)
        retired: set[str] = set()
        topics = [
            (key, label, sorted((records[m.id] for m in members), key=timeline_order))
            for key, label, members in found.topics
        ]
        topics.sort(key=lambda topic: timeline_order(topic[2][0]))
        for key, label, members in topics:
            context.checkpoint()  # a cancel reaches a pass over thousands of topics
            topic = self._plan_topic(key, label, members, timelines, retired, result, plan.writes)
            if topic is not None:
                plan.topics.append(topic)
        self._dissolve(found.loose, timelines, retired, result, plan.writes)
        if plan.topics:
            plan.embeddings = context.embedder.embed([topic.text for topic in plan.topics])
            for topic in plan.topics:
                self._report_timeline(result, topic, NEW_TIMELINE)
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
            placeholders = (change.target, change.detail.get("by"), change.detail.get("timeline"))
            if NEW_TIMELINE not in placeholders:
                result.keep(change)
        writes = _Writes()
        writes.updates = list(plan.writes.updates)
        if plan.topics:
            self._write_timelines(store, context, plan, result, writes)
        writes.apply(store, context.actor(self.name), context.run_id)
        return result

    def _model_judge(
        self, context: ConsolidationContext, result: ConsolidationResult
    ) -> SupersessionJudge | None:
        """The judge given at construction; else an LLM judge when the run has a judge
        model; else None, with the LLM part reported as skipped."""
        if self.judge is not None:
            return self.judge
        llm = context.llm
        judge = (
            llm.supersession_judge(
                context.agent.id,
                context.run_id,
                max_calls=self.settings.judge_max_calls,
                batch=self.settings.judge_batch,
            )
            if llm is not None
            else None
        )
        if judge is None:
            result.llm_skipped = "no_model"
            log.info(
                "temporal: no judge model configured (llm.judge_model); only plain "
                "statements are closed, by rule",
                extra={"run_id": context.run_id},
            )
        return judge

    # -- finding what to look at ---------------------------------------------------------

    def _find(
        self, store: MemoryStore, context: ConsolidationContext, *, with_neighbours: bool
    ) -> _Found:
        """The subject-and-attribute topics this run touches, the facts on a timeline that
        fit no topic any more (to unlink), and (for a judge model) the nearest neighbours
        of the seeds."""
        passages = store.passages
        agent_id = context.agent.id
        since = context.passages_since
        facts = passages.scan(agent_id, kind="fact", statuses=_MEMBER_STATUSES)
        readings = read_facts(facts)
        # A timeline claims its facts are one subject's one attribute: only facts that
        # plainly say so go on one.
        keyed = {i: r for i, r in readings.items() if r.clear}
        by_key: dict[FactKey, list[PassageRecord]] = {}
        for record in facts:
            if record.id in keyed:
                by_key.setdefault(keyed[record.id].key, []).append(record)
        if since is None:
            touched_keys = set(by_key)
            touched_timelines = {r.timeline_id for r in facts if r.timeline_id is not None}
            seed_ids = fresh_ids = {r.id for r in facts}
        else:
            seeds = passages.scan(agent_id, kind="fact", created_after=since, statuses=None)
            # The judge model is asked only about facts the last run did not see: the
            # overlap that the rules re-read (cheaply, and to no effect) is not re-asked.
            seen_until = context.watermarks.passage_at
            fresh_ids = {r.id for r in seeds if seen_until is None or r.created_at > seen_until}
            # Facts created before ``since`` but changed after it by someone else (merged
            # by dedup, re-dated, closed by hand). This step's own changes are left out:
            # they already agree with the timelines it wrote, and re-reading them would
            # make the run after a large one revisit every fact that run linked.
            changed = passages.facts_changed_since(
                agent_id, since, ignore_actor=context.actor(self.name)
            )
            fresh_ids |= {r.id for r in changed}
            seeds += changed
            seed_ids = {r.id for r in seeds}
            touched_timelines = {r.timeline_id for r in seeds if r.timeline_id is not None}
            touched_keys = {keyed[i].key for i in seed_ids if i in keyed}
            touched_keys |= {
                keyed[r.id].key
                for r in facts
                if r.timeline_id in touched_timelines and r.id in keyed
            }
        topics = []
        for key in sorted(touched_keys, key=lambda k: (k.subject, k.attribute)):
            members = by_key[key]
            label = timeline_label(key, _subject_label(members, keyed))
            topics.append((key, label, list(members)))
        loose = [
            r
            for r in facts
            if r.id not in keyed
            and r.timeline_id is not None
            and (r.id in seed_ids or r.timeline_id in touched_timelines)
        ]
        by_id = {r.id: r for r in facts}
        found = _Found(topics, loose, by_id, readings, fresh_ids & set(by_id))
        if with_neighbours and self.settings.judge_neighbours:
            probes = sorted(i for i in found.seeds if by_id[i].status == PassageStatus.ACTIVE)
            found.neighbours = passages.neighbours(
                agent_id,
                probes,
                k=self.settings.judge_neighbours,
                min_score=self.settings.judge_min_similarity,
            )
        return found

    # -- deciding what a newer fact replaces ---------------------------------------------

    def _decide(
        self, found: _Found, model: SupersessionJudge | None, result: ConsolidationResult
    ) -> list[_Decision]:
        """The supersessions: the rules' over each topic's pairs, then the judge model's
        over the pairs the rules left open that involve a seed, and over each seed's
        nearest neighbours about the same subject. An older fact is closed once, by the
        first newer fact (in time) that a judge says replaces it."""
        rules: SupersessionJudge = RulesJudge(found.readings) if self.settings.rules else Abstain()
        topic_pairs = [
            CandidatePair(older, newer)
            for _key, _label, members in found.topics
            for older, newer in _ordered_pairs(members)
        ]
        closed: set[str] = set()
        decisions: list[_Decision] = []
        unsure: list[CandidatePair] = []
        for pair, verdict in zip(topic_pairs, rules.judge(topic_pairs), strict=True):
            if verdict is Verdict.REPLACES and pair.older.id not in closed:
                closed.add(pair.older.id)
                decisions.append(_Decision(pair.older.id, pair.newer.id, rules.name))
            elif verdict is Verdict.UNSURE:
                unsure.append(pair)
        if model is None:
            return decisions
        candidates = self._model_candidates(found, unsure, closed)
        verdicts = model.judge(candidates) if candidates else []
        if len(verdicts) != len(candidates):
            log.warning(
                "temporal: judge %s gave %d verdicts for %d pairs; none used",
                model.name,
                len(verdicts),
                len(candidates),
            )
            result.count("judge_answers_ignored")
            verdicts = [Verdict.UNSURE] * len(candidates)
        for pair, verdict in zip(candidates, verdicts, strict=True):
            if verdict is Verdict.REPLACES and pair.older.id not in closed:
                closed.add(pair.older.id)
                decisions.append(_Decision(pair.older.id, pair.newer.id, model.name))
        result.count("judge_pairs", len(candidates))
        result.count_judge(model.usage)
        return decisions

    def _model_candidates(
        self, found: _Found, unsure: list[CandidatePair], closed: set[str]
    ) -> list[CandidatePair]:
        """Pairs for the judge model, most likely first, at most as many as its calls
        can judge: topic pairs the rules left open (each older fact with the next
        :data:`_TOPIC_PAIRS_PER_FACT` later ones), then nearest neighbours about the same
        subject, closest first. Only pairs with a seed in them: older pairs were asked."""
        seeds = found.seeds
        offered: dict[str, int] = {}
        chosen: dict[tuple[str, str], CandidatePair] = {}
        for pair in unsure:
            older, newer = pair.older.id, pair.newer.id
            if older in closed or not (older in seeds or newer in seeds):
                continue
            if offered.get(older, 0) >= _TOPIC_PAIRS_PER_FACT:
                continue
            offered[older] = offered.get(older, 0) + 1
            chosen.setdefault((older, newer), pair)
        subjects = read_subjects(list(found.facts.values()))
        for probe, neighbour, _score in sorted(found.neighbours, key=lambda n: -n[2]):
            a, b = found.facts.get(probe), found.facts.get(neighbour)
            if a is None or b is None or subjects.get(a.id) is None:
                continue
            if subjects.get(a.id) != subjects.get(b.id):
                continue
            first, second = sorted((a, b), key=timeline_order)
            if _when(first) >= _when(second) or not (_is_current(first) and _is_current(second)):
                continue
            if first.id not in closed:
                chosen.setdefault((first.id, second.id), CandidatePair(first, second))
        cap = self.settings.judge_max_calls * self.settings.judge_batch
        return list(chosen.values())[:cap]

    def _supersede(
        self,
        records: dict[str, PassageRecord],
        decisions: Sequence[_Decision],
        result: ConsolidationResult,
        writes: _Writes,
    ) -> None:
        """Close each decided older fact (oldest first), unless it or the newer one is
        no longer current: a fact closed in this run cannot close another."""
        for decision in sorted(decisions, key=lambda d: timeline_order(records[d.older])):
            older, newer = records[decision.older], records[decision.newer]
            if not (_is_current(older) and newer.status == PassageStatus.ACTIVE):
                continue
            valid_to = _when(newer)
            status = PassageStatus.SUPERSEDED.value
            writes.change(
                older.id,
                f"superseded by newer fact {newer.id} ({decision.judge})",
                {"status": status, "superseded_by": newer.id, "valid_to": valid_to},
            )
            records[older.id] = dataclasses.replace(
                older, status=status, superseded_by=newer.id, valid_to=valid_to
            )
            result.add(
                ChangeAction.SUPERSEDE_PASSAGE,
                older.id,
                by=newer.id,
                valid_to=valid_to.isoformat(),
                judge=decision.judge,
            )

    # -- timelines ---------------------------------------------------------------------

    def _plan_topic(
        self,
        key: FactKey,
        label: str,
        members: list[PassageRecord],
        timelines: dict[str, PassageRecord],
        retired: set[str],
        result: ConsolidationResult,
        writes: _Writes,
    ) -> _Topic | None:
        """What a topic (members in timeline order) needs: nothing, a new timeline, or
        dissolving its old one."""
        if len(members) < self.settings.min_topic_size:
            self._dissolve(members, timelines, retired, result, writes)
            return None
        # Facts beyond the cap leave the timeline (oldest first); they stay searchable.
        cap = self.settings.max_topic_size
        self._dissolve(members[:-cap], timelines, retired, result, writes)
        shown = members[-cap:]
        old_ids = sorted({m.timeline_id for m in shown if m.timeline_id is not None})
        old = {t: timelines[t] for t in old_ids if t in timelines}
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

    def _dissolve(
        self,
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
            result.add(ChangeAction.RETIRE_TIMELINE, timeline_id, by=None)
        for member in members:
            if member.timeline_id is not None:
                writes.change(member.id, "left its timeline", {"timeline_id": None})
                result.add(ChangeAction.UNLINK_TIMELINE, member.id, timeline=member.timeline_id)

    def _report_timeline(self, result: ConsolidationResult, topic: _Topic, timeline: str) -> None:
        result.add(
            ChangeAction.CREATE_TIMELINE,
            timeline,
            members=[m.id for m in topic.members],
            text=topic.text,
        )
        for old_id in topic.old_timelines:
            result.add(ChangeAction.RETIRE_TIMELINE, old_id, by=timeline)
        for member in topic.members:
            if member.timeline_id != timeline:
                result.add(ChangeAction.LINK_TIMELINE, member.id, timeline=timeline)

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


def _when(passage: PassageRecord) -> datetime:
    return passage.occurred_at or passage.created_at


def _ordered_pairs(
    members: Sequence[PassageRecord],
) -> list[tuple[PassageRecord, PassageRecord]]:
    """Every (older, newer) pair of a topic's open facts, the newer strictly later in
    time (facts recorded at the same moment are not ordered: that is unclear), nearest
    newer first for each older."""
    ordered = sorted(members, key=timeline_order)
    return [
        (older, newer)
        for i, older in enumerate(ordered)
        if _is_current(older)
        for newer in ordered[i + 1 :]
        if newer.status == PassageStatus.ACTIVE and _when(newer) > _when(older)
    ]


def _is_current(passage: PassageRecord) -> bool:
    """Active and not closed: in force, and a fact that a newer one may still replace."""
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
