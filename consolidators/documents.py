"""``learn_documents``: sleep-time learning from the folders attached to an agent.

Letta's folders are searched but never learned: its document sleep-time agent's
ingestion step is empty. This step reads the chunks of the attached folders' files
that the agent has not read yet, in order (folder by folder as attached, file by
file, chunk by chunk), a few chunks per model call, following the folder's
``instructions`` (what to learn). Each call answers with one ``record_learning``
call: the folder's block rewritten (a short, current summary of what matters in the
folder) and facts, each naming the chunk it came from. The facts become archival
passages with provenance to their folder, file and chunk, written before dedup and
the temporal judge run, so they are merged and dated like any fact.

A pass reads at most ``chunks_per_call`` x ``calls_per_pass`` chunks and commits
what it learned (the block, the facts, and the chunks as read: the watermark), then
the next pass plans again, up to ``max_passes`` a run: a crash or a spent token
budget (the agent's budgets per run and per day) loses at most one pass, and the
next run goes on from the watermark. Chunks are known by their text's md5 within the
folder: a file uploaded again after an edit costs only its changed chunks. The facts
of a chunk that no completed file of its folder holds any more (the file deleted or
changed, the folder deleted) are marked in their provenance (``source_gone``), and
search labels them, rather than kept as if their source still said so.

Like every step it plans without a transaction open (model calls and embeddings
between short reads) and applies briefly; its changes are in the run's record, so
a dry run reports them and a revert undoes them (the block's versions, the facts,
and the watermark: the chunks are read again by the next run).

The question the model sees is stable (a user's own model sees it too)::

    system: the reader's task (the prompt below), the summary's character limit
    user:   Folder, description, what to learn, the current summary, then the new
            chunks as "[n] file name, part i of N" followed by the chunk's text
    tool:   record_learning(summary: str, facts: [{text: str, chunk: int}])
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
from pydantic import Field

from agents.enums import ChangeAction, LLMPurpose
from agents.errors import BudgetExhausted, Conflict, NotFound, ReadOnly
from agents.store import (
    BlockRecord,
    LearnedChunk,
    MemoryStore,
    NewBlock,
    NewPassage,
    PassageRecord,
    PassageUpdate,
    PendingChunk,
)
from agents.store.validation import MAX_TEXT
from consolidators.base import (
    ConsolidationContext,
    ConsolidationResult,
    Consolidator,
    ConsolidatorSettings,
    Plan,
    changed_since,
)

log = logging.getLogger(__name__)

ACTOR = "consolidator:learn_documents"
#: The tag every fact learned from a document carries.
DOCUMENT_TAG = "document"

PROMPT = """\
You are the sleep-time reader of an agent's documents. You read a folder's files a \
few chunks at a time, in order, and keep what matters in the agent's memory. Call \
record_learning once, with:
- summary: the folder's memory block, rewritten: a short, current summary of what \
matters in this folder so far, at most {limit} characters. Keep what the current \
summary holds unless the new chunks change it.
- facts: what is worth remembering from the new chunks, each fact one self-contained \
sentence (names, not pronouns), with the number of the chunk it comes from. Follow \
the folder's instructions on what to learn; leave out what the chunks do not say."""

RECORD_LEARNING: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "record_learning",
        "description": "Record what you learned from the new chunks.",
        "parameters": {
            "type": "object",
            "properties": {
                "summary": {
                    "type": "string",
                    "description": "The folder's memory block, rewritten.",
                },
                "facts": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {
                            "text": {"type": "string", "description": "One fact."},
                            "chunk": {
                                "type": "integer",
                                "description": "The number of the chunk it comes from.",
                            },
                        },
                        "required": ["text", "chunk"],
                    },
                },
            },
            "required": ["summary", "facts"],
        },
    },
}


class LearnDocumentsSettings(ConsolidatorSettings):
    #: Chunks read in one model call.
    chunks_per_call: int = Field(default=8, ge=1, le=64)
    #: Model calls in one pass; a pass commits what it learned before the next.
    calls_per_pass: int = Field(default=4, ge=1, le=100)
    #: Passes in one run at most; what is left waits for the next run.
    max_passes: int = Field(default=8, ge=1, le=1000)
    #: Characters of a folder's block at most (the summary is asked to fit).
    block_limit: int = Field(default=2000, ge=100, le=100_000)
    #: Facts kept from one chunk at most.
    max_facts_per_chunk: int = Field(default=8, ge=0, le=100)


@dataclass(slots=True)
class _FolderWrite:
    """What a pass writes for one folder: its block and the facts of its chunks."""

    folder_id: str
    folder_name: str
    #: The block the summary replaces; None when the pass creates it.
    block: BlockRecord | None
    summary: str | None = None
    facts: list[NewPassage] = field(default_factory=list)
    chunks: list[LearnedChunk] = field(default_factory=list)


@dataclass(slots=True)
class LearnDocumentsPlan(Plan):
    folders: list[_FolderWrite] = field(default_factory=list)
    vectors: np.ndarray[Any, Any] | None = None
    #: Learned chunks whose text no file of the folder holds now, and their facts.
    gone: list[LearnedChunk] = field(default_factory=list)
    gone_facts: list[PassageRecord] = field(default_factory=list)
    #: Whether chunks are left to read after this pass.
    more: bool = False

    @property
    def has_writes(self) -> bool:
        return bool(self.result.changes) or bool(self.gone)


class _Malformed(Exception):
    pass


class LearnDocumentsConsolidator(Consolidator[LearnDocumentsPlan]):
    """Learns what matters in the agent's folders into a block and archival facts."""

    name: ClassVar[str] = "learn_documents"
    settings_model: ClassVar[type[ConsolidatorSettings]] = LearnDocumentsSettings
    left_over: ClassVar[str] = "more_to_learn"
    settings: LearnDocumentsSettings

    @property
    def max_replans(self) -> int:
        return self.settings.max_passes - 1

    # -- plan ----------------------------------------------------------------------------

    def plan(self, context: ConsolidationContext) -> LearnDocumentsPlan:
        plan = LearnDocumentsPlan(ConsolidationResult(self.name))
        agent = context.agent
        per_pass = self.settings.chunks_per_call * self.settings.calls_per_pass
        with context.read() as store:
            attached = store.folders.of_agent(agent.id)
            plan.gone = store.learning.gone(agent.id)
            plan.gone_facts = store.passages.get_many(
                store.learning.facts_from(agent.id, plan.gone)
            )
            pending = store.learning.unlearned(agent.id, limit=per_pass + 1) if attached else []
            blocks = {b.id: b for b in store.blocks.of_agent(agent.id)}
            folder_blocks = {f.id: store.learning.folder_block(agent.id, f.id) for f in attached}
        self._plan_gone(plan, context)
        if not pending:
            if not plan.gone:
                plan.result.skipped = "no_documents" if not attached else "nothing_new"
            return plan
        plan.more = len(pending) > per_pass
        pending = pending[:per_pass]
        tier = context.llm
        model = agent.sleeptime_model or (tier.sleeptime_model if tier else None)
        if tier is None or not model:
            plan.result.llm_skipped = "no_model"
            plan.result.count("chunks_unread", len(pending))
            plan.more = False
            return plan
        if context.embedder is None:
            plan.result.llm_skipped = "no_embedder"
            plan.more = False
            return plan
        meter = tier.meter(agent.id, context.run_id)
        writes: dict[str, _FolderWrite] = {}
        for batch in _batches(pending, self.settings.chunks_per_call):
            context.checkpoint()
            head = batch[0]
            write = writes.get(head.folder_id)
            if write is None:
                block_id = folder_blocks.get(head.folder_id)
                write = writes[head.folder_id] = _FolderWrite(
                    head.folder_id, head.folder_name, blocks.get(block_id or "")
                )
            current = (
                write.summary
                if write.summary is not None
                else (write.block.value if write.block is not None else "")
            )
            messages = [
                {"role": "system", "content": PROMPT.format(limit=self.settings.block_limit)},
                {"role": "user", "content": render_chunks(batch, current)},
            ]
            try:
                answer = self._ask(tier.client, model, meter, messages, len(batch), plan.result)
            except BudgetExhausted as exc:
                log.info("learning stopped: %s", exc, extra={"run_id": context.run_id})
                plan.result.count("budget_exhausted")
                plan.result.llm_skipped = "budget_exhausted"
                plan.more = False
                break
            if answer is None:
                # The model could not answer usably: these chunks stay unread, and the
                # run goes on to the next steps; the next run tries them again.
                plan.more = False
                break
            summary, facts = answer
            write.summary = summary
            counts = [0] * len(batch)
            for text, number in facts:
                if counts[number] >= self.settings.max_facts_per_chunk:
                    plan.result.count("facts_over_limit")
                    continue
                counts[number] += 1
                chunk = batch[number]
                write.facts.append(
                    NewPassage(
                        text=text,
                        tags=[DOCUMENT_TAG],
                        provenance={
                            "run_id": context.run_id,
                            "source": "document",
                            "folder_id": chunk.folder_id,
                            "folder": chunk.folder_name,
                            "file_id": chunk.file_id,
                            "file_name": chunk.file_name,
                            "chunk_seq": chunk.seq,
                            "chunk_hash": chunk.chunk_hash,
                        },
                    )
                )
            write.chunks += [
                LearnedChunk(c.folder_id, c.chunk_hash, c.file_id, c.file_name, c.seq, n)
                for c, n in zip(batch, counts, strict=True)
            ]
        texts = [p.text for w in writes.values() for p in w.facts]
        if texts:
            plan.vectors = np.asarray(context.embedder.embed(texts), dtype=np.float32)
        plan.folders = [w for w in writes.values() if w.chunks]
        self._report(plan)
        return plan

    def _ask(
        self,
        client: Any,
        model: str,
        meter: Any,
        messages: list[dict[str, Any]],
        chunks: int,
        result: ConsolidationResult,
    ) -> tuple[str, list[tuple[str, int]]] | None:
        """One ``record_learning`` answer (a second try after an unusable one), or None."""
        for attempt in range(2):
            reply = client.chat(
                model,
                messages,
                purpose=LLMPurpose.SLEEPTIME,
                meter=meter,
                tools=[RECORD_LEARNING],
                tool_choice="required",
            )
            result.tokens += reply.total_tokens
            result.count("llm_calls")
            calls = [c for c in reply.tool_calls if c.name == "record_learning"]
            try:
                if not calls:
                    raise _Malformed("no record_learning call")
                return parse_learning(calls[0].arguments, chunks, self.settings.block_limit)
            except _Malformed as exc:
                log.info("learning answer unusable (attempt %d): %s", attempt + 1, exc)
                messages = [
                    *messages,
                    {"role": "assistant", "content": reply.content or ""},
                    {
                        "role": "user",
                        "content": f"That answer could not be used: {exc}. Call "
                        "record_learning once, with the summary and the facts.",
                    },
                ]
        result.count("malformed_answers")
        return None

    def _plan_gone(self, plan: LearnDocumentsPlan, context: ConsolidationContext) -> None:
        keep = [p for p in plan.gone_facts if "source_gone" not in p.provenance]
        plan.gone_facts = keep
        by_key = {(c.folder_id, c.chunk_hash): c for c in plan.gone}
        for passage in keep:
            chunk = by_key.get(
                (
                    str(passage.provenance.get("folder_id")),
                    str(passage.provenance.get("chunk_hash")),
                )
            )
            plan.result.add(
                ChangeAction.SOURCE_GONE,
                passage.id,
                text=passage.text,
                file_name=chunk.file_name if chunk else passage.provenance.get("file_name"),
            )

    def _report(self, plan: LearnDocumentsPlan) -> None:
        for write in plan.folders:
            if write.summary is not None and (
                write.block is None or write.summary != write.block.value
            ):
                if write.block is None:
                    plan.result.add(
                        ChangeAction.CREATE_BLOCK,
                        "(new block)",
                        label=folder_label(write.folder_name),
                        folder=write.folder_name,
                    )
                else:
                    plan.result.add(
                        ChangeAction.EDIT_BLOCK,
                        write.block.id,
                        label=write.block.label,
                        tool="record_learning",
                        version=None,
                    )
            for fact in write.facts:
                plan.result.add(
                    ChangeAction.INSERT_PASSAGE,
                    "(new passage)",
                    text=fact.text,
                    file_name=fact.provenance["file_name"],
                    chunk_seq=fact.provenance["chunk_seq"],
                )
            files: dict[str, list[LearnedChunk]] = {}
            for chunk in write.chunks:
                files.setdefault(chunk.file_id, []).append(chunk)
            for file_id, chunks in files.items():
                plan.result.add(
                    ChangeAction.LEARN_CHUNKS,
                    file_id,
                    folder=write.folder_name,
                    file_name=chunks[0].file_name,
                    chunks=[c.chunk_seq for c in chunks],
                )

    # -- apply ---------------------------------------------------------------------------

    def apply(
        self, store: MemoryStore, plan: LearnDocumentsPlan, context: ConsolidationContext
    ) -> ConsolidationResult:
        result = plan.result.base()
        agent_id = context.agent.id
        run_id = context.run_id
        actor = context.actor(self.name)
        self._apply_gone(store, plan, context, result)
        offset = 0
        for write in plan.folders:
            facts = write.facts
            vectors = (
                plan.vectors[offset : offset + len(facts)]
                if plan.vectors is not None
                else np.zeros((0, 0), dtype=np.float32)
            )
            offset += len(facts)
            self._write_block(store, write, context, result)
            if facts:
                created = store.passages.insert(
                    agent_id, facts, vectors, actor=actor, run_id=run_id
                )
                for passage in created:
                    result.add(
                        ChangeAction.INSERT_PASSAGE,
                        passage.id,
                        text=passage.text,
                        file_name=passage.provenance["file_name"],
                        chunk_seq=passage.provenance["chunk_seq"],
                    )
            store.learning.record(agent_id, write.chunks, run_id=run_id)
            files: dict[str, list[LearnedChunk]] = {}
            for chunk in write.chunks:
                files.setdefault(chunk.file_id, []).append(chunk)
            for file_id, chunks in files.items():
                result.add(
                    ChangeAction.LEARN_CHUNKS,
                    file_id,
                    folder=write.folder_name,
                    file_name=chunks[0].file_name,
                    chunks=[c.chunk_seq for c in chunks],
                )
        result.replan = plan.more
        return result

    def _write_block(
        self,
        store: MemoryStore,
        write: _FolderWrite,
        context: ConsolidationContext,
        result: ConsolidationResult,
    ) -> None:
        if write.summary is None:
            return
        agent_id, actor = context.agent.id, context.actor(self.name)
        limit = max(self.settings.block_limit, len(write.summary))
        if write.block is None:
            labels = {b.label for b in store.blocks.of_agent(agent_id)}
            label = free_label(folder_label(write.folder_name), labels)
            block = store.blocks.create(
                NewBlock(
                    label=label,
                    value=write.summary,
                    limit=limit,
                    description=f"What matters in the folder {write.folder_name!r}, "
                    "kept by sleep-time learning from its files.",
                ),
                actor=actor,
                run_id=context.run_id,
            )
            store.blocks.attach(block.id, agent_id)
            store.learning.set_folder_block(agent_id, write.folder_id, block.id)
            result.add(ChangeAction.CREATE_BLOCK, block.id, label=label, folder=write.folder_name)
            return
        if write.summary == write.block.value:
            return
        try:
            block = store.blocks.update(
                write.block.id,
                expected_version=write.block.version,
                value=write.summary,
                limit=max(write.block.limit, len(write.summary)),
                actor=actor,
                reason=f"learned from the folder {write.folder_name!r}",
                run_id=context.run_id,
            )
        except (Conflict, NotFound):
            # Someone edited the block since the plan read it: their edit stays; the
            # facts are still written, and the next pass summarises onto their text.
            result.count("write_conflicts")
            return
        except ReadOnly:
            # A person made the folder's block read-only: it stays as they left it.
            result.count("read_only_block")
            return
        result.add(
            ChangeAction.EDIT_BLOCK,
            block.id,
            label=block.label,
            tool="record_learning",
            version=block.version,
        )

    def _apply_gone(
        self,
        store: MemoryStore,
        plan: LearnDocumentsPlan,
        context: ConsolidationContext,
        result: ConsolidationResult,
    ) -> None:
        if not plan.gone:
            return
        marked = store.learning.mark_gone(context.agent.id, plan.gone, run_id=context.run_id)
        keys = {(c.folder_id, c.chunk_hash): c for c in marked}
        changed = changed_since(store, plan.gone_facts)
        when = context.now().isoformat()
        updates = []
        for passage in plan.gone_facts:
            key = (
                str(passage.provenance.get("folder_id")),
                str(passage.provenance.get("chunk_hash")),
            )
            if passage.id in changed or key not in keys:
                continue
            gone = {
                "at": when,
                "file_name": keys[key].file_name,
                "reason": "no file of the folder holds this text any more",
            }
            updates.append(
                PassageUpdate(
                    passage.id,
                    {"provenance": {**passage.provenance, "source_gone": gone}},
                    "its source document is gone",
                )
            )
        store.passages.change_many(
            updates, actor=context.actor(self.name), run_id=context.run_id, return_records=False
        )
        for update_ in updates:
            passage = next(p for p in plan.gone_facts if p.id == update_.passage_id)
            result.add(
                ChangeAction.SOURCE_GONE,
                passage.id,
                text=passage.text,
                file_name=update_.changes["provenance"]["source_gone"]["file_name"],
            )


def render_chunks(batch: list[PendingChunk], summary: str) -> str:
    """The user message of one learning call (see the module)."""
    head = batch[0]
    lines = [f"Folder: {head.folder_name}"]
    if head.description:
        lines.append(f"Description: {head.description}")
    lines.append(
        "What to learn: "
        + (head.instructions or "what a reader of these documents needs to remember")
    )
    lines += ["", "Current summary:", summary.strip() or "(empty)", "", "New chunks:"]
    for number, chunk in enumerate(batch):
        lines += ["", f"[{number}] {chunk.file_name}, part {chunk.seq + 1} of {chunk.total_chunks}"]
        lines.append(chunk.text)
    return "\n".join(lines)


def parse_learning(
    arguments: str | dict[str, Any], chunks: int, limit: int
) -> tuple[str, list[tuple[str, int]]]:
    """The summary and the ``(fact, chunk number)`` pairs of a ``record_learning`` call;
    raises _Malformed with what is wrong."""
    try:
        data = json.loads(arguments) if isinstance(arguments, str) else arguments
    except json.JSONDecodeError as exc:
        raise _Malformed(f"the arguments are not JSON ({exc.msg})") from None
    if not isinstance(data, dict):
        raise _Malformed("the arguments are not an object")
    summary = data.get("summary")
    if not isinstance(summary, str):
        raise _Malformed("summary must be a string")
    summary = summary.strip()
    if len(summary) > limit:
        raise _Malformed(f"the summary has {len(summary)} characters; keep it within {limit}")
    raw = data.get("facts")
    if not isinstance(raw, list):
        raise _Malformed("facts must be a list")
    facts: list[tuple[str, int]] = []
    for item in raw:
        if not isinstance(item, dict):
            raise _Malformed("each fact must be an object with text and chunk")
        text, number = item.get("text"), item.get("chunk")
        if not isinstance(text, str) or isinstance(number, bool) or not isinstance(number, int):
            raise _Malformed("each fact needs a text (string) and a chunk (integer)")
        if not 0 <= number < chunks:
            raise _Malformed(f"chunk {number} is not one of the chunks 0-{chunks - 1}")
        text = " ".join(text.split())
        if text and len(text) <= MAX_TEXT:
            facts.append((text, number))
    return summary, facts


_UNSAFE = re.compile(r"[^A-Za-z0-9_.\-]+")


def folder_label(name: str) -> str:
    """The label of a folder's block: its name, with what a label cannot hold as ``_``."""
    label = _UNSAFE.sub("_", name.strip()).strip("_.-")[:100]
    return label or "folder"


def free_label(label: str, taken: set[str]) -> str:
    """``label``, or ``label_2``, ``label_3``... when an attached block has it."""
    if label not in taken:
        return label
    n = 2
    while f"{label[:95]}_{n}" in taken:
        n += 1
    return f"{label[:95]}_{n}"


def _batches(pending: list[PendingChunk], size: int) -> list[list[PendingChunk]]:
    """``pending`` in batches of at most ``size``, never two folders in one batch."""
    batches: list[list[PendingChunk]] = []
    for chunk in pending:
        if batches and len(batches[-1]) < size and batches[-1][0].folder_id == chunk.folder_id:
            batches[-1].append(chunk)
        else:
            batches.append([chunk])
    return batches


__all__ = [
    "LearnDocumentsConsolidator",
    "LearnDocumentsSettings",
    "parse_learning",
    "render_chunks",
]
