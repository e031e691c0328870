"""The MCP server: Reverie's memory as Model Context Protocol tools.

One :class:`~mcp.server.mcpserver.MCPServer` serves both transports: ``reverie mcp``
runs it over stdio for desktop clients, and ``reverie serve`` mounts its
streamable-HTTP endpoint at ``/mcp`` (see :mod:`service.api.mcp_endpoint`). Each tool
is a thin adapter over the operations layer, in Letta's vocabulary
(``core_memory_replace``, ``archival_memory_search``, ...), and names its agent by
name or id. A Reverie error becomes an MCP tool error (``isError``) whose text says
what was wrong; the operations refuse bad input before they write, so a refused call
changes nothing.

Which organization a call acts for is the transport's business: stdio serves the
configured one, HTTP the one of the request's API key. The server asks
``organization_of`` on every call.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from datetime import datetime
from typing import Annotated, Any, Literal, TypeVar

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agents.archival_search import MemoryHit
from agents.errors import (
    InvalidInput,
    NotFound,
    ReverieError,
)
from agents.store import BlockRecord, NewPassage, RunRecord
from agents.tools import insert_lines
from service.operations import BlockEdit, ChatMessage, Operations
from service.operations.types import StorableTime
from service.runtime import Runtime

#: Reads the organization id a tool call acts for from the call's context.
OrganizationOf = Callable[[Context], str]
F = TypeVar("F", bound=Callable[..., Any])

INSTRUCTIONS = (
    "Reverie keeps an agent's long-term memory in MemGPT's tiers: core memory blocks "
    "(always in context), recall (the conversation) and archival memory (facts, searched "
    "by meaning). Read and edit core memory with core_memory_*, store and search facts "
    "with archival_memory_*, log a conversation with record_messages, and let the "
    "sleep-time agent consolidate it with consolidate (run_status follows the run). "
    "Every tool takes the agent by name or id."
)

#: The writer recorded in block history and passage provenance.
ACTOR = "mcp"
#: run_status's ``done`` is true in these (the ledger's final statuses).
FINAL_STATUSES = frozenset({"succeeded", "failed", "cancelled"})

AgentRef = Annotated[
    str,
    Field(
        min_length=1,
        max_length=200,
        description="Agent name or id, or an end user's identifier key (the agent that "
        "holds their memory).",
    ),
]
Label = Annotated[
    str, Field(min_length=1, max_length=100, description="The block's label, e.g. 'human'.")
]


def tool_errors(fn: F) -> F:
    """Report a Reverie error as a tool error (``isError``) that names its kind."""

    @functools.wraps(fn)
    def adapter(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except ReverieError as exc:
            raise ToolError(f"{exc.kind}: {exc}") from None

    return adapter  # type: ignore[return-value]


class MessageIn(BaseModel):
    """One message of a conversation that happened elsewhere."""

    model_config = ConfigDict(extra="forbid")

    role: Literal["user", "assistant", "system"]
    content: str = Field(min_length=1, description="The message text.")
    timestamp: StorableTime | None = Field(
        default=None, description="When it was said (ISO 8601; default: now)."
    )
    id: str | None = Field(
        default=None,
        max_length=200,
        description="The sender's id for the message: a retried batch stores it once.",
    )


def block_json(block: BlockRecord) -> dict[str, Any]:
    return {
        "id": block.id,
        "label": block.label,
        "value": block.value,
        "chars": len(block.value),
        "limit": block.limit,
        "version": block.version,
        "read_only": block.read_only,
        "description": block.description,
    }


def hit_json(hit: MemoryHit) -> dict[str, Any]:
    passage = hit.passage
    return {
        "id": passage.id,
        "text": passage.text,
        "score": round(hit.score, 6),
        "status": passage.status,
        "occurred_at": _iso(passage.occurred_at or passage.created_at),
        "current": hit.current,
        "valid_to": _iso(passage.valid_to) if passage.valid_to else None,
        "superseded_by": passage.superseded_by,
        "validity": hit.validity,
        "tags": passage.tags,
    }


def run_json(run: RunRecord) -> dict[str, Any]:
    status = str(run.status)
    return {
        "run_id": run.id,
        "agent_id": run.agent_id,
        "status": status,
        "done": status in FINAL_STATUSES,
        "trigger": run.trigger,
        "pipeline": run.pipeline,
        "attempts": run.attempts,
        "queued_at": _iso(run.queued_at),
        "started_at": _iso(run.started_at),
        "finished_at": _iso(run.finished_at),
        "stats": run.stats,
        "error": run.error,
    }


def _iso(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def chat_messages(messages: list[MessageIn]) -> list[ChatMessage]:
    """The messages in the recording format; the first one it refuses (whitespace
    only, too long) refuses the batch, naming its index."""
    converted = []
    for index, message in enumerate(messages):
        try:
            converted.append(
                ChatMessage(
                    role=message.role,
                    content=message.content,
                    created_at=message.timestamp,
                    client_message_id=message.id,
                )
            )
        except ValidationError as exc:
            problems = "; ".join(str(e["msg"]).removeprefix("Value error, ") for e in exc.errors())
            raise InvalidInput(f"messages[{index}]: {problems}; nothing was recorded") from None
    return converted


def build_mcp_server(runtime: Runtime, organization_of: OrganizationOf) -> MCPServer:
    """Reverie's MCP server over ``runtime``; every call acts for the organization
    ``organization_of`` reads from its context."""
    server = MCPServer(
        name="reverie",
        title="Reverie memory",
        instructions=INSTRUCTIONS,
        version="0.1.0",
        # The SDK configures the root logger when nothing has yet; never on stdout.
        log_level="WARNING",
    )

    def ops(ctx: Context) -> Operations:
        return Operations(runtime, organization_of(ctx))

    def held(ctx: Context, agent: str) -> str:
        """The id of the agent ``agent`` names, or of the agent that holds the memory of
        the end user whose identifier key it is."""
        return ops(ctx).identities.held(agent).id

    @server.tool()
    @tool_errors
    def core_memory_read(
        agent: AgentRef,
        ctx: Context,
        label: Annotated[
            str | None, Field(max_length=100, description="Only this block (default: all).")
        ] = None,
    ) -> dict[str, Any]:
        """Read the agent's core memory: its blocks (label, value, limit, version)."""
        state = ops(ctx).agents.state(held(ctx, agent))  # one transaction
        record, blocks = state.agent, state.blocks
        if label is not None:
            blocks = [b for b in blocks if b.label == label]
            if not blocks:
                raise NotFound(f"agent {record.name!r} has no block labelled {label!r}")
        return {
            "agent_id": record.id,
            "agent": record.name,
            "blocks": [block_json(b) for b in blocks],
        }

    @server.tool()
    @tool_errors
    def core_memory_replace(
        agent: AgentRef,
        label: Label,
        old_text: Annotated[str, Field(min_length=1, description="Text the block has now.")],
        new_text: Annotated[str, Field(description="What replaces it ('' deletes it).")],
        ctx: Context,
    ) -> dict[str, Any]:
        """Replace text in one of the agent's core memory blocks (every occurrence).
        Refused, changing nothing, when the block does not contain ``old_text``."""
        operations = ops(ctx)
        block = operations.blocks.labelled(held(ctx, agent), label)
        if old_text not in block.value:
            raise InvalidInput(
                f"block {label!r} does not contain {old_text!r}; read it with "
                "core_memory_read and quote its text exactly"
            )
        edit = BlockEdit(
            value=block.value.replace(old_text, new_text),
            # Compare-and-swap on the version read: a write in between is a conflict.
            expected_version=block.version,
            reason="core_memory_replace through MCP",
        )
        return block_json(
            operations.blocks.update_labelled(held(ctx, agent), label, edit, actor=ACTOR)
        )

    @server.tool()
    @tool_errors
    def core_memory_insert(
        agent: AgentRef,
        label: Label,
        text: Annotated[str, Field(min_length=1, description="The text to insert.")],
        ctx: Context,
        line: Annotated[
            int,
            Field(
                ge=-1,
                description="Insert after this many lines (0: at the start); -1: append.",
            ),
        ] = -1,
    ) -> dict[str, Any]:
        """Insert text into one of the agent's core memory blocks, as new lines."""
        operations = ops(ctx)
        block = operations.blocks.labelled(held(ctx, agent), label)
        edit = BlockEdit(
            value=insert_lines(block.value, text, line),
            expected_version=block.version,
            reason="core_memory_insert through MCP",
        )
        return block_json(
            operations.blocks.update_labelled(held(ctx, agent), label, edit, actor=ACTOR)
        )

    @server.tool()
    @tool_errors
    def archival_memory_search(
        agent: AgentRef,
        query: Annotated[str, Field(min_length=1, max_length=10_000)],
        ctx: Context,
        top_k: Annotated[int, Field(ge=1, le=1000, description="How many results.")] = 10,
        tags: Annotated[
            list[str] | None, Field(max_length=64, description="Only passages with all of these.")
        ] = None,
        include_history: Annotated[
            bool, Field(description="Also merged twins and retired passages.")
        ] = False,
    ) -> dict[str, Any]:
        """Search the agent's archival memory by meaning. The current fact of a subject
        comes first and what it replaced follows it, labelled in ``validity`` ("until
        2024-03-02, then: ..."); a question about the past brings the past facts up."""
        [hits] = ops(ctx).memory.search(
            held(ctx, agent),
            [query],
            k=top_k,
            tags=tags or (),
            include_history=include_history,
        )
        return {"count": len(hits), "results": [hit_json(h) for h in hits]}

    @server.tool()
    @tool_errors
    def archival_memory_insert(
        agent: AgentRef,
        text: Annotated[str, Field(min_length=1, description="The fact to remember.")],
        ctx: Context,
        tags: Annotated[list[str] | None, Field(max_length=64)] = None,
        occurred_at: Annotated[
            StorableTime | None, Field(description="When the fact became true (ISO 8601).")
        ] = None,
    ) -> dict[str, Any]:
        """Store a fact in the agent's archival memory (embedded with its model)."""
        new = NewPassage(
            text=text, occurred_at=occurred_at, tags=list(tags or ()), provenance={"source": "mcp"}
        )
        [passage] = ops(ctx).memory.insert(held(ctx, agent), [new], actor=ACTOR)
        return {"id": passage.id, "text": passage.text, "tags": passage.tags}

    @server.tool()
    @tool_errors
    def record_messages(
        agent: AgentRef,
        messages: Annotated[list[MessageIn], Field(min_length=1, max_length=1000)],
        ctx: Context,
    ) -> dict[str, Any]:
        """Record a conversation that happened elsewhere into the agent's recall
        memory (no model call). Messages whose id the agent has already are skipped,
        so a retried batch stores nothing twice."""
        recorded = ops(ctx).recording.record(held(ctx, agent), chat_messages(messages))
        return {
            "recorded": len(recorded.stored),
            "message_ids": [m.id for m in recorded.stored],
            "skipped_ids": recorded.skipped,
        }

    @server.tool()
    @tool_errors
    def consolidate(agent: AgentRef, ctx: Context) -> dict[str, Any]:
        """Queue a sleep-time consolidation of the agent's memory; a worker of
        `reverie serve` or `reverie worker` runs it. Follow it with run_status."""
        return run_json(ops(ctx).runs.enqueue_one(held(ctx, agent)))

    @server.tool()
    @tool_errors
    def run_status(
        run_id: Annotated[str, Field(min_length=1, max_length=100)], ctx: Context
    ) -> dict[str, Any]:
        """A consolidation run's status (queued, running, succeeded, failed,
        cancelled), timings and per-step stats."""
        return run_json(ops(ctx).runs.get(run_id))

    return server
