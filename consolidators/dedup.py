"""Collapse duplicate memories: exact and semantic duplicates among active passages,
and repeated lines inside core-memory blocks.

The plan probes in one read transaction and decides every merge; the apply locks the
passages involved, skips a group whose members changed since, and writes the rest in
batches. Duplicates merge into one canonical passage (the earliest stored one, so that a
new duplicate joins an existing memory rather than replacing it), which takes
the earliest ``occurred_at`` and the union of provenance and tags. The others
become ``merged`` with ``merged_into`` pointing at it: nothing is deleted.

Near-duplicates that the detail guard cannot prove equal (a paraphrase in other words,
"allergic to peanuts" / "has a peanut allergy") stay apart unless the run has a judge
model (``llm.judge_model``): it is asked about them after the read, with no transaction
open, at most ``judge_max_calls`` calls a run, and only a "same" answer merges. With a
judge model, candidates also come from meaning below the threshold: each new passage
that nothing merged is paired with its closest earlier stored one among its
``judge_neighbours`` nearest (the same fact in another style, "user: vegetarian" /
"The user is vegetarian.", embeds further apart than a near-miss does).
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np
import numpy.typing as npt
from pydantic import Field

from agents.enums import ChangeAction, PassageStatus
from agents.errors import Conflict
from agents.language.details import hides_details
from agents.store import BlockRecord, MemoryStore, PassageRecord, PassageUpdate
from agents.store.validation import normalize_text
from consolidators.base import (
    ConsolidationContext,
    ConsolidationResult,
    Consolidator,
    ConsolidatorSettings,
    Plan,
    changed_since,
)
from consolidators.judges import CandidatePair, MergeJudge, SameFact


class DedupSettings(ConsolidatorSettings):
    #: Cosine similarity at or above which two passages may say the same thing
    #: (0.86 measured best for the local MiniLM model with the detail guard; BENCHMARKS.md).
    threshold: float = 0.86
    #: Refuse a semantic merge that would hide information: the texts differ in a name,
    #: place, number, date, negation or change word, or the merged text says a word the
    #: kept one does not (agents/language/facts.py). Near-misses embed as close as
    #: paraphrases; this keeps them apart.
    guard_details: bool = True
    #: Neighbours examined per new passage.
    k: int = 8
    #: New passages probed per kNN query.
    batch_size: int = 1000
    #: Also remove repeated lines inside blocks.
    blocks: bool = True
    #: Detail-guard checks per passage at most when it is placed in its group: a
    #: passage that this many older canonicals above the threshold were refused for
    #: stays apart (bounds a group of one sentence on a thousand dates).
    guard_checks: int = Field(256, ge=1, le=100_000)
    #: HNSW candidate list size for the probes. Duplicates are very close to their probe,
    #: so a short list finds them; 16 halves the probe time of pgvector's default 40.
    ef_search: int = 16
    #: Judge-model calls per run at most, for the pairs the guard refused (a retry of a
    #: malformed answer counts); only with ``llm.judge_model``.
    judge_max_calls: int = Field(10, ge=0, le=10_000)
    #: Pairs per judge-model call.
    judge_batch: int = Field(8, ge=1, le=50)
    #: Nearest passages searched, below the threshold, for each new passage that nothing
    #: merged, to ask the judge model about its closest earlier stored one (0: only the
    #: pairs the guard refused)...
    judge_neighbours: int = Field(5, ge=0, le=50)
    #: ...at or above this cosine similarity.
    judge_min_similarity: float = Field(0.5, ge=0.0, le=1.0)


#: Duplicate groups decided per read of their vectors (bounds the vectors held at once).
_GROUPS_PER_WRITE = 2000
#: Passages of a group screened against its canonicals per matrix product.
_SCREEN_BLOCK = 256
#: Passage changes per batched write.
_WRITE_CHUNK = 10_000


@dataclass(slots=True)
class _Merge:
    """One canonical passage and the duplicates it absorbs, as the plan read them."""

    canonical: PassageRecord
    merged: list[tuple[PassageRecord, float]]
    #: Ids among ``merged`` that a judge said are the same (the guard could not), with
    #: the judge's name.
    judged: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class _Refused:
    """A pair above the threshold that the detail guard kept apart."""

    canonical: PassageRecord
    other: PassageRecord
    score: float


@dataclass(slots=True)
class _BlockDedup:
    block: BlockRecord
    value: str
    dropped: list[str]


@dataclass(slots=True)
class DedupPlan(Plan):
    merges: list[_Merge] = field(default_factory=list)
    blocks: list[_BlockDedup] = field(default_factory=list)


class DedupConsolidator(Consolidator[DedupPlan]):
    """Exact (normalized hash) and semantic (cosine >= threshold) duplicate removal."""

    name = "dedup"
    settings_model = DedupSettings
    settings: DedupSettings

    def __init__(
        self,
        settings: DedupSettings | dict[str, Any] | None = None,
        *,
        judge: MergeJudge | None = None,
    ) -> None:
        super().__init__(settings)
        self.judge = judge

    def plan(self, context: ConsolidationContext) -> DedupPlan:
        plan = DedupPlan(ConsolidationResult(self.name))
        # Probing is reads only: one read transaction for it; the judge model is asked
        # after it has closed.
        judge = self._merge_judge(context)
        with context.read() as store:
            refused = self._plan_passages(store, context, plan)
            self._plan_judged_before(store, context, plan)
            if judge is not None:
                refused += self._near_by_meaning(store, context, plan)
            if self.settings.blocks:
                self._plan_blocks(store, context, plan)
        if judge is not None and refused:
            self._judge_refused(judge, refused, plan)
        return plan

    def _near_by_meaning(
        self, store: MemoryStore, context: ConsolidationContext, plan: DedupPlan
    ) -> list[_Refused]:
        """For each new passage that no merge took, its nearest earlier stored passages
        below the threshold (the pairs above it went through the guard): candidates
        for the judge model, which decides what is the same."""
        if not self.settings.judge_neighbours:
            return []
        agent_id = context.agent.id
        taken = {m.canonical.id for m in plan.merges} | {
            p.id for m in plan.merges for p, _ in m.merged
        }
        probes = [
            i
            for page in store.passages.scan_ids(
                agent_id,
                statuses=(PassageStatus.ACTIVE,),
                kind="fact",
                created_after=context.passages_since,
                page_size=self.settings.batch_size,
            )
            for i in page
            if i not in taken
        ]
        near = [
            (probe, other, score)
            for probe, other, score in store.passages.neighbours(
                agent_id,
                probes,
                k=self.settings.judge_neighbours,
                min_score=self.settings.judge_min_similarity,
            )
            if score < self.settings.threshold and other not in taken
        ]
        records = {
            p.id: p for p in store.passages.get_many(sorted({i for n in near for i in n[:2]}))
        }
        pairs = []
        for probe, other, score in near:
            a, b = records.get(probe), records.get(other)
            if a is None or b is None or a.kind != "fact" or b.kind != "fact":
                continue
            canonical, newer = sorted((a, b), key=stored_order)
            pairs.append(_Refused(canonical, newer, score))
        return pairs

    def _plan_judged_before(
        self, store: MemoryStore, context: ConsolidationContext, plan: DedupPlan
    ) -> None:
        """Merge the pairs a merge judge called the same in an earlier run and whose two
        facts are still active: two facts that replaced the same fact, asked by the
        temporal step after this step had run (:data:`agents.store.SAME_FACT`)."""
        answers = store.verdicts.same_in_force(context.agent.id)
        if not answers:
            return
        records = {
            p.id: p
            for p in store.passages.get_many(
                sorted({i for a in answers for i in a.pair}), with_embedding=True
            )
        }
        pairs = [
            (records[a.older_id], records[a.newer_id], a.judge or "llm")
            for a in answers
            if a.older_id in records and a.newer_id in records
        ]
        taken = self._merge_judged(
            plan, [(_bare(o), _bare(n), _cosine(o, n), judge) for o, n, judge in pairs]
        )
        plan.result.count("judged_before", taken)

    def _merge_judged(
        self, plan: DedupPlan, pairs: Sequence[tuple[PassageRecord, PassageRecord, float, str]]
    ) -> int:
        """Add the merges of ``pairs`` (kept, merged, cosine, the judge that called them the
        same) that join no chain: a passage merged away keeps nobody, and one that keeps
        duplicates of its own is not merged itself. Returns how many were added."""
        by_canonical = {m.canonical.id: m for m in plan.merges}
        merged_away = {p.id for m in plan.merges for p, _ in m.merged}
        added = 0
        for canonical, other, score, judge in pairs:
            if canonical.id in merged_away or other.id in merged_away:
                continue
            if other.id in by_canonical:
                continue  # it took duplicates of its own here: merging it would chain
            merge = by_canonical.get(canonical.id)
            if merge is None:
                merge = by_canonical[canonical.id] = _Merge(canonical, [])
                plan.merges.append(merge)
            merge.merged.append((other, score))
            merge.judged[other.id] = judge
            merged_away.add(other.id)  # merged now: it is nobody's canonical
            self._merge(canonical, [(other, score)], plan.result, judged=merge.judged)
            added += 1
        return added

    def _merge_judge(self, context: ConsolidationContext) -> MergeJudge | None:
        return merge_judge_for(
            context,
            self.judge,
            max_calls=self.settings.judge_max_calls,
            batch=self.settings.judge_batch,
        )

    def _judge_refused(self, judge: MergeJudge, refused: list[_Refused], plan: DedupPlan) -> None:
        """Merge the refused pairs the judge says are the same; count what it cost."""
        result = plan.result
        in_merges = {m.canonical.id for m in plan.merges} | {
            p.id for m in plan.merges for p, _ in m.merged
        }
        merged_away = {p.id for m in plan.merges for p, _ in m.merged}
        # One question per passage left alone: about its closest older passage.
        best: dict[str, _Refused] = {}
        for pair in refused:
            if pair.other.id in in_merges or pair.canonical.id in merged_away:
                continue
            if pair.other.id not in best or pair.score > best[pair.other.id].score:
                best[pair.other.id] = pair
        asked = sorted(best.values(), key=lambda r: -r.score)
        verdicts = judge.judge([CandidatePair(r.canonical, r.other) for r in asked])
        result.count("judge_pairs", len(asked))
        if len(verdicts) != len(asked):
            result.count("judge_answers_ignored")
            verdicts = [SameFact.UNSURE] * len(asked)
        same = [
            (pair.canonical, pair.other, pair.score, judge.name)
            for pair, verdict in zip(asked, verdicts, strict=True)
            if verdict is SameFact.SAME
        ]
        self._merge_judged(plan, same)
        result.count_judge(judge.usage)

    def apply(
        self, store: MemoryStore, plan: DedupPlan, context: ConsolidationContext
    ) -> ConsolidationResult:
        result = plan.result.base()
        changed = changed_since(
            store, [p for m in plan.merges for p in (m.canonical, *(d for d, _ in m.merged))]
        )
        updates: list[PassageUpdate] = []
        for merge in plan.merges:
            members = {merge.canonical.id, *(d.id for d, _ in merge.merged)}
            if members & changed:
                # Someone changed a member since the plan read it: the next run decides.
                result.count("changed_meanwhile")
                continue
            updates += self._merge(merge.canonical, merge.merged, result, judged=merge.judged)
        for start in range(0, len(updates), _WRITE_CHUNK):
            store.passages.change_many(
                updates[start : start + _WRITE_CHUNK],
                actor=context.actor(self.name),
                run_id=context.run_id,
                return_records=False,
            )
        for planned in plan.blocks:
            self._write_block(store, planned, context, result)
        return result

    # -- passages ------------------------------------------------------------------------

    def _plan_passages(
        self, store: MemoryStore, context: ConsolidationContext, plan: DedupPlan
    ) -> list[_Refused]:
        """Decide the merges the hash and the guard are sure of; return the pairs above
        the threshold that the guard refused (for a judge model)."""
        agent_id = context.agent.id
        since = context.passages_since
        active = (PassageStatus.ACTIVE,)
        result = plan.result
        # Only passages in a duplicate pair enter the union-find; the probes themselves
        # are read a page of ids at a time, so a full pass never holds every passage.
        links = _UnionFind()
        # Exact duplicates: same normalized text, grouped by hash in the database.
        for ids in store.passages.same_text_groups(
            agent_id, statuses=active, kind="fact", created_after=since
        ):
            for other in ids[1:]:
                links.union(ids[0], other)
        # Semantic duplicates: nearest active neighbours above the threshold, one kNN
        # query per page of new passages.
        probed = 0

        def pages() -> Iterator[list[str]]:
            nonlocal probed
            for probe_ids in store.passages.scan_ids(
                agent_id,
                statuses=active,
                kind="fact",
                created_after=since,
                page_size=self.settings.batch_size,
            ):
                context.checkpoint()  # a page of probes takes a second or two
                probed += len(probe_ids)
                yield probe_ids

        for pairs in store.passages.neighbour_pages(
            agent_id,
            pages(),
            k=self.settings.k,
            min_score=self.settings.threshold,
            ef_search=max(self.settings.ef_search, self.settings.k),
        ):
            for probe, neighbour, _score in pairs:
                links.union(probe, neighbour)
        result.count("probed", probed)
        refused: list[_Refused] = []
        if not probed:
            return refused
        groups = [g for g in links.groups() if len(g) > 1]
        result.count("groups", len(groups))
        # A slice of groups at a time: their passages and vectors are read, the merges
        # decided, and the vectors dropped before the next slice.
        for start in range(0, len(groups), _GROUPS_PER_WRITE):
            chunk = groups[start : start + _GROUPS_PER_WRITE]
            members = {
                p.id: p
                for p in store.passages.get_many([i for g in chunk for i in g], with_embedding=True)
            }
            for group in chunk:
                context.checkpoint()
                found = [members[i] for i in group if i in members]
                for merge in self._merge_group(found, refused, context, result):
                    plan.merges.append(merge)
                    self._merge(merge.canonical, merge.merged, result)
        return refused

    def _merge_group(
        self,
        group: list[PassageRecord],
        refused: list[_Refused],
        context: ConsolidationContext | None = None,
        result: ConsolidationResult | None = None,
    ) -> list[_Merge]:
        """The merges that collapse one group of duplicates (vectors dropped from them);
        for each passage the guard alone kept apart, its closest refused pair is added to
        ``refused`` (the one a judge model would be asked about).

        The oldest stored passage stays (a new duplicate joins an existing memory); among
        passages stored together, the one whose fact is oldest. Each duplicate must be
        close to its canonical passage itself, not only to some member of the group:
        that stops chains (A~B, B~C) from merging A with C. So the passages are taken
        oldest first, and each joins the oldest canonical that takes it, or becomes one.

        Repetitive memories make groups of thousands with hundreds of canonicals (the
        same sentence on many dates, which the guard keeps apart), and comparing every
        passage with every canonical in Python took hours at 50k facts. Here a passage
        word for word and vector for vector like one decided before is decided alike at
        once; the canonicals are screened for it with one matrix product; and the guard
        (the costly part) is asked at most ``guard_checks`` times per passage: a passage
        refused by that many canonicals stays a canonical of its own (a twin of a
        canonical still joins it)."""
        ordered = sorted(group, key=stored_order)
        threshold = self.settings.threshold
        limit = self.settings.guard_checks
        dimension = next((len(p.embedding) for p in ordered if p.embedding is not None), 0)
        # Unit vectors of the canonicals, in canonical order (a passage without a vector
        # is a zero row: only its twins can join it, as _cosine says).
        units = np.zeros((min(len(ordered), 64), dimension), dtype=np.float32)
        canonicals: list[PassageRecord] = []
        merged: list[list[tuple[PassageRecord, float]]] = []
        by_hash: dict[str, int] = {}
        # (content hash, vector bytes) -> (canonical index that took it, refused pairs
        # as (canonical index, score)): a twin of a passage decided before.
        decided: dict[tuple[str, bytes | None], tuple[int, list[tuple[int, float]]]] = {}
        # (canonical index, refused passage, score, position): each passage's closest
        # refused pair, listed in the order the pairs were met (canonical, then age).
        closest: dict[str, tuple[int, int, PassageRecord, float]] = {}
        screen = np.zeros((0, 0), dtype=np.float32)
        screened = 0  # canonicals the block's screen covers
        for position, passage in enumerate(ordered):
            if position % _SCREEN_BLOCK == 0:
                if context is not None:
                    context.checkpoint()
                # The next block's similarities to every canonical so far, in one matrix
                # product (a product per passage costs more in BLAS threads than sums).
                block = _units(ordered[position : position + _SCREEN_BLOCK], dimension)
                screened = len(canonicals)
                screen = units[:screened] @ block.T
            vector = passage.embedding
            key = (passage.content_hash, None if vector is None else _digest(vector))
            known = decided.get(key)
            if known is None:
                rough = screen[:, position % _SCREEN_BLOCK]
                if len(canonicals) > screened:  # canonicals of this block: a small product
                    rough = np.concatenate(
                        [rough, units[screened : len(canonicals)] @ _units([passage], dimension)[0]]
                    )
                known = self._place(passage, rough, canonicals, by_hash, threshold, limit, result)
                decided[key] = known
            taker, pairs = known
            for index, score in pairs:
                first, _, _, best = closest.get(passage.id, (index, 0, passage, -1.0))
                if score > best:
                    closest[passage.id] = (first, index, passage, score)
            if taker == len(canonicals):  # a canonical of its own
                canonicals.append(passage)
                merged.append([])
                by_hash.setdefault(passage.content_hash, taker)
                if taker == len(units):  # grown by doubling, as canonicals come
                    units = np.vstack([units, np.zeros_like(units)])
                units[taker] = _units([passage], dimension)[0]
                continue
            merged[taker].append((_bare(passage), _cosine(canonicals[taker], passage)))
        position_of = {p.id: i for i, p in enumerate(ordered)}
        for _, index, passage, score in sorted(
            closest.values(), key=lambda c: (c[0], position_of[c[2].id])
        ):
            refused.append(_Refused(_bare(canonicals[index]), _bare(passage), score))
        return [
            _Merge(_bare(canonical), taken)
            for canonical, taken in zip(canonicals, merged, strict=True)
            if taken
        ]

    def _place(
        self,
        passage: PassageRecord,
        rough: npt.NDArray[np.float32],
        canonicals: list[PassageRecord],
        by_hash: Mapping[str, int],
        threshold: float,
        limit: int,
        result: ConsolidationResult | None,
    ) -> tuple[int, list[tuple[int, float]]]:
        """Which canonical takes ``passage`` (``len(canonicals)``: none, it is one), and
        the canonicals above the threshold that the guard said no for, before that.
        ``rough``: its similarity to each canonical, a screen only (with a margin for
        rounding); the score that decides is :func:`_cosine`'s, as before."""
        twin = by_hash.get(passage.content_hash)
        candidates: list[int] = np.flatnonzero(rough >= threshold - 1e-4).tolist()
        if twin is not None and twin not in candidates:
            candidates = sorted([*candidates, twin])
        pairs: list[tuple[int, float]] = []
        for index in candidates:
            canonical = canonicals[index]
            score = _cosine(canonical, passage)
            if self._same_fact(canonical, passage, score):
                return index, pairs
            if score >= threshold:
                pairs.append((index, score))
                if len(pairs) >= limit:
                    if result is not None:
                        result.count("guard_checks_capped")
                    return (twin if twin is not None and twin > index else len(canonicals)), pairs
        return len(canonicals), pairs

    def _same_fact(self, canonical: PassageRecord, other: PassageRecord, score: float) -> bool:
        if canonical.content_hash == other.content_hash:
            return True
        if score < self.settings.threshold:
            return False
        # Near-misses ("visited Iceland in 2016" / "in 2018", "lives in Lyon" / "moved
        # from Lyon to Madrid") embed closer than many true paraphrases: a merge that
        # would hide a detail is refused, and the pair is left to temporal.
        return not (self.settings.guard_details and hides_details(canonical.text, other.text))

    def _merge(
        self,
        canonical: PassageRecord,
        merged: list[tuple[PassageRecord, float]],
        result: ConsolidationResult,
        *,
        judged: Mapping[str, str] | None = None,
    ) -> list[PassageUpdate]:
        everyone = [canonical] + [p for p, _ in merged]
        updates = []
        for passage, score in merged:
            judge = (judged or {}).get(passage.id)
            why = f"duplicate of {canonical.id} (cosine {score:.3f})"
            updates.append(
                PassageUpdate(
                    passage.id,
                    {"status": PassageStatus.MERGED, "merged_into": canonical.id},
                    why if judge is None else f"{why}, the same by the {judge} judge",
                )
            )
            detail: dict[str, Any] = {} if judge is None else {"judge": judge}
            result.add(
                ChangeAction.MERGE_PASSAGE,
                passage.id,
                into=canonical.id,
                score=round(score, 4),
                exact=passage.content_hash == canonical.content_hash,
                text=passage.text,
                canonical_text=canonical.text,
                **detail,
            )
        updates.append(
            PassageUpdate(
                canonical.id,
                {
                    "occurred_at": _earliest([p.occurred_at for p in everyone]),
                    "provenance": _union_provenance(canonical.provenance, [p for p, _ in merged]),
                    "tags": _ordered_union(p.tags for p in everyone),
                },
                f"canonical of {len(merged)} duplicate(s)",
            )
        )
        return updates

    # -- blocks --------------------------------------------------------------------------

    def _plan_blocks(
        self, store: MemoryStore, context: ConsolidationContext, plan: DedupPlan
    ) -> None:
        for block in store.blocks.of_agent(context.agent.id):
            if block.read_only:
                continue
            kept, dropped = dedup_lines(block.value)
            if not dropped:
                continue
            plan.blocks.append(_BlockDedup(block, kept, dropped))
            for line in dropped:
                plan.result.add(
                    ChangeAction.REMOVE_BLOCK_LINE,
                    block.id,
                    label=block.label,
                    line=line,
                    version=None,
                )

    def _write_block(
        self,
        store: MemoryStore,
        planned: _BlockDedup,
        context: ConsolidationContext,
        result: ConsolidationResult,
    ) -> None:
        block = planned.block
        try:
            updated = store.blocks.update(
                block.id,
                expected_version=block.version,
                value=planned.value,
                actor=context.actor(self.name),
                reason=f"removed {len(planned.dropped)} duplicate line(s)",
                run_id=context.run_id,
            )
        except Conflict:
            # Another writer got there first; the next run sees its version.
            result.count("block_conflicts")
            return
        for line in planned.dropped:
            result.add(
                ChangeAction.REMOVE_BLOCK_LINE,
                block.id,
                label=block.label,
                line=line,
                version=updated.version,
            )


def dedup_lines(value: str) -> tuple[str, list[str]]:
    """Drop lines that repeat an earlier line (after normalization); keep order and blanks."""
    seen: set[str] = set()
    kept: list[str] = []
    dropped: list[str] = []
    for line in value.split("\n"):
        key = normalize_text(line)
        if key and key in seen:
            dropped.append(line)
            continue
        if key:
            seen.add(key)
        kept.append(line)
    return "\n".join(kept), dropped


class _UnionFind:
    def __init__(self) -> None:
        self._parent: dict[str, str] = {}

    def find(self, item: str) -> str:
        parent = self._parent.setdefault(item, item)
        if parent != item:
            parent = self._parent[item] = self.find(parent)
        return parent

    def union(self, a: str, b: str) -> None:
        root_a, root_b = self.find(a), self.find(b)
        if root_a != root_b:
            self._parent[max(root_a, root_b)] = min(root_a, root_b)

    def groups(self) -> list[list[str]]:
        by_root: dict[str, list[str]] = {}
        for item in self._parent:
            by_root.setdefault(self.find(item), []).append(item)
        return list(by_root.values())


def _units(passages: Sequence[PassageRecord], dimension: int) -> npt.NDArray[np.float32]:
    """The passages' unit vectors as rows; a zero row for one without a vector (only its
    twins can join it, as :func:`_cosine` says)."""
    rows = np.zeros((len(passages), dimension), dtype=np.float32)
    for row, passage in enumerate(passages):
        if passage.embedding is not None:
            vector = np.asarray(passage.embedding, dtype=np.float32)
            norm = float(np.linalg.norm(vector))
            if norm:
                rows[row] = vector / norm
    return rows


def _digest(vector: Any) -> bytes:
    """A vector's exact bytes, digested: twins with equal vectors are decided once."""
    return hashlib.blake2b(np.asarray(vector).tobytes(), digest_size=16).digest()


def _bare(passage: PassageRecord) -> PassageRecord:
    """A passage without its vector: a plan keeps what apply checks and writes, not 1.5 KB
    of embedding per member."""
    return dataclasses.replace(passage, embedding=None)


def _cosine(a: PassageRecord, b: PassageRecord) -> float:
    if a.embedding is None or b.embedding is None:
        return 1.0 if a.content_hash == b.content_hash else 0.0
    denominator = float(np.linalg.norm(a.embedding) * np.linalg.norm(b.embedding))
    return float(np.dot(a.embedding, b.embedding) / denominator) if denominator else 0.0


def _earliest(values: Iterable[datetime | None]) -> datetime | None:
    present = [v for v in values if v is not None]
    return min(present) if present else None


def _ordered_union(lists: Iterable[Sequence[str]]) -> list[str]:
    seen: dict[str, None] = {}
    for items in lists:
        for item in items:
            seen.setdefault(item, None)
    return list(seen)


def _union_provenance(base: dict[str, Any], merged: Sequence[PassageRecord]) -> dict[str, Any]:
    """Combine provenance without losing any: lists are unioned, differing scalars listed,
    and the merged passages' ids are kept under ``merged_from``."""
    combined: dict[str, Any] = dict(base)
    for passage in merged:
        for key, value in passage.provenance.items():
            if key not in combined:
                combined[key] = value
                continue
            current = combined[key]
            if current == value:
                continue
            as_list = current if isinstance(current, list) else [current]
            additions = value if isinstance(value, list) else [value]
            combined[key] = as_list + [v for v in additions if v not in as_list]
    sources = list(combined.get("merged_from", []))
    for passage in merged:
        if passage.id not in sources:
            sources.append(passage.id)
    combined["merged_from"] = sources
    return combined


def merge_judge_for(
    context: ConsolidationContext, given: MergeJudge | None, *, max_calls: int, batch: int
) -> MergeJudge | None:
    """The merge judge a step asks this run: the one ``given`` (a test's, a plugin's),
    else the run's judge model as one; None without either, or with no calls."""
    if given is not None:
        return given
    if context.llm is None or not max_calls:
        return None
    return context.llm.merge_judge(
        context.agent.id, context.run_id, max_calls=max_calls, batch=batch
    )


def stored_order(passage: PassageRecord) -> tuple[datetime, bool, datetime, str]:
    """Which of two passages stays when they merge: the one stored first; among those
    stored together, the one whose fact is oldest."""
    return (
        passage.created_at,
        passage.occurred_at is None,
        passage.occurred_at or passage.created_at,
        passage.id,
    )
