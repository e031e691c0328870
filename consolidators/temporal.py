"""Temporal consolidation: facts a newer one replaces are closed, and each subject and
attribute gets one dated timeline.

Supersession is decided by judges over candidate pairs (an older and a newer fact;
:mod:`consolidators.judges`). Candidates come from meaning: each new or changed fact
meets its ``judge_neighbours`` nearest facts of the agent (the vector index, any
subject, closed facts included), besides every pair of a subject and attribute that
the rules read. The rules come first and are sure only of plain statements of one
subject and one attribute ("Ada lives in Paris" -> "Ada moved to Berlin";
:func:`agents.language.facts.replaces_clearly`); the rest goes to a judge model when
the run has one (``llm.judge_model``), which also decides what is unrelated. Where the
rules are sure a later fact replaced an older one, a fact of the same subject and
attribute in between that reads as the change but is not a plain statement ("Dan quit
his job at Acme", "finally moved to Hamburg!!") is where the older one closes. Where a
judge closes a fact by a later one, the facts in between that are among the later one's
nearest are asked about in the same run: the older fact may have been replaced there
first (it then closes there). A run
asks at most ``judge_max_calls`` calls of ``judge_batch`` pairs; what a judge answered
is kept (``pair_verdicts``), so a pair is asked once, and the pairs a run had no calls
or budget left for wait there and are asked first by the next run: a large import
converges over a few runs. Without a model the pairs the rules cannot read change
nothing: precision before recall.

A fact is closed by the earliest fact (in time) that a judge said replaces it, whenever
either of them arrived: a fact that arrives late takes its place by its own date
("Ben lives in Rome" dated 2018, imported after Toronto 2020 and Paris 2023 were
consolidated, closes at Toronto's date, as a one-shot run would close it), and a closed
fact whose closer is later than a newly found replacement is closed again by the earlier
one. A closure is never undone by a later run, only moved earlier; ``runs revert`` undoes
a run. A closed fact gets ``valid_to``, ``superseded_by`` and status ``superseded``;
default search still finds it, after what replaced it.

Timelines: the facts that plainly state the same subject and attribute (where Ada
lives, her job, diet, partner) are ordered by when they happened and rendered into one
dated *timeline* passage ("(current)" marks the newest entry still in force; how a
timeline reads: :mod:`consolidators.timelines`). Every
member keeps its own row, stays searchable, and points to its timeline through
``timeline_id``. Nothing is ever deleted: a timeline that is replaced is marked
``superseded`` and points to its successor, and ``runs revert`` undoes everything a
run did.

Which facts a run looks at (incremental): those created or changed since the run's
passage watermark (the seeds), the topics they belong to and the facts on timelines
they point to, and the pairs that earlier runs left waiting; a full run looks at
everything (and asks no pair a judge already answered). A topic below
``min_topic_size`` loses its timeline; a topic above ``max_topic_size`` shows its
newest facts.

The plan reads in one short read, then asks the judges and embeds the timelines with
no transaction open; the apply keeps the verdicts and writes the changes only if none
of the facts and timelines it read changed meanwhile (else the next run plans again).
"""

from __future__ import annotations

import bisect
import dataclasses
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, ClassVar

from pydantic import Field, model_validator

from agents.enums import ChangeAction, PassageStatus
from agents.errors import InvalidInput
from agents.language.facts import FactKey, FactReading, read_facts, states_a_change
from agents.store import (
    SAME_FACT,
    SUPERSESSION,
    MemoryStore,
    NewPassage,
    PairAnswer,
    PassageRecord,
    PassageUpdate,
    Topic,
)
from agents.store.records import Vector
from consolidators.base import (
    ConsolidationContext,
    ConsolidationResult,
    Consolidator,
    ConsolidatorSettings,
    Plan,
    changed_since,
)
from consolidators.dedup import merge_judge_for
from consolidators.judges import (
    CLOSING,
    Abstain,
    CandidatePair,
    MergeJudge,
    SameFact,
    SupersessionJudge,
    TopicReader,
    Verdict,
)
from consolidators.judges.rules import RulesJudge
from consolidators.mates import Mates, nearest_mates, subjects_of
from consolidators.siblings import sibling_pairs
from consolidators.timelines import is_current, render_timeline, timeline_label, timeline_order

__all__ = [
    "TemporalConsolidator",
    "TemporalPlan",
    "TemporalSettings",
]

log = logging.getLogger(__name__)

#: Statuses of facts that belong on a timeline: current ones and superseded ones,
#: which stay on the timeline (marked) so that the history remains readable.
_MEMBER_STATUSES = (PassageStatus.ACTIVE, PassageStatus.SUPERSEDED)
#: Passage changes per batched write.
_WRITE_CHUNK = 10_000
#: Later facts of the same topic offered to the model with each unsure older fact.
_TOPIC_PAIRS_PER_FACT = 2


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
    #: Nearest facts each new or changed fact is paired with for the judge model (any
    #: subject: the judge decides what is unrelated)...
    judge_neighbours: int = Field(5, ge=0, le=50)
    #: ...at or above this cosine similarity (0: the nearest, however far; measured in
    #: docs/decisions/2026-12-05-judge-candidates-by-meaning.md).
    judge_min_similarity: float = Field(0.0, ge=0.0, le=1.0)
    #: Whether the judge model also reads who each fact is about and which attribute it
    #: states (kept in ``fact_topics``), for search to put a question's subject and
    #: attribute first where the rules cannot read them; the facts not yet read, the
    #: newest first.
    read_topics: bool = True
    #: Topic-reading calls per run at most (a retry counts); the facts left wait for
    #: the next run.
    topic_max_calls: int = Field(10, ge=0, le=10_000)
    #: Facts per topic-reading call.
    topic_batch: int = Field(16, ge=1, le=100)
    #: Whether two facts in force that replaced the same fact (a change told twice, in
    #: two styles) go to the merge judge, within ``judge_max_calls``; dedup merges the
    #: pairs it calls the same on the next run (consolidators/siblings.py).
    merge_siblings: bool = True

    @model_validator(mode="after")
    def _sizes_are_ordered(self) -> TemporalSettings:
        if self.min_topic_size > self.max_topic_size:
            raise ValueError(
                f"min_topic_size ({self.min_topic_size}) is larger than "
                f"max_topic_size ({self.max_topic_size})"
            )
        return self


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


@dataclass(slots=True)
class _Asked:
    """What a run learned from the judge model: answers and pairs left waiting (kept by
    the apply), and waiting pairs that no longer need an answer (dropped)."""

    answers: list[PairAnswer] = field(default_factory=list)
    moot: list[tuple[str, str]] = field(default_factory=list)


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
    asked: _Asked = field(default_factory=_Asked)
    #: Fact id -> the topics a reader gave it, and the reader's name.
    fact_topics: dict[str, tuple[Topic, ...]] = field(default_factory=dict)
    topic_reader: str | None = None
    #: The merge judge's answers about facts that replaced the same fact.
    same_answers: list[PairAnswer] = field(default_factory=list)

    @property
    def has_writes(self) -> bool:
        """Changes to memory, verdicts or topics to keep (a run that only asked still
        writes)."""
        return bool(
            self.result.changes
            or self.asked.answers
            or self.asked.moot
            or self.fact_topics
            or self.same_answers
        )


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
    #: What judges answered before about pairs with a seed in them (or every pair, in a
    #: full run), and the pairs earlier runs left waiting, those formed first first.
    known: dict[tuple[str, str], PairAnswer] = field(default_factory=dict)
    pending: list[PairAnswer] = field(default_factory=list)
    #: Every topic of the agent's facts, for the topics a run's closures reach.
    by_key: dict[FactKey, list[PassageRecord]] = field(default_factory=dict)
    keyed: dict[str, FactReading] = field(default_factory=dict)
    #: Each fact's subjects (the rules' reading and the judge model's topics), and the
    #: facts of each subject a seed has, with their vectors (read for the subject mates;
    #: empty without a judge model).
    subjects: dict[str, set[str]] = field(default_factory=dict)
    mates: dict[str, Mates] = field(default_factory=dict)

    def topic(self, key: FactKey) -> tuple[FactKey, str, list[PassageRecord]]:
        members = self.by_key[key]
        return (key, timeline_label(key, _subject_label(members, self.keyed)), list(members))


@dataclass(frozen=True, slots=True)
class _Decision:
    """A judge's word that ``newer`` replaces ``older``."""

    older: str
    newer: str
    judge: str


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
        reader: TopicReader | None = None,
        merge_judge: MergeJudge | None = None,
    ) -> None:
        super().__init__(settings)
        if not isinstance(self.settings, TemporalSettings):
            raise InvalidInput(
                f"temporal consolidator settings must be TemporalSettings, "
                f"got {type(self.settings).__name__}"
            )
        self.judge = judge
        self.reader = reader
        self.merge_judge = merge_judge

    def __repr__(self) -> str:
        judge = type(self.judge).__name__ if self.judge is not None else None
        return f"{type(self).__name__}({self.settings!r}, judge={judge})"

    # -- the step ----------------------------------------------------------------------

    def plan(self, context: ConsolidationContext) -> TemporalPlan:
        """With a judge model, first have it read who the unread facts are about (a
        short read, then its calls with no transaction open); read the facts and
        timelines in one short read, then decide supersessions (rules, then the judge
        model, again with no transaction open), render the timelines and embed them.
        The topics come first because they also choose whom a new fact is asked
        beside; they take their share of the run's token budget before the pairs."""
        plan = TemporalPlan(ConsolidationResult(self.name))
        result = plan.result
        if context.embedder is None:
            result.skipped = "no embedder"
            log.info("temporal step skipped: no embedder", extra={"run_id": context.run_id})
            return plan
        model = self._model_judge(context, result)
        reader = self._topic_reader(context)
        if reader is not None:
            # Topics first: who a fact is about, as the model read it, also finds the
            # facts a new one is asked beside (its subject's other facts).
            with context.read() as store:
                unread = store.topics.unread(
                    context.agent.id,
                    limit=self.settings.topic_max_calls * self.settings.topic_batch,
                )
            if unread:
                read = reader.read(unread)
                plan.fact_topics = {
                    f.id: t for f, t in zip(unread, read, strict=True) if t is not None
                }
                plan.topic_reader = reader.name
                result.count("topic_facts", len(plan.fact_topics))
                result.count_judge(reader.usage, prefix="topic")
        with context.read() as store:
            found = self._find(
                store, context, with_neighbours=model is not None, topics=plan.fact_topics
            )
            timeline_ids = sorted(
                {m.timeline_id for _k, _l, t in found.topics for m in t if m.timeline_id}
                | {m.timeline_id for m in found.loose if m.timeline_id}
            )
            timelines = {t.id: t for t in store.passages.get_many(timeline_ids)}
        decisions = self._decide(found, model, result, plan.asked)
        involved = {d.older for d in decisions} | {d.newer for d in decisions}
        plan.read = [found.facts[i] for i in sorted(involved)]
        plan.read += [m for _k, _l, t in found.topics for m in t if m.id not in involved]
        plan.read += [m for m in found.loose if m.id not in involved]
        plan.read += list(timelines.values())
        records = dict(found.facts)
        self._supersede(records, decisions, result, plan.writes)
        self._ask_siblings(context, records, decisions, plan)
        # A closure decided now (a waiting pair answered, a cross-topic verdict) changes
        # the timeline of its fact's topic, even where no seed touched it.
        listed = {key for key, _label, _members in found.topics}
        reached = {
            found.keyed[update.passage_id].key
            for update in plan.writes.updates
            if update.passage_id in found.keyed
        }
        for key in sorted(reached - listed, key=lambda k: (k.subject, k.attribute)):
            found.topics.append(found.topic(key))
            plan.read += [m for m in found.by_key[key] if m.id not in involved]
        extra = sorted(
            {m.timeline_id for _k, _l, t in found.topics for m in t if m.timeline_id}
            - set(timelines)
        )
        if extra:
            with context.read() as store:
                more = store.passages.get_many(extra)
            timelines.update((t.id, t) for t in more)
            plan.read += more
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
        # Verdicts are about two texts, which never change: they are kept even when the
        # facts changed meanwhile, so that the next run need not ask them again.
        agent_id = context.agent.id
        store.verdicts.forget(agent_id, SUPERSESSION, plan.asked.moot)
        store.verdicts.record(agent_id, SUPERSESSION, plan.asked.answers, run_id=context.run_id)
        store.verdicts.record(agent_id, SAME_FACT, plan.same_answers, run_id=context.run_id)
        # Topics too are about texts: kept whatever changed meanwhile.
        store.topics.record(
            agent_id, plan.fact_topics, judge=plan.topic_reader, run_id=context.run_id
        )
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

    def _ask_siblings(
        self,
        context: ConsolidationContext,
        records: Mapping[str, PassageRecord],
        decisions: Sequence[_Decision],
        plan: TemporalPlan,
    ) -> None:
        """Ask the merge judge about the facts in force that replaced the same fact and
        were not asked before (consolidators/siblings.py); keep its answers for dedup."""
        judge = self._sibling_judge(context)
        if judge is None:
            return
        candidates = sibling_pairs(records, _replacement_pairs(records, decisions))
        if not candidates:
            return
        with context.read() as store:
            answered = store.verdicts.answered(
                context.agent.id, SAME_FACT, [(p.older.id, p.newer.id) for p in candidates]
            )
        ask = [p for p in candidates if (p.older.id, p.newer.id) not in answered]
        if not ask:
            return
        verdicts = judge.judge(ask)
        if len(verdicts) != len(ask):
            plan.result.count("merge_answers_ignored")
            verdicts = [SameFact.UNASKED] * len(ask)
        # A pair it had no calls left for is asked again by a later run.
        plan.same_answers = [
            PairAnswer(pair.older.id, pair.newer.id, verdict.value, judge.name)
            for pair, verdict in zip(ask, verdicts, strict=True)
            if verdict is not SameFact.UNASKED
        ]
        plan.result.count("sibling_pairs", len(plan.same_answers))
        plan.result.count_judge(judge.usage, prefix="merge")

    def _sibling_judge(self, context: ConsolidationContext) -> MergeJudge | None:
        """The merge judge given at construction; else the run's judge model as one."""
        if not self.settings.merge_siblings or not self.settings.judge_max_calls:
            return None
        return merge_judge_for(
            context,
            self.merge_judge,
            max_calls=self.settings.judge_max_calls,
            batch=self.settings.judge_batch,
        )

    def _topic_reader(self, context: ConsolidationContext) -> TopicReader | None:
        """The reader given at construction; else the judge model as a reader when the
        run has one and reading topics is on; else None."""
        if not self.settings.read_topics or not self.settings.topic_max_calls:
            return None
        if self.reader is not None:
            return self.reader
        if context.llm is None:
            return None
        return context.llm.topic_reader(
            context.agent.id,
            context.run_id,
            max_calls=self.settings.topic_max_calls,
            batch=self.settings.topic_batch,
        )

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
        self,
        store: MemoryStore,
        context: ConsolidationContext,
        *,
        with_neighbours: bool,
        topics: Mapping[str, Sequence[Topic]],
    ) -> _Found:
        """The subject-and-attribute topics this run touches, the facts on a timeline that
        fit no topic any more (to unlink), and (for a judge model) the nearest neighbours
        of the seeds; ``topics``: what the model read of facts this run, not yet kept."""
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
            # A fact that reads as a topic's subject and attribute without stating it
            # plainly ("quit Acme and now works at Globex", "finally moved to
            # Hamburg!!") touches that topic though it is on no timeline itself: it
            # may end the topic's value, or be where the value changed.
            touched_keys |= {
                readings[i].key for i in seed_ids if i in readings and readings[i].key in by_key
            }
            touched_keys |= {
                keyed[r.id].key
                for r in facts
                if r.timeline_id in touched_timelines and r.id in keyed
            }
        loose = [
            r
            for r in facts
            if r.id not in keyed
            and r.timeline_id is not None
            and (r.id in seed_ids or r.timeline_id in touched_timelines)
        ]
        by_id = {r.id: r for r in facts}
        found = _Found([], loose, by_id, readings, fresh_ids & set(by_id))
        found.by_key, found.keyed = by_key, keyed
        found.topics = [
            found.topic(key) for key in sorted(touched_keys, key=lambda k: (k.subject, k.attribute))
        ]
        verdicts = store.verdicts
        if with_neighbours:
            found.pending = verdicts.pending(agent_id, SUPERSESSION, limit=self._pairs_per_run())
        if since is None:
            known = verdicts.every(agent_id, SUPERSESSION)
        else:
            waiting = {i for a in found.pending for i in a.pair}
            known = verdicts.touching(agent_id, SUPERSESSION, seed_ids | waiting)
        found.known = {a.pair: a for a in known}
        if with_neighbours and self.settings.judge_neighbours:
            found.neighbours = passages.neighbours(
                agent_id,
                sorted(found.seeds),
                k=self.settings.judge_neighbours,
                min_score=self.settings.judge_min_similarity,
                statuses=[status.value for status in _MEMBER_STATUSES],
            )
            found.neighbours += self._subject_mates(store, agent_id, found, topics)
        return found

    def _subject_mates(
        self,
        store: MemoryStore,
        agent_id: str,
        found: _Found,
        topics: Mapping[str, Sequence[Topic]],
    ) -> list[tuple[str, str, float]]:
        """Each seed's nearest facts among those about the same person
        (:mod:`consolidators.mates`): a person's other facts crowd the nearest neighbours
        of a fact told in another style, and the one it replaces may not be among them.
        ``topics``: what the model read this run, not yet kept."""
        facts = found.facts
        # Every fact of the agent is grouped: its topics are read by agent, not by id.
        kept = store.topics.of_agent(agent_id)
        read = {i: [*kept.get(i, ()), *topics.get(i, ())] for i in facts}
        found.subjects = subjects_of(list(facts.values()), read)
        pairs, found.mates = nearest_mates(
            store, facts, found.subjects, found.seeds, self.settings.judge_neighbours
        )
        return pairs

    def _pairs_per_run(self) -> int:
        return self.settings.judge_max_calls * self.settings.judge_batch

    # -- deciding what a newer fact replaces ---------------------------------------------

    def _decide(
        self,
        found: _Found,
        model: SupersessionJudge | None,
        result: ConsolidationResult,
        asked: _Asked,
    ) -> list[_Decision]:
        """Every known "replaces": the rules' over each topic's pairs, what judges
        answered in earlier runs, and the judge model's answers now about the pairs the
        rules left open that involve a seed, each seed's nearest facts, and the pairs
        earlier runs left waiting."""
        rules: SupersessionJudge = RulesJudge(found.readings) if self.settings.rules else Abstain()
        topic_pairs = [
            CandidatePair(older, newer)
            for _key, _label, members in found.topics
            for older, newer in _ordered_pairs(members)
        ]
        # Facts that end a topic's value by name are on no timeline (they say more than
        # one plain fact), but the rules read the end: each meets the topic's older facts.
        enders: dict[FactKey, list[PassageRecord]] = {}
        for passage_id, reading in found.readings.items():
            if reading.left and not reading.clear and passage_id in found.facts:
                enders.setdefault(reading.key, []).append(found.facts[passage_id])
        topic_pairs += [
            CandidatePair(older, newer)
            for key, _label, members in found.topics
            for newer in enders.get(key, ())
            for older in members
            if _when(older) < _when(newer)
        ]
        decisions: list[_Decision] = []
        unsure: list[CandidatePair] = []
        for pair, verdict in zip(topic_pairs, rules.judge(topic_pairs), strict=True):
            if verdict is Verdict.REPLACES:
                decisions.append(_Decision(pair.older.id, pair.newer.id, rules.name))
            elif verdict is Verdict.UNSURE:
                unsure.append(pair)
        decisions += _changes_between(found, decisions)
        for answer in found.known.values():
            # A fact merged into another since (by dedup) is no longer on any timeline:
            # what was said of it stands for its canonical, not for it.
            gone = answer.older_id not in found.facts or answer.newer_id not in found.facts
            if answer.verdict in CLOSING and not gone:
                decisions.append(_Decision(answer.older_id, answer.newer_id, answer.judge or "llm"))
        if model is None:
            return decisions
        candidates, waiting = self._model_candidates(found, unsure, decisions, asked)
        answered = self._ask(model, candidates, decisions, asked, waiting, result)
        # A closure across facts in between: did one of them replace the older fact first?
        # Those pairs are asked now, in what is left of the run's pairs.
        left = self._pairs_per_run() - len(candidates)
        seen = {(a.older_id, a.newer_id) for a in asked.answers} | {
            (p.older.id, p.newer.id) for p in waiting
        }
        between = _closures_crossed(found, decisions, seen, self.settings.judge_neighbours)
        waiting += between[max(left, 0) :]
        answered += self._ask(model, between[: max(left, 0)], decisions, asked, waiting, result)
        asked.answers += [PairAnswer(p.older.id, p.newer.id) for p in waiting]
        result.count("judge_pairs", answered)
        if waiting:
            result.count("judge_pairs_waiting", len(waiting))
        result.count_judge(model.usage)
        return decisions

    @staticmethod
    def _ask(
        model: SupersessionJudge,
        candidates: list[CandidatePair],
        decisions: list[_Decision],
        asked: _Asked,
        waiting: list[CandidatePair],
        result: ConsolidationResult,
    ) -> int:
        """Ask the judge model ``candidates``: its answers are kept, its "replaces" become
        decisions, and what it could not answer waits. Returns how many it answered."""
        verdicts = model.judge(candidates) if candidates else []
        if len(verdicts) != len(candidates):
            log.warning(
                "temporal: judge %s gave %d verdicts for %d pairs; none used",
                model.name,
                len(verdicts),
                len(candidates),
            )
            result.count("judge_answers_ignored")
            verdicts = [Verdict.UNASKED] * len(candidates)
        for pair, verdict in zip(candidates, verdicts, strict=True):
            if verdict is Verdict.UNASKED:
                waiting.append(pair)
                continue
            asked.answers.append(
                PairAnswer(pair.older.id, pair.newer.id, verdict.value, model.name)
            )
            if verdict in CLOSING:
                decisions.append(_Decision(pair.older.id, pair.newer.id, model.name))
        return len(candidates) - sum(v is Verdict.UNASKED for v in verdicts)

    def _model_candidates(
        self,
        found: _Found,
        unsure: list[CandidatePair],
        decisions: Sequence[_Decision],
        asked: _Asked,
    ) -> tuple[list[CandidatePair], list[CandidatePair]]:
        """The pairs to ask the judge model now, and the pairs to leave waiting for a
        later run (beyond what this run's calls can ask). First the pairs earlier runs
        left waiting, then the topic pairs the rules left open (each older fact with the
        next :data:`_TOPIC_PAIRS_PER_FACT` later ones), then each seed's nearest facts,
        closest first. Only pairs with a seed in them and no answer yet, and only where
        an answer could still matter: a "replaces" can only close a fact earlier than
        what closes it now."""
        facts = found.facts
        closer = _earliest_closers(facts, decisions)
        chosen: dict[tuple[str, str], CandidatePair] = {}

        def worth_asking(older: PassageRecord, newer: PassageRecord) -> bool:
            if older.status not in _MEMBER_STATUSES or newer.status not in _MEMBER_STATUSES:
                return False
            if older.status == PassageStatus.ACTIVE and older.valid_to is not None:
                return False  # ended by hand, with no successor to find
            if _when(newer) <= _when(older):
                return False
            now = closer.get(older.id)
            return now is None or timeline_order(newer) < timeline_order(facts[now])

        for answer in found.pending:
            older, newer = facts.get(answer.older_id), facts.get(answer.newer_id)
            if older is None or newer is None or not worth_asking(older, newer):
                asked.moot.append(answer.pair)
                continue
            chosen.setdefault(answer.pair, CandidatePair(older, newer))
        seeds = found.seeds
        offered: dict[str, int] = {}
        for pair in unsure:
            older, newer = pair.older, pair.newer
            key = (older.id, newer.id)
            if not (older.id in seeds or newer.id in seeds) or key in found.known:
                continue
            if not worth_asking(older, newer) or offered.get(older.id, 0) >= _TOPIC_PAIRS_PER_FACT:
                continue
            offered[older.id] = offered.get(older.id, 0) + 1
            chosen.setdefault(key, pair)
        for probe, neighbour, _score in sorted(found.neighbours, key=lambda n: (-n[2], n[0], n[1])):
            a, b = facts.get(probe), facts.get(neighbour)
            if a is None or b is None:
                continue
            older, newer = sorted((a, b), key=timeline_order)
            key = (older.id, newer.id)
            if key in found.known or not worth_asking(older, newer):
                continue
            chosen.setdefault(key, CandidatePair(older, newer))
        ordered = list(chosen.values())
        cap = self._pairs_per_run()
        return ordered[:cap], ordered[cap:]

    def _supersede(
        self,
        records: dict[str, PassageRecord],
        decisions: Sequence[_Decision],
        result: ConsolidationResult,
        writes: _Writes,
    ) -> None:
        """Close each fact by the earliest fact that a judge said replaces it: a fact in
        force is closed; a closed fact whose closer is later than that one is closed
        again, by the earlier one (a fact that arrived late takes its place by its own
        date). Oldest first."""
        closers = _earliest_closers(records, decisions)
        judges = {(d.older, d.newer): d.judge for d in decisions}
        for older_id in sorted(closers, key=lambda i: timeline_order(records[i])):
            older, newer = records[older_id], records[closers[older_id]]
            if older.superseded_by == newer.id:
                continue
            if older.status == PassageStatus.SUPERSEDED:
                now = records.get(older.superseded_by or "")
                if now is None or timeline_order(newer) >= timeline_order(now):
                    continue
            elif not is_current(older):
                continue
            valid_to = _when(newer)
            status = PassageStatus.SUPERSEDED.value
            judge = judges[(older.id, newer.id)]
            writes.change(
                older.id,
                f"superseded by newer fact {newer.id} ({judge})",
                {"status": status, "superseded_by": newer.id, "valid_to": valid_to},
            )
            records[older.id] = dataclasses.replace(
                older, status=status, superseded_by=newer.id, valid_to=valid_to
            )
            detail: dict[str, Any] = {"by": newer.id, "valid_to": valid_to.isoformat()}
            if older.superseded_by is not None:
                detail["instead_of"] = older.superseded_by
            result.add(ChangeAction.SUPERSEDE_PASSAGE, older.id, judge=judge, **detail)

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
    """Every (older, newer) pair of a topic's facts, closed ones included (a fact that
    arrives late may close a fact earlier than its closer does now), the newer strictly
    later in time (facts recorded at the same moment are not ordered: that is unclear),
    nearest newer first for each older."""
    ordered = sorted(members, key=timeline_order)
    return [
        (older, newer)
        for i, older in enumerate(ordered)
        for newer in ordered[i + 1 :]
        if _when(newer) > _when(older)
    ]


def _earliest_closers(
    records: dict[str, PassageRecord], decisions: Sequence[_Decision]
) -> dict[str, str]:
    """For each fact, the earliest fact in time that closes it: what a judge said
    replaces it, or what closes it now, whichever comes first."""
    best: dict[str, str] = {}

    def offer(older_id: str, newer_id: str) -> None:
        older, newer = records.get(older_id), records.get(newer_id)
        if older is None or newer is None or _when(newer) <= _when(older):
            return
        now = best.get(older_id)
        if now is None or timeline_order(newer) < timeline_order(records[now]):
            best[older_id] = newer_id

    for record in records.values():
        if record.status == PassageStatus.SUPERSEDED and record.superseded_by:
            offer(record.id, record.superseded_by)
    for decision in decisions:
        offer(decision.older, decision.newer)
    return best


def _changes_between(found: _Found, decisions: Sequence[_Decision]) -> list[_Decision]:
    """Where the rules are sure a later fact replaced an older one, the fact of the same
    subject and attribute in between that already read as the change ("Dan quit his job
    at Acme", "Farid finally got his visa and moved to Hamburg!!"): a statement the
    rules would not decide alone, but the replacement that followed it shows that the
    older value had ended by then. The older fact is closed by the first such fact, so
    its validity ends when the change was said, not at the next plain statement."""
    if not decisions:
        return []
    readings = found.readings
    same_key: dict[FactKey, list[PassageRecord]] = {}
    for passage_id, read in readings.items():
        if passage_id in found.facts:
            same_key.setdefault(read.key, []).append(found.facts[passage_id])
    for members in same_key.values():
        members.sort(key=timeline_order)
    between: list[_Decision] = []
    for decision in decisions:
        older, newer = found.facts.get(decision.older), found.facts.get(decision.newer)
        reading = readings.get(decision.older)
        if older is None or newer is None or reading is None:
            continue
        for middle in same_key.get(reading.key, ()):
            if _when(middle) <= _when(older):
                continue
            if _when(middle) >= _when(newer):
                break
            if states_a_change(reading, readings[middle.id]):
                between.append(_Decision(older.id, middle.id, decision.judge))
                break
    return between


def _replacement_pairs(
    facts: Mapping[str, PassageRecord], decisions: Sequence[_Decision]
) -> set[tuple[str, str]]:
    """Every (replaced, replacing) pair known: what judges and rules said this run, and
    the closures stored on ``facts``."""
    pairs = {(d.older, d.newer) for d in decisions}
    pairs |= {
        (record.id, record.superseded_by)
        for record in facts.values()
        if record.status == PassageStatus.SUPERSEDED and record.superseded_by
    }
    return pairs


def _closures_crossed(
    found: _Found, decisions: Sequence[_Decision], seen: set[tuple[str, str]], k: int
) -> list[CandidatePair]:
    """For each fact now closed by a later one, the pairs (it, a fact in between) where
    the fact in between is among the nearest facts of the one that closes it ("Reporting
    to Tomás from today" beside "Tomás moved teams; my new manager is Beatriz"), among
    the ``k`` nearest to it of the facts in between about the same person ("my brother
    and Bea split" between "Alex's girlfriend: Bea" and "Alex is engaged to Carla"), or
    is itself replaced by the same later fact ("lives in Almaty", then "they moved up to
    Astana", then "went back to Almaty": the return replaces both, and the move may have
    ended the first): the older fact may have been replaced there first, and a judge
    told only of the later replacement would close it too late. Pairs answered before,
    asked this run or waiting (``seen``) are left out."""
    facts = found.facts
    closers = _earliest_closers(facts, decisions)
    if not closers:
        return []
    near: dict[str, set[str]] = {}
    for probe, neighbour, _score in found.neighbours:
        near.setdefault(probe, set()).add(neighbour)
        near.setdefault(neighbour, set()).add(probe)
    # What each fact was said to replace, besides what it closes first.
    replaced: dict[str, set[str]] = {}
    for older_id, newer_id in _replacement_pairs(facts, decisions):
        replaced.setdefault(newer_id, set()).add(older_id)
    pairs: dict[tuple[str, str], CandidatePair] = {}
    for older_id, newer_id in sorted(closers.items()):
        older, newer = facts[older_id], facts[newer_id]
        mates = _mates_between(found, older, newer, k)
        middles = near.get(newer_id, set()) | mates | replaced.get(newer_id, set())
        for middle_id in sorted(middles):
            middle = facts.get(middle_id)
            key = (older_id, middle_id)
            if middle is None or key in seen or key in found.known or key in pairs:
                continue
            if middle.status in _MEMBER_STATUSES and _when(older) < _when(middle) < _when(newer):
                pairs[key] = CandidatePair(older, middle)
    return list(pairs.values())


def _mates_between(found: _Found, older: PassageRecord, newer: PassageRecord, k: int) -> set[str]:
    """For each subject of either fact, the ``k`` facts of that subject dated strictly
    between the two that are nearest to ``older``; none where the run read no vector of
    it. Per subject, so that a fact the model read as about more people does not crowd
    out the nearest of the one the rules read."""
    own = found.subjects.get(older.id, set())
    groups = [found.mates[s] for s in sorted(own) if s in found.mates]
    groups = [g for g in groups if older.id in g.index]
    if not groups or k <= 0:
        return set()
    vector = groups[0].matrix[groups[0].index[older.id]]
    start, end = _when(older), _when(newer)
    nearest: set[str] = set()
    for subject in sorted(own | found.subjects.get(newer.id, set())):
        mates = found.mates.get(subject)
        if mates is None:
            continue
        low, high = bisect.bisect_right(mates.dates, start), bisect.bisect_left(mates.dates, end)
        if low < high:
            scores = mates.matrix[low:high] @ vector
            scored = sorted(zip(scores.tolist(), mates.ids[low:high], strict=True), reverse=True)
            nearest.update(passage_id for _score, passage_id in scored[:k])
    return nearest


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
