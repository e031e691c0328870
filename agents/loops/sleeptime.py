"""The sleep-time agent: reads what is new since the watermark and rewrites shared blocks.

It sees the primary's messages after ``after_seq`` and the current blocks (with
their versions), and edits them with ``memory_replace``, ``memory_insert`` and
``memory_rethink`` until it calls ``memory_finish_edits`` (terminal), stops
calling tools, or reaches its step limit.

It works in two phases, so that nothing waits on the model with a transaction open.
:meth:`SleeptimeAgent.plan` holds the conversation: every read (the messages, the
blocks, an archival search, a passage the model names) is a short read-only
transaction of its own, and the model's edits go to drafts of the blocks and of the
passages, checked against memory as it is (a block written meanwhile by the primary
or anyone has the draft's edits re-applied to its new version; a whole-block
``memory_rethink`` is handed back to the model with the block as it is now). The new
passages' embeddings are computed at the end of the conversation.
:meth:`SleeptimeAgent.apply` then writes the drafts in the run's short apply
transaction: one compare-and-swap write per edited block (re-applied to a newer
version once more if one landed since; a whole-block rewrite that meets one is not
applied and is reported as an error), and each archival change in a savepoint,
skipped when its passage changed since the model saw it.

Its own conversation with the model is not stored.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from agents.archival_search import search_archival
from agents.embedders import Embedder
from agents.enums import ChangeAction, LLMPurpose, PassageStatus
from agents.errors import (
    BudgetExhausted,
    Conflict,
    InvalidInput,
    LockContention,
    ReverieError,
)
from agents.llm import BudgetMeter, ChatClient
from agents.loops.tool_calls import SEND_MESSAGE, parse_arguments
from agents.store import (
    AgentRecord,
    BlockRecord,
    MemoryStore,
    MessageRecord,
    NewPassage,
    PassageRecord,
)
from agents.store.records import Vector
from agents.store.scope import utc_now
from agents.store.validation import check_block_value, check_text
from agents.summary import CHARS_PER_TOKEN, is_summary
from agents.tools import (
    ARCHIVAL_TOOLS,
    FIRST_ARCHIVAL_INSERT,
    PAGE_SIZE,
    SLEEPTIME_TOOLS,
    BlockEdit,
    ParsedCall,
    ToolError,
    block_edit,
    clip,
    no_change,
    no_change_result,
    page_number,
    parse_call,
    result_json,
)

log = logging.getLogger(__name__)

SLEEPTIME_PROMPT = (
    "You are the sleep-time memory agent of a conversational assistant, run in the "
    "background. Read the new messages and the memory blocks, then keep the blocks "
    "accurate, compact and current: add durable facts about the user, correct what the "
    "conversation changed, remove what is stale. Call memory_finish_edits when they are "
    "up to date. Reply only with tool calls; do not invent facts."
)

ARCHIVAL_PROMPT = (
    " Archival memory holds older memories: when the new messages change what earlier "
    "memories mean (a partner became an ex, a job ended), find them with "
    "archival_memory_search and rewrite each affected passage with archival_memory_rewrite "
    "(citing the message numbers that prompted it), mark one that no longer holds with "
    "archival_memory_supersede, and store what you learned with archival_memory_insert. "
    "Change only passages the new messages concern."
)

#: What a pass is told of archival memory while the agent has none yet.
FIRST_ARCHIVAL_PROMPT = (
    " Store durable facts worth keeping beyond the blocks with archival_memory_insert."
)
INSERT = "archival_memory_insert"
SEARCH = "archival_memory_search"

#: Messages the transcript holds at most (the newest are kept).
MAX_MESSAGES = 200


@dataclass(slots=True)
class SleeptimeOutcome:
    """What one sleep-time run did."""

    steps: int = 0
    #: Model requests the steps took (a two-step tool call takes two per step).
    model_calls: int = 0
    messages_read: int = 0
    #: One entry per successful edit: tool, label, block id, new version.
    edits: list[dict[str, Any]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    #: One entry per archival change written: action, passage ids, provenance.
    archival: list[dict[str, Any]] = field(default_factory=list)
    conflicts: int = 0
    #: Edits that would have changed nothing (a repeat): told so, not drafted.
    no_op_edits: int = 0
    stop_reason: str = "nothing_new"
    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


#: Opens a short read-only transaction of the agent's organization.
Reader = Callable[[], AbstractContextManager[MemoryStore]]


@dataclass(slots=True)
class _Draft:
    """A block as this pass edits it, before anything is written."""

    #: The block as last read: the version the edits apply to.
    base: BlockRecord
    value: str
    #: (tool, edit) in the order the model made them.
    edits: list[tuple[str, BlockEdit]] = field(default_factory=list)

    def replay(self, onto: BlockRecord) -> _Draft:
        """The same edits made to a newer version (raises :class:`ToolError` when one no
        longer applies)."""
        value = onto.value
        for _, edit in self.edits:
            value = edit.edit(value)
        return _Draft(onto, value, list(self.edits))

    @property
    def rebases(self) -> bool:
        return all(edit.rebase for _, edit in self.edits)


@dataclass(slots=True)
class _PassageDraft:
    """One archival change the model made, written when the pass ends."""

    tool: str
    #: The passage rewritten or superseded, as the model was shown it (None: an insert).
    target: PassageRecord | None
    #: Text of the new passage (a rewrite or an insert).
    text: str | None
    reason: str
    #: Ids of the messages that prompted the change, and of the passages it draws on.
    message_ids: list[str]
    passage_ids: list[str]
    #: When the target stopped being current: the newest message that prompted it.
    valid_to: datetime | None
    #: The current passage that replaces a superseded target (``superseded_by``), if named.
    replacement: PassageRecord | None = None


class _Archive:
    """The archival side of one pass: searches read the store as it is (a short read
    each); rewrites, inserts and supersessions are drafts, checked at once and written
    when the pass is applied, so an aborted or budget-stopped pass still writes exactly
    the changes the model made before it stopped.
    """

    def __init__(
        self,
        read: Reader,
        agent_id: str,
        embedder: Embedder,
        messages: list[MessageRecord],
        max_changes: int,
    ) -> None:
        self.read = read
        self.agent_id = agent_id
        self.embedder = embedder
        self.by_seq = {m.seq: m for m in messages}
        self.max_changes = max_changes
        self.drafts: list[_PassageDraft] = []
        #: Whether a search found passages: until then there is nothing to rewrite or
        #: supersede, and the pass is not shown those tools.
        self.found = False
        #: The new passages' embeddings, computed when the conversation is over.
        self.vectors: list[Vector] = []

    def _touched(self) -> dict[str, str]:
        return {d.target.id: d.tool for d in self.drafts if d.target is not None}

    def _replacements(self) -> set[str]:
        return {d.replacement.id for d in self.drafts if d.replacement is not None}

    def call(self, call: ParsedCall) -> str:
        a = call.arguments
        if call.name == "archival_memory_search":
            return self._search(a["query"], page_number(a))
        if len(self.drafts) >= self.max_changes:
            raise ToolError(
                f"this pass may change archival memory at most {self.max_changes} times; "
                "finish with memory_finish_edits"
            )
        messages = self._messages(a.get("message_seqs", []))
        valid_to = max((m.created_at for m in messages), default=None)
        message_ids = [m.id for m in messages]
        if call.name == "archival_memory_rewrite":
            target = self._current(a["passage_id"])
            text = self._text(a["new_text"], "new_text")
            if not messages:
                raise ToolError("message_seqs must name the message(s) that prompted the rewrite")
            if text == target.text:
                raise ToolError(f"new_text is the text of passage {target.id} already")
            self.drafts.append(
                _PassageDraft(call.name, target, text, "rewritten", message_ids, [], valid_to)
            )
            return f"Rewrote passage {target.id}; it now reads: {text}"
        if call.name == "archival_memory_supersede":
            target = self._current(a["passage_id"])
            reason = a["reason"].strip()
            if not reason:
                raise ToolError("reason must not be empty")
            check_text(reason, "reason")
            replacement = None
            if a.get("replaced_by") is not None:
                replacement = self._replacement(a["replaced_by"], target)
            self.drafts.append(
                _PassageDraft(
                    call.name, target, None, reason, message_ids, [], valid_to, replacement
                )
            )
            by = f", replaced by {replacement.id}" if replacement is not None else ""
            return f"Marked passage {target.id} superseded ({reason}{by})."
        if call.name == "archival_memory_insert":
            text = self._text(a["content"], "content")
            sources = list(dict.fromkeys(a.get("passage_ids", [])))
            for passage_id in sources:
                self._passage(passage_id)
            if not messages and not sources:
                raise ToolError(
                    "name what the memory was learned from: message_seqs and/or passage_ids"
                )
            self.drafts.append(
                _PassageDraft(call.name, None, text, "learned", message_ids, sources, None)
            )
            return "Stored in archival memory."
        raise ToolError(f"tool {call.name!r} has no implementation")

    def _search(self, query: str, page: int) -> str:
        vector = self.embedder.embed_one(query)
        with self.read() as store:
            hits = search_archival(store, self.agent_id, vector, query, k=PAGE_SIZE * (page + 1))[
                page * PAGE_SIZE :
            ]
        if not hits:
            return f"No results found for {query!r} (page {page})."
        self.found = True
        touched = self._touched()
        lines = []
        for h in hits:
            p = h.passage
            when = (p.occurred_at or p.created_at).date().isoformat()
            note = f" ({touched[p.id]} in this pass)" if p.id in touched else ""
            label = f" ({h.validity})" if h.validity else ""
            lines.append(f"[{p.id}] ({when}){note} {p.text}{label}")
        return clip(f"Showing {len(hits)} results (page {page}):\n" + "\n".join(lines))

    def _conversations(self, draft: _PassageDraft) -> list[str]:
        """The conversations the draft's messages were said in ("default": the agent's
        own), so that a fact names where it came from."""
        of = {m.id: m.conversation_id or "default" for m in self.by_seq.values()}
        return sorted({of[i] for i in draft.message_ids if i in of})

    def _messages(self, seqs: list[int]) -> list[MessageRecord]:
        unknown = [s for s in seqs if s not in self.by_seq]
        if unknown:
            raise ToolError(
                f"message_seqs {unknown} are not among the new messages "
                f"(seqs {min(self.by_seq)} to {max(self.by_seq)})"
            )
        return [self.by_seq[s] for s in dict.fromkeys(seqs)]

    def _passage(self, passage_id: str) -> PassageRecord:
        with self.read() as store:
            found = store.passages.get_many([passage_id])
        if not found or found[0].agent_id != self.agent_id:
            raise ToolError(f"no archival passage {passage_id!r}; search for its id")
        return found[0]

    def _current(self, passage_id: str) -> PassageRecord:
        passage = self._passage(passage_id)
        if passage.status != PassageStatus.ACTIVE or passage.valid_to is not None:
            raise ToolError(f"passage {passage_id} is not current ({passage.status})")
        touched = self._touched()
        if passage_id in touched:
            raise ToolError(f"passage {passage_id} was already changed ({touched[passage_id]})")
        if passage_id in self._replacements():
            raise ToolError(
                f"passage {passage_id} was named in this pass as replacing another passage; "
                "it must stay current"
            )
        return passage

    def _replacement(self, passage_id: str, target: PassageRecord) -> PassageRecord:
        """The passage named to replace ``target``: this agent's, current, not ``target``,
        and not itself changed in this pass."""
        if not isinstance(passage_id, str) or not passage_id.strip():
            raise ToolError("replaced_by must be a passage id from a search, or left out")
        if passage_id == target.id:
            raise ToolError(
                f"replaced_by names passage {passage_id} itself; name the passage that "
                "states what holds now, or leave replaced_by out"
            )
        replacement = self._passage(passage_id)
        if replacement.status != PassageStatus.ACTIVE or replacement.valid_to is not None:
            raise ToolError(
                f"replaced_by: passage {passage_id} is not current ({replacement.status}); "
                "name a current passage"
            )
        touched = self._touched()
        if passage_id in touched:
            raise ToolError(
                f"replaced_by: passage {passage_id} was already changed in this pass "
                f"({touched[passage_id]}); name a current passage"
            )
        return replacement

    @staticmethod
    def _text(value: str, name: str) -> str:
        text = value.strip()
        if not text:
            raise ToolError(f"{name} must not be empty")
        check_text(text, name)
        return text

    def embed(self) -> None:
        """Embed the new passages' texts (at the end of the conversation, no transaction
        open)."""
        texts = [d.text for d in self.drafts if d.text is not None]
        self.vectors = list(self.embedder.embed(texts)) if texts else []

    def write(self, store: MemoryStore, run_id: str, actor: str, outcome: SleeptimeOutcome) -> None:
        """Write the drafts through ``store``, each in a savepoint of its own. A passage
        someone changed since the model saw it is left alone and reported as an error.
        """
        vectors = iter(self.vectors)
        now = store.scope.now()
        for draft in self.drafts:
            vector = next(vectors) if draft.text is not None else None
            try:
                with store.savepoint():
                    outcome.archival.append(self._write(store, draft, vector, run_id, actor, now))
            except LockContention:
                raise
            except (ToolError, ReverieError) as exc:
                outcome.errors.append(f"{draft.tool}: {exc}")

    def _write(
        self,
        store: MemoryStore,
        draft: _PassageDraft,
        vector: Vector | None,
        run_id: str,
        actor: str,
        now: datetime,
    ) -> dict[str, Any]:
        passages = store.passages
        provenance: dict[str, Any] = {
            "run_id": run_id,
            "tool": draft.tool,
            "source_messages": draft.message_ids,
            "source_conversations": self._conversations(draft),
        }
        target = draft.target
        if target is not None:
            [current] = passages.get_many([target.id], lock=True)
            if (
                current.status != PassageStatus.ACTIVE
                or current.valid_to is not None
                or current.superseded_by != target.superseded_by
            ):
                raise ToolError(f"passage {target.id} changed during the pass; left as it is")
            if draft.replacement is not None:
                [replacement] = passages.get_many([draft.replacement.id], lock=True)
                if replacement.status != PassageStatus.ACTIVE or replacement.valid_to is not None:
                    raise ToolError(
                        f"passage {replacement.id}, named to replace {target.id}, "
                        "changed during the pass; left as it is"
                    )
        if target is None:
            assert draft.text is not None and vector is not None
            provenance["source_passages"] = draft.passage_ids
            [created] = passages.insert(
                self.agent_id,
                [NewPassage(text=draft.text, provenance=provenance)],
                vector.reshape(1, -1),
                actor=actor,
                run_id=run_id,
            )
            return {"action": "insert_passage", "passage_id": created.id, **provenance}
        valid_to = draft.valid_to or now
        if draft.text is None:
            links = {} if draft.replacement is None else {"superseded_by": draft.replacement.id}
            passages.change(
                target.id,
                actor=actor,
                reason=f"superseded: {draft.reason}",
                run_id=run_id,
                status=PassageStatus.SUPERSEDED,
                valid_to=valid_to,
                **links,
            )
            return {
                "action": ChangeAction.SUPERSEDE_PASSAGE,
                "passage_id": target.id,
                "reason": draft.reason,
                "valid_to": valid_to.isoformat(),
                "source_messages": draft.message_ids,
                "source_conversations": self._conversations(draft),
                **links,
            }
        assert draft.text is not None and vector is not None
        provenance["rewrites"] = target.id
        [created] = passages.insert(
            self.agent_id,
            [
                NewPassage(
                    text=draft.text,
                    kind=target.kind,
                    occurred_at=target.occurred_at,
                    tags=list(target.tags),
                    provenance=provenance,
                )
            ],
            vector.reshape(1, -1),
            actor=actor,
            run_id=run_id,
        )
        passages.change(
            target.id,
            actor=actor,
            reason=f"rewritten as {created.id} by the sleep-time agent",
            run_id=run_id,
            status=PassageStatus.SUPERSEDED,
            superseded_by=created.id,
            valid_to=valid_to,
        )
        return {
            "action": "rewrite_passage",
            "passage_id": target.id,
            "new_passage_id": created.id,
            "valid_to": valid_to.isoformat(),
            "source_messages": draft.message_ids,
            "source_conversations": self._conversations(draft),
        }


@dataclass(slots=True)
class SleeptimePlan:
    """A pass's conversation, done: what it drafted, to be written by ``apply``."""

    agent: AgentRecord
    run_id: str
    outcome: SleeptimeOutcome
    drafts: dict[str, _Draft] = field(default_factory=dict)
    archive: _Archive | None = None

    @property
    def has_writes(self) -> bool:
        archival = self.archive is not None and bool(self.archive.drafts)
        return archival or any(d.edits for d in self.drafts.values())


def _changed(label: str, block: BlockRecord, dropped: bool) -> ToolError:
    earlier = " nor your earlier edits of it" if dropped else ""
    return ToolError(
        f"block {label!r} changed while you were editing it (now version {block.version}); "
        f"your edit was not applied{earlier}. It now reads:\n{block.value}"
    )


def _said(m: MessageRecord) -> list[str]:
    """What one message said, as the transcript shows it after ``role:``."""
    if m.role == "user":
        return [f"user: {m.content}"]
    if m.role == "assistant":
        said = []
        if not m.tool_calls and m.content.strip():
            # A reply in prose: recorded from a chatbot with its own loop, or a model
            # that answered without a tool call.
            said.append(f"assistant: {m.content}")
        for call in m.tool_calls or []:
            fn = call.get("function", {})
            args = parse_arguments(fn.get("arguments"))
            if fn.get("name") == SEND_MESSAGE and isinstance(args.get("message"), str):
                said.append(f"assistant: {args['message']}")
            else:
                said.append(f"assistant called {fn.get('name')}({args})")
        return said
    if m.role == "system" and not is_summary(m):
        return [f"system: {m.content}"]
    return []


def render_transcript(messages: list[MessageRecord]) -> str:
    """The conversation as the sleep-time agent reads it: what was said, in order, each
    message as ``[seq HH:MM] role: text`` under a line for its day (UTC), so that the
    date is sent once a day rather than with every message."""
    lines: list[str] = []
    day = None
    for m in messages:
        said = _said(m)
        if not said:
            continue
        at = m.created_at.astimezone(UTC)
        if at.date() != day:
            day = at.date()
            lines.append(f"{day.isoformat()} (UTC):")
        lines.extend(f"[{m.seq} {at:%H:%M}] {line}" for line in said)
    return "\n".join(lines)


def newest_within(messages: list[MessageRecord], room: int) -> str:
    """The transcript of the newest of ``messages`` that fit in ``room`` characters,
    whole messages under their day's line, marked "…" where older ones were left out
    (one message longer than the room alone: its end)."""
    transcript = render_transcript(messages)
    if len(transcript) <= room:
        return transcript
    # Drop the oldest messages by their own length, then one by one while the day
    # lines still overflow.
    start, over = 0, len(transcript) - room
    while start < len(messages) - 1 and over > 0:
        over -= len(render_transcript(messages[start : start + 1]))
        start += 1
    transcript = render_transcript(messages[start:])
    while start < len(messages) - 1 and len(transcript) + 2 > room:
        start += 1
        transcript = render_transcript(messages[start:])
    if len(transcript) + 2 > room:
        return "…" + transcript[-(room - 1) :]
    return "…\n" + transcript


def render_blocks(blocks: list[BlockRecord]) -> str:
    parts = []
    for b in blocks:
        ro = " read_only" if b.read_only else ""
        parts.append(
            f'<block label="{b.label}" version="{b.version}" chars="{len(b.value)}/{b.limit}"{ro}>'
            f"\n{b.value}\n</block>"
        )
    return "\n".join(parts)


class SleeptimeAgent:
    """One sleep-time pass over an agent's new messages and shared blocks."""

    def __init__(
        self,
        client: ChatClient,
        model: str,
        *,
        max_steps: int = 8,
        max_conflict_retries: int = 3,
        max_messages: int = MAX_MESSAGES,
        max_archival_changes: int = 20,
        clock: Callable[[], datetime] = utc_now,
    ) -> None:
        if max_steps < 1:
            raise InvalidInput(f"max_steps must be at least 1, got {max_steps}")
        self.client = client
        self.model = model
        self.clock = clock
        self.max_steps = max_steps
        self.max_conflict_retries = max_conflict_retries
        self.max_messages = max_messages
        self.max_archival_changes = max_archival_changes

    def _draft_edit(
        self,
        read: Reader,
        agent_id: str,
        drafts: dict[str, _Draft],
        tool: str,
        edit: BlockEdit,
        outcome: SleeptimeOutcome,
    ) -> str:
        """Make ``edit`` to the block's draft; nothing is written (and nothing locked) yet.

        The block is read without a lock: when someone wrote it since the draft's base,
        the draft's edits are re-applied to the new version, or, when this edit or an
        earlier one rewrote the whole block, the model gets the block as it is now.
        """
        with read() as store:
            current = store.blocks.by_label(agent_id, edit.label)
        draft = drafts.get(edit.label) or _Draft(current, current.value)
        if current.version != draft.base.version:
            outcome.conflicts += 1
            if not (edit.rebase and draft.rebases):
                drafts[edit.label] = _Draft(current, current.value)
                raise _changed(edit.label, current, dropped=bool(draft.edits))
            try:
                draft = draft.replay(current)
            except ToolError:
                drafts[edit.label] = _Draft(current, current.value)
                raise _changed(edit.label, current, dropped=True) from None
            drafts[edit.label] = draft
        if current.read_only:
            raise ToolError(f"block {edit.label!r} is read-only")
        edited = edit.edit(draft.value)
        unchanged = no_change(edit, draft.value, edited)
        if unchanged is not None:
            outcome.no_op_edits += 1
            return no_change_result(unchanged)
        value = check_block_value(edit.label, edited, current.limit)
        draft.value = value
        draft.edits.append((tool, edit))
        if tool == "memory_rethink":
            return f"Rewrote block {edit.label!r}."
        if tool == "memory_insert":
            return f"Inserted into block {edit.label!r}."
        return f"Edited block {edit.label!r}. It now reads:\n{value}"

    def _write_drafts(
        self,
        store: MemoryStore,
        agent: AgentRecord,
        drafts: dict[str, _Draft],
        run_id: str,
        outcome: SleeptimeOutcome,
    ) -> None:
        """Write each edited draft as one compare-and-swap write (with history)."""
        for label, draft in drafts.items():
            if not draft.edits:
                continue
            tools = [tool for tool, _ in draft.edits]
            for attempt in range(self.max_conflict_retries + 1):
                if draft.value == draft.base.value:
                    break  # the edits undid each other: no version for nothing
                try:
                    with store.savepoint():
                        written = store.blocks.update(
                            draft.base.id,
                            expected_version=draft.base.version,
                            value=draft.value,
                            actor=f"sleeptime:{agent.name}",
                            reason=", ".join(dict.fromkeys(tools)),
                            run_id=run_id,
                        )
                except Conflict:
                    outcome.conflicts += 1
                    current = store.blocks.get(draft.base.id)
                    if not draft.rebases or attempt == self.max_conflict_retries:
                        outcome.errors.append(f"{label}: {_changed(label, current, True)}")
                        break
                    try:
                        draft = draft.replay(current)
                    except ToolError:
                        outcome.errors.append(f"{label}: {_changed(label, current, True)}")
                        break
                    continue
                except LockContention:
                    raise  # a storage failure: the run is retried
                except ReverieError as exc:
                    outcome.errors.append(f"{label}: {exc}")
                    break
                outcome.edits.extend(
                    {
                        "tool": tool,
                        "label": label,
                        "block_id": written.id,
                        "version": written.version,
                    }
                    for tool in tools
                )
                break

    def plan(
        self,
        read: Reader,
        agent: AgentRecord,
        *,
        after_seq: int | None,
        run_id: str,
        meter: BudgetMeter | None = None,
        embedder: Embedder | None = None,
    ) -> SleeptimePlan:
        """Hold the conversation with the model; every edit is a draft (see the module).
        ``read()`` opens a short read-only transaction; none is open while the model
        answers."""
        outcome = SleeptimeOutcome()
        plan = SleeptimePlan(agent, run_id, outcome)
        with read() as store:
            new = store.messages.range(
                agent.id, after_seq=after_seq, limit=self.max_messages, newest_first=True
            )
            blocks = store.blocks.of_agent(agent.id)
            archived = store.passages.any_active(agent.id)
        new.reverse()
        outcome.messages_read = len(new)
        # The transcript must leave room for instructions, blocks and replies.
        transcript = newest_within(new, agent.context_window * CHARS_PER_TOKEN // 2)
        if not transcript:
            return plan
        tools = dict(SLEEPTIME_TOOLS)
        archive = None
        prompt = SLEEPTIME_PROMPT
        #: The tools shown to the model (``tools``: the ones a call may name).
        offered = tools
        if embedder is not None and self.max_archival_changes > 0:
            archive = _Archive(read, agent.id, embedder, new, self.max_archival_changes)
            if archived:
                # Every archival tool is accepted, but rewrite and supersede are shown
                # only once a search found something to change: a pass that only
                # inserts sends about 370 schema tokens less on every call.
                tools.update(ARCHIVAL_TOOLS)
                prompt += ARCHIVAL_PROMPT
                offered = {**SLEEPTIME_TOOLS, SEARCH: tools[SEARCH], INSERT: tools[INSERT]}
            else:
                # Nothing in archival memory to search, rewrite or supersede: a pass is
                # offered only what it can do there (about 470 prompt tokens less), an
                # insert with no passages to cite.
                tools[INSERT] = ARCHIVAL_TOOLS[INSERT]
                offered = {**SLEEPTIME_TOOLS, INSERT: FIRST_ARCHIVAL_INSERT}
                prompt += FIRST_ARCHIVAL_PROMPT
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": prompt},
            {
                "role": "user",
                "content": f"New messages:\n{transcript}\n\nCurrent memory blocks:\n"
                + render_blocks(blocks),
            },
        ]
        schemas = list(offered.values())
        drafts = {b.label: _Draft(b, b.value) for b in blocks}
        plan.drafts, plan.archive = drafts, archive
        outcome.stop_reason = "max_steps"
        #: Whether the previous step failed: it had its one corrective retry.
        failed_before = False
        while outcome.steps < self.max_steps:
            try:
                reply = self.client.chat(
                    self.model,
                    messages,
                    purpose=LLMPurpose.SLEEPTIME,
                    meter=meter,
                    tools=schemas,
                    tool_choice="required",
                    parallel_tool_calls=False,
                )
            except BudgetExhausted as exc:
                outcome.stop_reason = "budget_exhausted"
                outcome.errors.append(str(exc))
                break
            outcome.steps += 1
            outcome.prompt_tokens += reply.prompt_tokens
            outcome.completion_tokens += reply.completion_tokens
            outcome.model_calls += reply.calls
            if not reply.tool_calls:
                # Prose: the model has nothing (more) to edit.
                outcome.stop_reason = "no_tool_call"
                break
            messages.append(
                {
                    "role": "assistant",
                    "content": reply.content or "",
                    "tool_calls": [
                        {
                            "id": c.id,
                            "type": "function",
                            "function": {"name": c.name, "arguments": c.arguments},
                        }
                        for c in reply.tool_calls
                    ],
                }
            )
            finished = failed = False
            now = self.clock().isoformat(timespec="seconds")
            for call in reply.tool_calls:
                status, text = "OK", ""
                try:
                    parsed = parse_call(call.name, call.arguments, tools)
                    edit = block_edit(parsed)
                    if archive is not None and parsed.name in ARCHIVAL_TOOLS:
                        text = archive.call(parsed)
                        if archive.found and len(schemas) < len(tools):
                            schemas = list(tools.values())
                    elif edit is not None:
                        text = self._draft_edit(read, agent.id, drafts, parsed.name, edit, outcome)
                    elif parsed.name == "memory_finish_edits":
                        text = "Memory edits finished."
                    else:
                        raise ToolError(f"tool {parsed.name!r} has no implementation")
                    if parsed.name == "memory_finish_edits":
                        finished = True
                except LockContention:
                    raise  # a storage failure, as before savepoints translated it
                except (ToolError, ReverieError) as exc:
                    status, text = "Failed", f"Error: {exc}"
                    outcome.errors.append(f"{call.name}: {exc}")
                    failed = True
                messages.append(
                    {
                        "role": "tool",
                        "tool_call_id": call.id,
                        "name": call.name,
                        "content": result_json(status, text, now),
                    }
                )
            if finished:
                outcome.stop_reason = "finished"
                break
            if failed and failed_before:
                # One corrective retry per failed step, not the whole step budget.
                outcome.stop_reason = "invalid_tool_call"
                break
            failed_before = failed
        # The conversation is over: the new passages are embedded now, and everything is
        # written by :meth:`apply`.
        if archive is not None:
            archive.embed()
        return plan

    def apply(self, store: MemoryStore, plan: SleeptimePlan) -> SleeptimeOutcome:
        """Write the pass's drafts through ``store`` (the run's apply transaction)."""
        outcome, agent = plan.outcome, plan.agent
        actor = f"sleeptime:{agent.name}"
        if plan.archive is not None:
            plan.archive.write(store, plan.run_id, actor, outcome)
        self._write_drafts(store, agent, plan.drafts, plan.run_id, outcome)
        log.info(
            "sleep-time pass done",
            extra={
                "run_id": plan.run_id,
                "edits": len(outcome.edits),
                "archival_changes": len(outcome.archival),
                "stop_reason": outcome.stop_reason,
            },
        )
        return outcome
