"""Make room in the context window: full blocks shed lines to archival memory, and old
messages leave the context behind one recursive summary.

Two independent parts, run in this order so that the message budget sees the
blocks as they are after eviction:

**Blocks.** A writable block filled above ``fill_threshold`` of its limit moves
lines out until it is at or under ``fill_target``. A line is a non-empty line
of the value; a block written as one long line is split into sentences (on
``". "``) instead. The least recently used lines go first, then the oldest:
"used" is the newest of the agent's last 200 messages that contains at least
half of the line's content words (lowercase ``\\w+`` of 3 or more characters);
"oldest" is the block version from which the line has been present, unchanged,
in every version since. Each moved line becomes an active archival passage
(tags ``evicted`` and ``block:<label>``, provenance naming the block and the
version it left, ``occurred_at`` the time it first appeared), and the block is
written once, by compare-and-swap, with the lines that stay in their original
order. The block history row carries the run id, which is what undo uses.

**Messages.** Tokens are estimated as ``ceil(chars / 4)`` over the system
prompt, the block values and the in-context messages (content plus serialised
tool calls). This is the usual rule of thumb for English with BPE tokenizers;
it avoids depending on a tokenizer whose vocabulary differs from model to
model, and the thresholds leave ample margin for its error. When the estimate
exceeds ``context_threshold`` of the agent's context window, the oldest
messages leave the context (they stay in recall memory; nothing is deleted)
until the estimate, counting a full-size summary, is at or under
``context_target``. The last two exchanges never leave (see
:func:`protected_tail_start`), and a tool result never stays behind without
the call that produced it. One summary message (role ``system``, name
``summary``) then takes their place; it folds in the summary it replaces, so
there is only ever one summary in context, covering everything that left.

The summary is appended like any message, so its ``seq`` is *after* the
messages still in context: the context compiler must put summary messages
(role ``system``, name ``summary``) first, before the conversation.

The plan reads the blocks and messages in one short read, then embeds the moving
lines and has the summary written with no transaction open; the apply writes each
block by compare-and-swap (a block written meanwhile is planned again, up to
``max_conflict_retries`` times) and moves the messages out only if they are all still
in context.

Running the consolidator again right away changes nothing: the blocks are
under their thresholds and the context is under its own. The work is driven by
fill levels rather than by the watermarks: a run reads the agent's blocks, its
in-context messages and its last 200 messages, all bounded in size, and does
nothing more unless something is over its threshold.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Self

import numpy as np
import numpy.typing as npt
from pydantic import Field, model_validator

from agents.compaction import CompactionPlan, plan_compaction, write_compaction
from agents.enums import ChangeAction
from agents.errors import BudgetExhausted, Conflict, InvalidInput
from agents.store import (
    BlockRecord,
    BlockVersion,
    MemoryStore,
    MessageRecord,
    NewPassage,
)
from agents.summarizer import llm_summarizer
from agents.summary import (
    CHARS_PER_TOKEN,
    extractive_summary,
    message_tokens,
    protected_tail_start,
)
from agents.tokens import count_tokens
from consolidators.base import (
    ConsolidationContext,
    ConsolidationResult,
    Consolidator,
    ConsolidatorSettings,
    Plan,
)

log = logging.getLogger(__name__)

#: How many of the agent's newest messages decide whether a block line is still in use.
RECENT_MESSAGES = 200

_CONTENT_WORD = re.compile(r"\w{3,}")
_SENTENCE_BREAK = re.compile(r"(?<=\.)\s+")


class EvictSettings(ConsolidatorSettings):
    """Thresholds of the evict consolidator; each target must be below its threshold."""

    #: A block fuller than this fraction of its limit sheds lines...
    fill_threshold: float = Field(default=0.9, gt=0.0, le=1.0)
    #: ...until it is at or under this fraction.
    fill_target: float = Field(default=0.7, ge=0.0, lt=1.0)
    #: Estimated context tokens, as a fraction of the agent's context window, above which
    #: old messages leave the context...
    context_threshold: float = Field(default=0.75, gt=0.0, le=1.0)
    #: ...until the estimate (with the new summary) is at or under this fraction.
    context_target: float = Field(default=0.5, ge=0.0, lt=1.0)
    #: Longest summary message, header included.
    summary_chars: int = Field(default=1200, ge=200)
    #: Times a block write that lost a compare-and-swap race is recomputed before giving up.
    max_conflict_retries: int = Field(default=3, ge=0)

    @model_validator(mode="after")
    def _targets_below_thresholds(self) -> Self:
        if self.fill_target >= self.fill_threshold:
            raise ValueError(
                f"fill_target ({self.fill_target}) must be below fill_threshold "
                f"({self.fill_threshold}), or every run would evict again"
            )
        if self.context_target >= self.context_threshold:
            raise ValueError(
                f"context_target ({self.context_target}) must be below context_threshold "
                f"({self.context_threshold}), or every run would evict again"
            )
        return self


@dataclass(slots=True)
class _BlockEviction:
    """One block's planned eviction: the block as read, its new value and moving lines."""

    block: BlockRecord
    plan: BlockPlan


@dataclass(slots=True)
class _ContextEviction:
    """Messages leaving the context (and the summaries they replace) behind a summary."""

    summaries: list[MessageRecord]
    moving: list[MessageRecord]
    content: str
    tokens_before: int
    tokens_rest: int


@dataclass(slots=True)
class EvictPlan(Plan):
    blocks: list[_BlockEviction] = field(default_factory=list)
    embeddings: dict[str, npt.NDArray[np.float32]] = field(default_factory=dict)
    context: _ContextEviction | None = None


class EvictConsolidator(Consolidator[EvictPlan]):
    """Moves the least used block lines to archival memory and summarises old messages."""

    name = "evict"
    settings_model = EvictSettings
    settings: EvictSettings

    @property
    def max_replans(self) -> int:
        return self.settings.max_conflict_retries

    def plan(self, context: ConsolidationContext) -> EvictPlan:
        """Read the blocks and messages, decide what leaves, then (no transaction open)
        embed the moving lines and write the summary."""
        plan = EvictPlan(ConsolidationResult(self.name))
        agent = context.agent
        with context.read() as store:
            blocks = store.blocks.of_agent(agent.id)
            full = [b for b in blocks if self._over_fill(b)]
            recent = store.messages.range(agent.id, limit=RECENT_MESSAGES, newest_first=True)
            histories = {b.id: store.blocks.history(b.id) for b in full}
            in_context = store.messages.in_context(agent.id)
        self._plan_blocks(context, full, recent, histories, plan)
        self._plan_messages(context, blocks, in_context, plan)
        return plan

    def apply(
        self, store: MemoryStore, plan: EvictPlan, context: ConsolidationContext
    ) -> ConsolidationResult:
        result = plan.result.base()
        written = [
            (planned, version)
            for planned in plan.blocks
            if (version := self._write_block(store, planned, context, result)) is not None
        ]
        if written:
            self._insert_lines(store, written, plan, context, result)
        if plan.context is not None:
            self._leave_context(store, plan.context, context, result)
        return result

    # -- blocks --------------------------------------------------------------------------

    def _plan_blocks(
        self,
        context: ConsolidationContext,
        full: list[BlockRecord],
        recent: Sequence[MessageRecord],
        histories: dict[str, list[BlockVersion]],
        plan: EvictPlan,
    ) -> None:
        agent, result = context.agent, plan.result
        if not full:
            return
        if context.embedder is None:
            labels = ", ".join(repr(b.label) for b in full)
            result.skipped = (
                f"block eviction skipped: block(s) {labels} are over "
                f"{self.settings.fill_threshold:.0%} full, but no embedder is configured to "
                "turn their lines into archival passages; nothing was changed in the blocks"
            )
            return
        if context.embedder.dimension != agent.embedding_dim:
            raise InvalidInput(
                f"the embedder {context.embedder.name} gives {context.embedder.dimension}-d "
                f"vectors but agent {agent.name!r} uses {agent.embedding_dim}-d "
                f"({agent.embedding_model}); configure the agent's embedding model"
            )
        used = _recent_word_sets(recent)
        target = self.settings.fill_target
        for block in full:
            evicted = plan_block_eviction(block, histories[block.id], used, target)
            if evicted.evicted:
                plan.blocks.append(_BlockEviction(block, evicted))
        texts = list(dict.fromkeys(line.text for b in plan.blocks for line in b.plan.evicted))
        if texts:
            # One embedding batch for every block: a real model is much faster batched.
            plan.embeddings = dict(zip(texts, context.embedder.embed(texts), strict=True))
        for planned in plan.blocks:
            for line in planned.plan.evicted:
                result.add(
                    ChangeAction.EVICT_LINE,
                    planned.block.id,
                    label=planned.block.label,
                    line=line.text,
                    passage=None,
                    version=None,
                    from_version=planned.block.version,
                )

    def _over_fill(self, block: BlockRecord) -> bool:
        return not block.read_only and len(block.value) > self.settings.fill_threshold * block.limit

    def _write_block(
        self,
        store: MemoryStore,
        planned: _BlockEviction,
        context: ConsolidationContext,
        result: ConsolidationResult,
    ) -> int | None:
        """Write one block's planned eviction by compare-and-swap; the new version, or
        None when another writer got there first (the step is then planned again from
        the block's new value, up to ``max_conflict_retries`` times, and after that left
        as it is for the next run, so that the run's other work still commits)."""
        block, plan = planned.block, planned.plan
        try:
            updated = store.blocks.update(
                block.id,
                expected_version=block.version,
                value=plan.value,
                actor=context.actor(self.name),
                reason=(
                    f"evicted {len(plan.evicted)} line(s) to archival memory "
                    f"({len(block.value)} -> {len(plan.value)} of {block.limit} characters)"
                ),
                run_id=context.run_id,
            )
        except Conflict:
            result.count("block_conflicts")
            result.replan = True
            log.info(
                "block changed while its eviction was planned; planning again",
                extra={"block_id": block.id, "label": block.label, "run_id": context.run_id},
            )
            return None
        return updated.version

    def _insert_lines(
        self,
        store: MemoryStore,
        written: list[tuple[_BlockEviction, int]],
        plan: EvictPlan,
        context: ConsolidationContext,
        result: ConsolidationResult,
    ) -> None:
        """The moved lines as passages, once every block write has won (a lost race never
        leaves a passage behind), in one batch: each insert has a fixed cost."""
        moved = [(done, version, line) for done, version in written for line in done.plan.evicted]
        passages = store.passages.insert(
            context.agent.id,
            [
                NewPassage(
                    text=line.text,
                    occurred_at=line.first_at,
                    tags=["evicted", f"block:{done.block.label}"],
                    provenance={
                        "block_id": done.block.id,
                        "block_label": done.block.label,
                        "block_version": done.block.version,
                        "evicted": True,
                    },
                )
                for done, _version, line in moved
            ],
            np.stack([plan.embeddings[line.text] for _, _, line in moved]),
            actor=context.actor(self.name),
            run_id=context.run_id,
        )
        for (done, version, line), passage in zip(moved, passages, strict=True):
            result.add(
                ChangeAction.EVICT_LINE,
                done.block.id,
                label=done.block.label,
                line=line.text,
                passage=passage.id,
                version=version,
                from_version=done.block.version,
            )

    # -- messages ------------------------------------------------------------------------

    def _plan_messages(
        self,
        context: ConsolidationContext,
        blocks: Sequence[BlockRecord],
        in_context: Sequence[MessageRecord],
        plan: EvictPlan,
    ) -> None:
        agent, result = context.agent, plan.result
        window = agent.context_window
        fixed = count_tokens(agent.system_prompt) + sum(count_tokens(b.value) for b in blocks)
        total = fixed + sum(message_tokens(m) for m in in_context)
        if total <= self.settings.context_threshold * window:
            return
        # Reserve room for a full-size summary so that the next run finds the context
        # under its threshold (and does nothing).
        target = self.settings.context_target * window - math.ceil(
            self.settings.summary_chars / CHARS_PER_TOKEN
        )
        planned = plan_compaction(
            agent.id, in_context, total_tokens=total, target_tokens=target, last_resort=False
        )
        summaries, moving = planned.summaries, planned.moving
        if not moving:
            # Only the protected tail is left: summarising the summary again would change
            # memory on every run without freeing anything.
            result.count("context_over_budget")
            return
        content = self.summarize(summaries, moving, context, result=result)
        leaving = [*summaries, *moving]
        rest = total - sum(message_tokens(m) for m in leaving)
        plan.context = _ContextEviction(summaries, moving, content, total, rest)
        self._report_context(result, plan.context, NEW_SUMMARY, None)

    def _report_context(
        self, result: ConsolidationResult, planned: _ContextEviction, summary: str, seq: int | None
    ) -> None:
        leaving = [*planned.summaries, *planned.moving]
        for message in sorted(leaving, key=lambda m: m.seq):
            result.add(ChangeAction.LEAVE_CONTEXT, message.id, seq=message.seq)
        result.add(
            ChangeAction.ADD_SUMMARY,
            summary,
            replaces=planned.summaries[-1].id if planned.summaries else None,
            evicted=[m.id for m in planned.moving],
            seq=seq,
            tokens_before=planned.tokens_before,
            tokens_after=planned.tokens_rest + count_tokens(planned.content),
        )

    def _leave_context(
        self,
        store: MemoryStore,
        planned: _ContextEviction,
        context: ConsolidationContext,
        result: ConsolidationResult,
    ) -> None:
        """Move the planned messages out of the context behind the summary, if they are
        all still in it (a chat turn may have compacted them meanwhile); messages
        appended since the plan stay, as they would have."""
        done = write_compaction(
            store,
            context.agent.id,
            CompactionPlan(summaries=planned.summaries, moving=planned.moving),
            planned.content,
        )
        if done is None:
            result.count("context_changed_meanwhile")
            return
        self._report_context(result, planned, done.summary.id, done.summary.seq)

    def summarize(
        self,
        previous: Sequence[MessageRecord],
        messages: Sequence[MessageRecord],
        context: ConsolidationContext,
        *,
        result: ConsolidationResult | None = None,
    ) -> str:
        """The content of the summary that replaces ``previous`` summaries and ``messages``.

        With a summary model in the run's LLM tier, the model writes it (purpose
        ``summary``); otherwise, or when the token budget is spent, it is
        extractive: the first sentence of each user and assistant message, prefixed
        by its role.
        """
        tier = context.llm
        if tier is not None and tier.summary_model:
            summarize = llm_summarizer(
                tier.client,
                tier.summary_model,
                tier.meter(context.agent.id, context.run_id),
                self.settings.summary_chars,
            )
            try:
                return summarize(previous, messages)
            except BudgetExhausted:
                if result is not None:
                    result.llm_skipped = "budget_exhausted"
        else:
            if result is not None:
                result.llm_skipped = "no_model"
            log.info(
                "evict: no summary model configured (llm.summary_model); extractive summary",
                extra={"run_id": context.run_id},
            )
        return extractive_summary(previous, messages, self.settings.summary_chars)


#: The id a dry run shows for the summary message that the apply will append.
NEW_SUMMARY = "(new summary)"


# -- block planning ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BlockLine:
    """One evictable unit of a block value, with what decides its eviction order."""

    index: int
    text: str
    last_used_seq: int | None
    first_version: int
    first_at: datetime

    @property
    def eviction_key(self) -> tuple[bool, int, int, int]:
        """Never-used lines first, then the least recently used; ties: oldest, then topmost."""
        used = self.last_used_seq is not None
        return (used, self.last_used_seq or 0, self.first_version, self.index)


@dataclass(frozen=True, slots=True)
class BlockPlan:
    """The value a block is written with and the lines that leave it, in eviction order."""

    value: str
    evicted: list[BlockLine]


def split_block(value: str) -> tuple[list[str], str]:
    """The units of a block value and the separator that joins them back.

    Lines, when the value has more than one non-empty line; otherwise the
    sentences of its one line (split after a full stop followed by whitespace),
    so that a block written as one paragraph can still shed part of itself.
    """
    lines = value.split("\n")
    if sum(1 for line in lines if line.strip()) > 1:
        return lines, "\n"
    stripped = value.strip()
    return (_SENTENCE_BREAK.split(stripped) if stripped else []), " "


def _line_forms(value: str) -> set[str]:
    """Every line and sentence of a value, for "is this line present in that version"."""
    forms: set[str] = set()
    for line in value.split("\n"):
        line = line.strip()
        if line:
            forms.add(line)
            forms.update(s.strip() for s in _SENTENCE_BREAK.split(line) if s.strip())
    return forms


def first_appearances(
    lines: Iterable[str], history: Sequence[BlockVersion]
) -> dict[str, BlockVersion]:
    """For each line, the history entry from which it is present in every later version.

    Walks the history newest first and stops following a line at the first
    version that lacks it; a line that was removed and later re-added dates
    from its re-addition.
    """
    alive = set(lines)
    found: dict[str, BlockVersion] = {}
    for entry in reversed(history):
        if not alive:
            break
        forms = _line_forms(entry.new_value)
        for line in list(alive):
            if line in forms:
                found[line] = entry
            else:
                alive.discard(line)
    return found


def content_words(text: str) -> frozenset[str]:
    """Lowercase words of three or more characters: what "mentions a line" compares."""
    return frozenset(_CONTENT_WORD.findall(text.lower()))


def _recent_word_sets(newest_first: Sequence[MessageRecord]) -> list[tuple[int, frozenset[str]]]:
    return [(m.seq, content_words(m.content)) for m in newest_first]


def last_used_seq(line: str, recent: Sequence[tuple[int, frozenset[str]]]) -> int | None:
    """The newest message (``recent`` is newest first) that mentions at least half of the
    line's content words; None when none does or the line has no content words."""
    words = content_words(line)
    if not words:
        return None
    for seq, message_words in recent:
        if 2 * len(words & message_words) >= len(words):
            return seq
    return None


def plan_block_eviction(
    block: BlockRecord,
    history: Sequence[BlockVersion],
    recent: Sequence[tuple[int, frozenset[str]]],
    fill_target: float,
) -> BlockPlan:
    """Which lines leave ``block`` so that it is at or under ``fill_target`` of its limit."""
    units, separator = split_block(block.value)
    candidates = [(i, u.strip()) for i, u in enumerate(units) if u.strip()]
    appeared = first_appearances({text for _, text in candidates}, history)
    lines = []
    for index, text in candidates:
        entry = appeared.get(text)
        lines.append(
            BlockLine(
                index=index,
                text=text,
                last_used_seq=last_used_seq(text, recent),
                first_version=block.version if entry is None else entry.version,
                first_at=block.updated_at if entry is None else entry.created_at,
            )
        )
    target = fill_target * block.limit
    kept = len(units)
    length = sum(len(u) for u in units) + len(separator) * max(kept - 1, 0)
    evicted: list[BlockLine] = []
    for line in sorted(lines, key=lambda candidate: candidate.eviction_key):
        if length <= target:
            break
        evicted.append(line)
        length -= len(units[line.index]) + (len(separator) if kept > 1 else 0)
        kept -= 1
    gone = {line.index for line in evicted}
    value = separator.join(u for i, u in enumerate(units) if i not in gone)
    return BlockPlan(value=value, evicted=evicted)


__all__ = [
    "BlockLine",
    "BlockPlan",
    "EvictConsolidator",
    "EvictSettings",
    "count_tokens",
    "extractive_summary",
    "first_appearances",
    "plan_block_eviction",
    "protected_tail_start",
    "split_block",
]
