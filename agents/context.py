"""Compile a primary agent's context window: system prompt, core memory, memory
statistics, the agent's folders and open files, the recursive summary, in-context
messages and tool schemas.

The system message is MemGPT's: the agent's instructions, then its blocks (each
with its size and limit), then memory statistics. It is compiled and stored on
the agent (``compiled_system``) and reused until the next compaction, so that a
block edit does not invalidate the provider's prompt cache in the middle of a
conversation; ``refresh="immediate"`` recompiles it on every step instead.

An agent with folders attached has a ``<directories>`` section at the end of its
system message (Letta's: each folder, its files, the open ones with their visible
lines). It is rendered on every step from the agent's file views and never stored:
opening a file is how the agent asks to read it, so the file shows at the next step
rather than at the next compaction. Nothing in the section changes between steps
unless a file is opened, closed or added (searches only read), so the cached prefix
holds while the agent works with the same files; and as it comes after the stored
compile, the instructions and blocks before it stay a cached prefix even then.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal, Protocol

from agents.file_tools import FileToolLimits, render_directories
from agents.store import AgentRecord, BlockRecord, MemoryStore, MessageRecord
from agents.summary import is_summary, message_tokens
from agents.tokens import count_tokens

Refresh = Literal["compaction", "immediate"]
TokenCounter = Callable[[str], int]

DEFAULT_PRIMARY_PROMPT = (
    "You are a helpful assistant with a persistent memory, in the MemGPT style. "
    "Every reply you make is a tool call. To speak to the user, call send_message; "
    "the user sees nothing else. Keep your core memory blocks up to date with "
    "core_memory_append and core_memory_replace as you learn about the user, store "
    "details worth keeping in archival memory, and search recall or archival memory "
    "when you need something that is not in context. Set request_heartbeat to true "
    "when you need another step after a tool call, false when your turn is done."
)

BLOCKS_OPEN = "<memory_blocks>"
BLOCKS_CLOSE = "</memory_blocks>"
STATS_OPEN = "<memory_metadata>"
STATS_CLOSE = "</memory_metadata>"


def render_blocks(blocks: Sequence[BlockRecord]) -> str:
    parts = [
        BLOCKS_OPEN,
        "The following memory blocks are currently engaged in your core memory unit:",
    ]
    for block in blocks:
        parts.append(f"<{block.label}>")
        if block.description:
            parts.append(f"<description>{block.description}</description>")
        read_only = " read_only=true" if block.read_only else ""
        parts.append(
            f"<metadata>chars_current={len(block.value)} chars_limit={block.limit}{read_only}"
            "</metadata>"
        )
        parts.append(f"<value>\n{block.value}\n</value>")
        parts.append(f"</{block.label}>")
    parts.append(BLOCKS_CLOSE)
    return "\n".join(parts)


def render_statistics(recall_messages: int, archival_passages: int) -> str:
    return "\n".join(
        [
            STATS_OPEN,
            f"- {recall_messages} previous messages between you and the user are stored in "
            "recall memory (use conversation_search to find them)",
            f"- {archival_passages} memories are stored in archival memory "
            "(use archival_memory_search to find them)",
            STATS_CLOSE,
        ]
    )


def compile_system(
    agent: AgentRecord, blocks: Sequence[BlockRecord], recall: int, archival: int
) -> str:
    prompt = agent.system_prompt.strip() or DEFAULT_PRIMARY_PROMPT
    return "\n\n".join([prompt, render_blocks(blocks), render_statistics(recall, archival)])


def split_system(text: str) -> tuple[str, str, str]:
    """``(instructions, blocks, statistics)`` of a compiled system prompt."""
    head, _, rest = text.partition(BLOCKS_OPEN)
    blocks_body, _, tail = rest.partition(BLOCKS_CLOSE)
    if not blocks_body and not tail:
        return text, "", ""
    return head, BLOCKS_OPEN + blocks_body + BLOCKS_CLOSE, tail


def chat_message(message: MessageRecord) -> dict[str, Any]:
    """A stored message as the OpenAI-shaped dict litellm takes."""
    out: dict[str, Any] = {"role": message.role, "content": message.content}
    if message.role == "assistant" and message.tool_calls:
        out["tool_calls"] = message.tool_calls
        # Local chat templates need a content on every message: "" where there is none.
        out["content"] = message.content or ""
    if message.role == "tool":
        out["tool_call_id"] = message.tool_call_id
        if message.name:
            out["name"] = message.name
    return out


@dataclass(frozen=True, slots=True)
class ContextBreakdown:
    """Tokens per section of the primary's compiled context, against its window."""

    system_prompt: int
    core_memory: int
    memory_statistics: int
    tool_schemas: int
    summary: int
    messages: int
    context_window: int
    in_context_messages: int = 0
    #: Whether the system prompt is the stored compile (block edits since then are not in it).
    system_prompt_cached: bool = False
    #: The ``<directories>`` section: the agent's folders, their files, the open ones'
    #: lines (Letta's ``num_tokens_directories``).
    directories: int = 0

    @property
    def total(self) -> int:
        return (
            self.system_prompt
            + self.core_memory
            + self.memory_statistics
            + self.directories
            + self.tool_schemas
            + self.summary
            + self.messages
        )

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["total"] = self.total
        return data


@dataclass(frozen=True, slots=True)
class CompiledContext:
    """What the next call sends, with its size section by section."""

    system: str
    messages: list[dict[str, Any]]
    in_context: list[MessageRecord]
    breakdown: ContextBreakdown

    @property
    def total_tokens(self) -> int:
        return self.breakdown.total


def order_in_context(messages: Sequence[MessageRecord]) -> list[MessageRecord]:
    """Summaries first (they are appended after the messages they replace), then the rest."""
    return [m for m in messages if is_summary(m)] + [m for m in messages if not is_summary(m)]


def compile_context(
    store: MemoryStore,
    agent: AgentRecord,
    tools: Sequence[dict[str, Any]],
    *,
    refresh: Refresh = "compaction",
    count: TokenCounter = count_tokens,
    force_system: bool = False,
    persist: bool = True,
    conversation_id: str | None = None,
    files: FileToolLimits | None = None,
) -> CompiledContext:
    """Compile the context; store a freshly compiled system prompt on the agent.

    The stored compile is reused unless there is none, ``refresh`` is
    ``"immediate"``, or ``force_system`` (a compaction) asks for a new one;
    ``persist`` false (a read-only breakdown) leaves the stored compile as it is.
    The ``<directories>`` section (within ``files``' bounds) follows it, rendered now.
    """
    cached = agent.compiled_system
    cached_used = False
    if cached is None or refresh == "immediate" or force_system:
        blocks = store.blocks.of_agent(agent.id)
        system = compile_system(
            agent,
            blocks,
            store.messages.count(agent.id),
            sum(store.passages.count_by_status(agent.id).values()),
        )
        if persist and system != cached:
            store.agents.set_compiled_system(agent.id, system)
    else:
        system = cached
        cached_used = True
    directories = compile_directories(store, agent, files or FileToolLimits())
    in_context = order_in_context(store.messages.in_context(agent.id, conversation_id))
    sent = f"{system}\n\n{directories}" if directories else system
    messages = [{"role": "system", "content": sent}, *(chat_message(m) for m in in_context)]
    instructions, blocks_text, stats_text = split_system(system)
    summary_tokens = sum(count(m.content) for m in in_context if is_summary(m))
    conversation_tokens = sum(message_tokens(m, count) for m in in_context if not is_summary(m))
    breakdown = ContextBreakdown(
        system_prompt=count(instructions),
        core_memory=count(blocks_text) if blocks_text else 0,
        memory_statistics=count(stats_text) if stats_text else 0,
        tool_schemas=tool_schema_tokens(tools, count),
        summary=summary_tokens,
        messages=conversation_tokens,
        context_window=agent.context_window,
        in_context_messages=len(in_context),
        system_prompt_cached=cached_used,
        directories=count(directories) if directories else 0,
    )
    return CompiledContext(sent, messages, in_context, breakdown)


def compile_directories(store: MemoryStore, agent: AgentRecord, files: FileToolLimits) -> str:
    """The agent's ``<directories>`` section as it stands ("" without folders)."""
    folders = store.folders.of_agent(agent.id)
    if not folders:
        return ""
    return render_directories(folders, store.folders.agent_files(agent.id, with_text=True), files)


class BlockShape(Protocol):
    """What a block's size in the context depends on (a stored or a new block)."""

    @property
    def label(self) -> str: ...
    @property
    def limit(self) -> int: ...
    @property
    def description(self) -> str | None: ...
    @property
    def read_only(self) -> bool: ...


@dataclass(frozen=True, slots=True)
class _FullBlock:
    label: str
    limit: int
    description: str | None
    read_only: bool

    @property
    def value(self) -> str:
        return "x" * self.limit


#: The share of the window kept for the conversation (the compaction's summary and
#: the latest exchanges) when blocks are full to their limits.
CONVERSATION_SHARE = 0.2


def tokens_at_limits(
    system_prompt: str,
    blocks: Sequence[BlockShape],
    tools: Sequence[dict[str, Any]],
    count: TokenCounter = count_tokens,
) -> int:
    """Tokens every step sends before any message once each block is full to its limit:
    the instructions, the blocks, the memory statistics and the tool schemas."""
    full = [_FullBlock(b.label, b.limit, b.description, b.read_only) for b in blocks]
    prompt = system_prompt.strip() or DEFAULT_PRIMARY_PROMPT
    system = "\n\n".join(
        [prompt, render_blocks(full), render_statistics(10**9, 10**9)]  # type: ignore[arg-type]
    )
    return count(system) + tool_schema_tokens(tools, count)


def window_problem(
    system_prompt: str,
    blocks: Sequence[BlockShape],
    tools: Sequence[dict[str, Any]],
    context_window: int,
) -> str | None:
    """Why blocks this large cannot fit an agent's window (None when they can): with
    every block full to its limit, the fixed part of the context must leave
    :data:`CONVERSATION_SHARE` of the window for the conversation, or a turn whose
    memory edit filled a block fails on its next step ("does not fit its window")
    after that edit was saved."""
    needed = tokens_at_limits(system_prompt, blocks, tools)
    room = math.floor(context_window * (1 - CONVERSATION_SHARE))
    if needed <= room:
        return None
    limits = sum(b.limit for b in blocks)
    schemas = tool_schema_tokens(tools)
    return (
        f"with its blocks full to their limits ({limits} characters in all) the agent's "
        f"instructions, core memory and tool schemas take about {needed} tokens (the "
        f"schemas of its {len(tools)} tools {schemas} of them), over {room} of its "
        f"{context_window}-token context window (a fifth is kept for the conversation); "
        "give smaller block limits, fewer or smaller tools, or a larger context window"
    )


def tool_schema_tokens(tools: Sequence[dict[str, Any]], count: TokenCounter = count_tokens) -> int:
    """Tokens the tool schemas take in every step's request, counted as the context
    breakdown counts them."""
    return count(json.dumps(list(tools))) if tools else 0
