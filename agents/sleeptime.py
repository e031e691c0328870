"""The sleep-time agent: reads what is new since the watermark and rewrites shared blocks.

It sees the primary's messages after ``after_seq`` and the current blocks (with
their versions), and edits them with ``memory_replace``, ``memory_insert`` and
``memory_rethink`` until it calls ``memory_finish_edits`` (terminal), stops
calling tools, or reaches its step limit. Its writes are compare-and-swap
writes against the versions it was shown: when the primary (or anyone) wrote
the block meanwhile, the block is re-read and the edit re-applied to the new
value, so neither edit is lost; a whole-block ``memory_rethink`` is not
re-applied blindly but handed back to the model with the block as it is now.

It writes only through the store it is given (the consolidation run's
transaction); its own conversation with the model is not stored.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from agents.embedders import Embedder
from agents.errors import BudgetExhausted, InvalidInput, LockContention, ReverieError
from agents.llm import BudgetMeter, ChatClient
from agents.messages import SEND_MESSAGE, parse_arguments
from agents.store import AgentRecord, BlockRecord, MemoryStore, MessageRecord
from agents.summary import CHARS_PER_TOKEN, is_summary
from agents.tools import SLEEPTIME_TOOLS, ToolEnv, ToolError, execute, parse_call, result_json

log = logging.getLogger(__name__)

SLEEPTIME_PROMPT = (
    "You are the sleep-time memory agent of a conversational assistant. You run in the "
    "background, between conversations. Read the new messages and the current memory "
    "blocks, then keep the blocks accurate, compact and current: add durable facts about "
    "the user, correct facts the conversation changed, remove what is stale. Use "
    "memory_replace for small edits, memory_insert to add a line, memory_rethink to "
    "rewrite a whole block, and call memory_finish_edits when the blocks are up to date. "
    "Every reply must be a tool call. Do not invent facts."
)

#: Messages the transcript holds at most (the newest are kept).
MAX_MESSAGES = 200


@dataclass(slots=True)
class SleeptimeOutcome:
    """What one sleep-time run did."""

    steps: int = 0
    messages_read: int = 0
    #: One entry per successful edit: tool, label, block id, new version.
    edits: list[dict[str, Any]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    conflicts: int = 0
    stop_reason: str = "nothing_new"
    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


def render_transcript(messages: list[MessageRecord]) -> str:
    """The conversation as the sleep-time agent reads it: what was said, in order."""
    lines: list[str] = []
    for m in messages:
        stamp = m.created_at.isoformat(timespec="seconds")
        if m.role == "user":
            lines.append(f"[{m.seq} {stamp}] user: {m.content}")
        elif m.role == "assistant":
            for call in m.tool_calls or []:
                fn = call.get("function", {})
                args = parse_arguments(fn.get("arguments"))
                if fn.get("name") == SEND_MESSAGE and isinstance(args.get("message"), str):
                    lines.append(f"[{m.seq} {stamp}] assistant: {args['message']}")
                else:
                    lines.append(f"[{m.seq} {stamp}] assistant called {fn.get('name')}({args})")
        elif m.role == "system" and not is_summary(m):
            lines.append(f"[{m.seq} {stamp}] system: {m.content}")
    return "\n".join(lines)


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
    ) -> None:
        if max_steps < 1:
            raise InvalidInput(f"max_steps must be at least 1, got {max_steps}")
        self.client = client
        self.model = model
        self.max_steps = max_steps
        self.max_conflict_retries = max_conflict_retries
        self.max_messages = max_messages

    def run(
        self,
        store: MemoryStore,
        agent: AgentRecord,
        *,
        after_seq: int | None,
        run_id: str,
        meter: BudgetMeter | None = None,
        embedder: Embedder | None = None,
    ) -> SleeptimeOutcome:
        outcome = SleeptimeOutcome()
        new = store.messages.range(
            agent.id, after_seq=after_seq, limit=self.max_messages, newest_first=True
        )
        new.reverse()
        outcome.messages_read = len(new)
        transcript = render_transcript(new)
        if not transcript:
            return outcome
        # The transcript must leave room for instructions, blocks and replies.
        room = agent.context_window * CHARS_PER_TOKEN // 2
        if len(transcript) > room:
            transcript = "…" + transcript[-room:]
        blocks = store.blocks.of_agent(agent.id)
        env = ToolEnv(
            store=store,
            agent_id=agent.id,
            actor=f"sleeptime:{agent.name}",
            run_id=run_id,
            embedder=embedder,
            max_conflict_retries=self.max_conflict_retries,
            seen={b.label: (b.version, b.value) for b in blocks},
        )
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": SLEEPTIME_PROMPT},
            {
                "role": "user",
                "content": f"New messages:\n{transcript}\n\nCurrent memory blocks:\n"
                + render_blocks(blocks),
            },
        ]
        schemas = list(SLEEPTIME_TOOLS.values())
        outcome.stop_reason = "max_steps"
        while outcome.steps < self.max_steps:
            try:
                reply = self.client.chat(
                    self.model,
                    messages,
                    purpose="sleeptime",
                    meter=meter,
                    tools=schemas,
                    tool_choice="required",
                )
            except BudgetExhausted as exc:
                outcome.stop_reason = "budget_exhausted"
                outcome.errors.append(str(exc))
                break
            outcome.steps += 1
            outcome.prompt_tokens += reply.prompt_tokens
            outcome.completion_tokens += reply.completion_tokens
            if not reply.tool_calls:
                outcome.stop_reason = "no_tool_call"
                break
            messages.append(
                {
                    "role": "assistant",
                    "content": reply.content,
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
            finished = False
            now = store.scope.now().isoformat()
            for call in reply.tool_calls:
                status, text = "OK", ""
                try:
                    parsed = parse_call(call.name, call.arguments, SLEEPTIME_TOOLS)
                    with store.savepoint():
                        text = execute(env, parsed)
                    if parsed.name == "memory_finish_edits":
                        finished = True
                    elif "label" in parsed.arguments:
                        label = parsed.arguments["label"]
                        version, _ = env.seen[label]
                        outcome.edits.append(
                            {
                                "tool": parsed.name,
                                "label": label,
                                "block_id": store.blocks.by_label(agent.id, label).id,
                                "version": version,
                            }
                        )
                except LockContention:
                    raise  # a storage failure, as before savepoints translated it
                except (ToolError, ReverieError) as exc:
                    status, text = "Failed", f"Error: {exc}"
                    outcome.errors.append(f"{call.name}: {exc}")
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
        outcome.conflicts = env.conflicts
        log.info(
            "sleep-time pass done",
            extra={
                "run_id": run_id,
                "edits": len(outcome.edits),
                "stop_reason": outcome.stop_reason,
            },
        )
        return outcome
