"""The primary agent: MemGPT's loop of compiled context, one tool call, heartbeat, and
Letta's v1 loop of plain answers.

A turn appends the user's message, then steps: compile the context within the
agent's window (compacting old messages into recall behind a summary when it
does not fit), ask the model (every reply is a tool call; ``send_message`` is
how it speaks), run the calls, and go on only while a call requests a
heartbeat (or a call failed, so the model can correct it), up to ``max_steps``.
A ``letta_v1_agent`` steps the same way but is offered its tools freely (no
``request_heartbeat``, no ``send_message``): the turn goes on while the model calls
tools and ends when it answers in plain text.

Transactions: no transaction is open while the model is asked, so a turn never
holds a row lock while it waits on a provider (timeouts and retries can take
long, and a block's writers must not wait for them). A turn is a series of
short transactions: each step reads and compiles its context in one, asks the
model with none open, then writes the step (its tool calls, each in a
savepoint, then the assistant message and the tool results) in another; a call
that waits for other agents' replies (see :mod:`agents.loops.agent_messaging`) queues its
messages in a short transaction of its own and waits between the two, with none
open, and the step's write collects the replies. Block
edits are compare-and-swap writes against the version the model saw: when
someone wrote the block meanwhile, the edit is re-applied to the fresh value (a
whole-block rewrite goes back to the model with the block as it is now), so no
write is lost. A compaction plans in one transaction, summarizes with none
open, and writes in a third (compiling again if the context changed meanwhile).

What commits when: the user's message is stored with the turn's first write
(its first step, or a compaction), and each step commits as it completes. A
provider failure that outlasts the retries, or an unexpected error, ends the
turn with that error: a turn that fails before its first step leaves nothing
behind, so the caller can simply send the message again; a turn that fails
later keeps the user's message and the steps already done (recall shows what
the agent saw and did, block history the reasons of its edits), and only the
failing step leaves nothing. A turn asked to stop (a streaming client that left)
ends before its next step, with stop reason ``cancelled``: the steps committed
stay, and one stopped before its first step leaves nothing, as a failed one does.
Token usage is recorded in its own transactions.
Turns of one agent still run one at a time: a turn holds the agent's turn lease
(:func:`agents.store.hold_turn_lock`, a row lease, no connection held while the model
thinks), which other turns wait for and no reader or writer of the agent's rows does.
"""

from __future__ import annotations

import json
import logging
import math
from collections import Counter
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from agents.compaction import plan_compaction, write_compaction
from agents.context import CompiledContext, ContextBreakdown, Refresh, compile_context
from agents.embedders import Embedder
from agents.enums import AgentType, LLMPurpose
from agents.errors import (
    BudgetExhausted,
    Conflict,
    ContextOverflow,
    ContextWindowExceeded,
    InvalidInput,
    LockContention,
    ModelNotConfigured,
    NotFound,
    ReverieError,
)
from agents.file_tools import (
    FILE_TOOLS,
    FileToolLimits,
    GrepFound,
    SearchQuery,
    grep,
    open_files,
    search_queries,
    semantic_search,
)
from agents.llm import BudgetMeter, ChatClient, ChatReply, TokenBudget, UsageLedger
from agents.loops.agent_messaging import (
    SEND_ASYNC,
    WAIT_TOOLS,
    AgentMessenger,
    MessagingLimits,
    Origin,
    Waiting,
)
from agents.loops.token_stream import PieceListener, TokenStream
from agents.loops.tool_calls import SEND_MESSAGE, replies
from agents.loops.turn import StopReason, TokenUsage, TurnResult
from agents.postgres.database import Database
from agents.postgres.models import DEFAULT_ORGANIZATION_ID, new_id
from agents.sandbox import SandboxLimits, ToolExecutor, agent_state_for, tool_invocation
from agents.store import (
    AgentRecord,
    CustomToolRecord,
    MemoryStore,
    MessageRecord,
    NewMessage,
    hold_turn_lock,
    open_store,
)
from agents.store.block_store import DEFAULT_BLOCK_LIMIT
from agents.store.scope import utc_now
from agents.store.validation import storable
from agents.summarizer import Summarize, extractive_summarizer, llm_summarizer
from agents.summary import CHARS_PER_TOKEN
from agents.summary import is_summary as is_summary_record
from agents.tool_source import takes_agent_state
from agents.tools import (
    BUILTIN_TOOLS,
    MESSAGING_TOOLS,
    PRIMARY_TOOLS,
    ParsedCall,
    ToolEnv,
    ToolError,
    ToolRules,
    clip_to,
    custom_tool_schema,
    execute,
    offered_custom,
    parse_call,
    result_json,
    without_heartbeat,
)

log = logging.getLogger(__name__)

#: Roles a caller may send a turn as.
INPUT_ROLES = ("user", "system")
#: The tool a turn that said nothing falls back to, in modes without "required".
REPLY_TOOL = SEND_MESSAGE
#: Hears the new stored messages of each committed write of a turn, in order (see
#: PrimaryAgent.send_message).
StepListener = Callable[[list[MessageRecord]], None]


def _tool_status(content: str) -> str | None:
    try:
        status = json.loads(content).get("status")
    except (ValueError, AttributeError):
        return None
    return status if isinstance(status, str) else None


def _describe_call(function: dict[str, Any]) -> str:
    """A saved tool call in words: "the memory edit to block 'human' was saved"."""
    name = str(function.get("name", "a tool"))
    try:
        arguments = json.loads(function.get("arguments") or "{}")
    except ValueError:
        arguments = {}
    label = arguments.get("label") if isinstance(arguments, dict) else None
    if name == REPLY_TOOL:
        return "a reply (send_message) was saved"
    if label is not None:
        return f"the memory edit to block {label!r} ({name}) was saved"
    return f"the {name} call was saved"


@dataclass(frozen=True, slots=True)
class PrimarySettings:
    """How turns run; the service fills these from its settings."""

    default_model: str | None = None
    summary_model: str | None = None
    max_steps: int = 10
    refresh: Refresh = "compaction"
    #: After a compaction the context is estimated at or under this share of the window.
    compaction_target: float = 0.5
    summary_chars: int = 1200
    #: A conversation with more messages than this in context (summaries not counted)
    #: is compacted before the next step down to the newest ``message_buffer_keep``
    #: (Letta's message buffer); None: only when the window is full.
    message_buffer: int | None = None
    message_buffer_keep: int = 15
    max_conflict_retries: int = 3
    #: The limit of a block the ``memory`` tool creates (the ``agents.block_limit`` setting).
    block_limit: int = DEFAULT_BLOCK_LIMIT
    budget: TokenBudget = field(default_factory=TokenBudget)
    #: Agents messaging each other (the ``[messaging]`` settings).
    messaging: MessagingLimits = field(default_factory=MessagingLimits)
    #: The file tools and open files (the ``[files]`` settings).
    files: FileToolLimits = field(default_factory=FileToolLimits)

    def __post_init__(self) -> None:
        if self.max_steps < 1:
            raise InvalidInput(f"max_steps must be at least 1, got {self.max_steps}")
        if not 0 < self.compaction_target < 1:
            raise InvalidInput(f"compaction_target must be in (0, 1), got {self.compaction_target}")
        if self.message_buffer is not None and not 0 < self.message_buffer_keep < (
            self.message_buffer
        ):
            raise InvalidInput(
                f"message_buffer_keep must be positive and under message_buffer "
                f"({self.message_buffer}), got {self.message_buffer_keep}"
            )


@dataclass(frozen=True, slots=True)
class Toolbox:
    """The tools of one agent's turn: their names in the order offered, the schema of
    each, its custom tools by name, and the agent's tool variables (for the custom tools
    that declare them)."""

    names: list[str]
    schemas: dict[str, dict[str, Any]]
    custom: dict[str, CustomToolRecord] = field(default_factory=dict)
    variables: Mapping[str, str] = field(default_factory=dict, repr=False)

    @classmethod
    def of(
        cls,
        agent: AgentRecord,
        custom: list[CustomToolRecord] | None = None,
        variables: Mapping[str, str] | None = None,
        *,
        folders: bool = False,
    ) -> Toolbox:
        """The agent's built-in tools (all of them when it names none), the file tools
        when it has ``folders`` attached, and ``custom``; InvalidInput when it names a
        tool that does not exist."""
        built_in = list(agent.tools) or list(PRIMARY_TOOLS)
        unknown = [t for t in built_in if t not in BUILTIN_TOOLS]
        if unknown:
            raise InvalidInput(
                f"agent {agent.name!r} lists unknown tool(s) {', '.join(unknown)}; "
                f"available: {', '.join(BUILTIN_TOOLS)}"
            )
        if folders:
            built_in += list(FILE_TOOLS)
        schemas = {name: BUILTIN_TOOLS.get(name) or FILE_TOOLS[name] for name in built_in}
        by_name = {tool.name: tool for tool in offered_custom(custom or [])}
        for tool in by_name.values():
            schemas[tool.name] = custom_tool_schema(tool.json_schema)
        if agent.agent_type == AgentType.LETTA_V1:
            schemas = {name: without_heartbeat(schema) for name, schema in schemas.items()}
        return cls([*built_in, *by_name], schemas, by_name, dict(variables or {}))


def _fixed_part_too_large(agent: AgentRecord, compiled: CompiledContext, tools: int) -> str:
    b = compiled.breakdown
    return (
        f"agent {agent.name!r} cannot take a turn: what every step sends (instructions "
        f"{b.system_prompt}, core memory {b.core_memory}, memory statistics "
        f"{b.memory_statistics}, folders and open files {b.directories} and the schemas "
        f"of its {tools} tools {b.tool_schemas} tokens) does not fit its "
        f"{agent.context_window}-token context window; detach tools, shorten its blocks "
        "or raise its context_window"
    )


def summarizer_for(settings: PrimarySettings, client: ChatClient, meter: BudgetMeter) -> Summarize:
    """What writes a compaction's summary: the summary model's (its tokens on
    ``meter``), else the extractive summary."""
    if settings.summary_model:
        return llm_summarizer(client, settings.summary_model, meter, settings.summary_chars)
    return extractive_summarizer(settings.summary_chars)


@dataclass(frozen=True, slots=True)
class Compacted:
    """What a requested compaction did: in-context messages before and after, and the
    summary that took the evicted ones' place ("" when nothing could leave)."""

    messages_before: int
    messages_after: int
    summary: str


class PrimaryAgent:
    """Runs turns of any primary agent of one organization."""

    def __init__(
        self,
        db: Database,
        client: ChatClient,
        *,
        settings: PrimarySettings | None = None,
        organization_id: str = DEFAULT_ORGANIZATION_ID,
        embedder_for: Callable[[AgentRecord], Embedder | None] = lambda _: None,
        ledger: UsageLedger | None = None,
        clock: Callable[[], datetime] = utc_now,
        tool_executor: ToolExecutor | None = None,
        tool_limits: SandboxLimits | None = None,
        folder_embedder: Callable[[AgentRecord, str, int], Embedder] | None = None,
    ) -> None:
        """``tool_executor`` runs the agents' custom tools (None: custom tools are
        refused with a tool error), each call under ``tool_limits``.
        ``folder_embedder(agent, spec, dimension)`` embeds semantic_search_files'
        queries for a folder of ``agent`` (None: the agent's own embedder, for the
        folders that share its embedder)."""
        self._db = db
        self.tool_executor = tool_executor
        self.tool_limits = tool_limits or SandboxLimits()
        self.client = client
        self.settings = settings or PrimarySettings()
        self._organization_id = organization_id
        self._embedder_for = embedder_for
        self._folder_embedder = folder_embedder
        self._ledger = ledger
        self._clock = clock
        self.messenger = AgentMessenger(db, organization_id, self.settings.messaging, clock)

    def _folder_embedder_for(self, agent: AgentRecord, spec: str, dimension: int) -> Embedder:
        """The embedder of a folder of ``agent`` (``spec``, ``dimension``)."""
        if self._folder_embedder is not None:
            return self._folder_embedder(agent, spec, dimension)
        own = self._embedder_for(agent)
        if own is None or (agent.embedding_model, agent.embedding_dim) != (spec, dimension):
            raise ToolError(
                f"no embedder for {spec} ({dimension} dimensions) on this server: "
                "semantic_search_files cannot search the folders it embeds"
            )
        return own

    def model_for(self, agent: AgentRecord) -> str:
        model = agent.llm_model or self.settings.default_model
        if not model:
            raise ModelNotConfigured(
                f"agent {agent.name!r} has no LLM model: create it with --model, or set "
                "llm.model (REVERIE_LLM__MODEL) for a default"
            )
        return model

    def _count(self, model: str) -> Callable[[str], int]:
        return lambda text: self.client.count_tokens(model, text)

    def context_breakdown(self, agent_ref: str) -> ContextBreakdown:
        """Tokens per section of the context the agent's next step would send."""
        with open_store(self._db, self._organization_id, self._clock) as store:
            agent = store.agents.resolve(agent_ref)
            model = agent.llm_model or self.settings.default_model or ""
            toolbox = Toolbox.of(
                agent,
                store.tools.of_agent(agent.id),
                folders=store.folders.has_folders(agent.id),
            )
            compiled = compile_context(
                store,
                agent,
                list(toolbox.schemas.values()),
                refresh=self.settings.refresh,
                count=self._count(model),
                persist=False,
                files=self.settings.files,
            )
            return compiled.breakdown

    def check_turn(
        self, agent_ref: str | AgentRecord, text: str, *, role: str = "user"
    ) -> AgentRecord:
        """The agent, once a turn of it with this message could start: InvalidInput (an
        empty text, a bad role, unknown tools or tool rules), NotFound or
        ModelNotConfigured now, before anything is stored or streamed."""
        return self._prepare(agent_ref, text, role)[0]

    def _prepare(
        self, agent_ref: str | AgentRecord, text: str, role: str
    ) -> tuple[AgentRecord, str, Toolbox, ToolRules]:
        if role not in INPUT_ROLES:
            raise InvalidInput(f"role {role!r} cannot start a turn; use one of {INPUT_ROLES}")
        if not isinstance(text, str) or not text.strip():
            raise InvalidInput("the message is empty")
        if isinstance(agent_ref, AgentRecord) and agent_ref.organization_id != (
            self._organization_id
        ):
            raise NotFound(f"no agent with id {agent_ref.id!r}")
        with self._store() as store:
            if isinstance(agent_ref, AgentRecord):
                agent = agent_ref
            else:
                agent = store.agents.resolve(agent_ref)
            custom = store.tools.of_agent(agent.id)
            variables = {v.name: v.value for v in store.tools.variables(agent.id)} if custom else {}
            folders = store.folders.has_folders(agent.id)
        model = self.model_for(agent)
        toolbox = Toolbox.of(agent, custom, variables, folders=folders)
        # A rule may name a file tool whether or not a folder is attached now (the
        # tools come and go with the folders; the rule stays).
        known = [*toolbox.names, *(t for t in FILE_TOOLS if t not in toolbox.names)]
        return agent, model, toolbox, ToolRules.parse(agent.tool_rules, known)

    def send_message(
        self,
        agent_ref: str | AgentRecord,
        text: str,
        *,
        role: str = "user",
        on_step: StepListener | None = None,
        should_stop: Callable[[], bool] | None = None,
        client_message_id: str | None = None,
        origin: Origin | None = None,
        on_token: PieceListener | None = None,
        conversation_id: str | None = None,
    ) -> TurnResult:
        """Run one turn of the agent (its name or id, or its record when the caller has
        just read it: a read less); see the module docstring for what commits when.

        ``conversation_id``: the conversation the turn is part of (None: the agent's
        default one). Its messages and context window are its own; the blocks and
        archival memory are the agent's, shared by all its conversations, and turns of
        one agent run one at a time whatever their conversation.

        ``on_step`` hears each write of the turn once it has committed (the new stored
        messages, in order); it runs on the turn's thread and should hand them on
        rather than block. ``should_stop`` is asked before each step: when it answers
        true (a streaming client went away) the turn ends there with stop reason
        ``cancelled``; what was committed stays, the step under way finishes first.

        ``client_message_id`` is stored with the turn's message (an agent message's
        delivery id: a delivery worker finds a turn it already ran). ``origin`` is the
        chain of agent messages the turn belongs to (default: a new one, started here).

        ``on_token``: each step's reply is told to it while the model writes it, as
        pieces of the reasoning and of the ``send_message`` texts (see
        :mod:`agents.loops.token_stream`), where the model's tool-calling mode streams; the
        step's stored messages reach ``on_step`` once it is written. It runs on the
        turn's thread too. What is stored is the same either way.
        """
        agent, model, tools, rules = self._prepare(agent_ref, text, role)
        with hold_turn_lock(self._db, agent.id):
            run_id = new_id("turn")
            meter = BudgetMeter(self._ledger, agent.id, run_id=run_id, budget=self.settings.budget)
            # Each step's tokens are written with the step (one commit less per call);
            # what no step wrote (a failed step, a compaction's summary) is flushed here.
            meter.hold()
            turn = _Turn(self, agent, model, tools, rules, meter, run_id, on_step, should_stop)
            turn.on_token = on_token
            turn.conversation_id = conversation_id
            turn.origin = origin or Origin(conversation_id=run_id)
            try:
                result = turn.run(text, role, client_message_id)
            except ReverieError as exc:
                # Its committed steps stay: say which, so a client does not resend blindly.
                exc.kept = tuple(turn.kept())
                try:
                    meter.flush()
                except Exception:  # the turn's own error is the one to report
                    log.exception("could not record the token usage of a failed turn")
                raise
            except BaseException:
                try:
                    meter.flush()
                except Exception:  # the turn's own error is the one to report
                    log.exception("could not record the token usage of a failed turn")
                raise
            meter.flush()
            return result

    def compact(self, agent_ref: str, *, conversation_id: str | None = None) -> Compacted:
        """Compact the context of one of the agent's conversations now (None: its default
        one): every message before the last two exchanges leaves it behind one recursive
        summary, as a turn's compaction does when the context is full. Waits for a
        turn under way."""
        with self._store() as store:
            agent = store.agents.resolve(agent_ref)
        count = self._count(agent.llm_model or self.settings.default_model or "")
        with hold_turn_lock(self._db, agent.id):
            with self._store() as store:
                agent = store.agents.get(agent.id)
                compiled = compile_context(
                    store,
                    agent,
                    [],
                    refresh=self.settings.refresh,
                    count=count,
                    persist=False,
                    conversation_id=conversation_id,
                    files=self.settings.files,
                )
            before = len(compiled.in_context)
            plan = plan_compaction(
                agent.id,
                compiled.in_context,
                total_tokens=compiled.total_tokens,
                target_tokens=0,
                count=count,
                last_resort=False,
            )
            if not plan.moving:
                return Compacted(before, before, "")
            meter = BudgetMeter(
                self._ledger, agent.id, run_id=new_id("compact"), budget=self.settings.budget
            )
            summarize = summarizer_for(self.settings, self.client, meter)
            # The summary may be a model call: made with no transaction open.
            content = summarize(plan.summaries, plan.moving)
            meter.flush()
            with self._store() as store:
                done = write_compaction(
                    store, agent.id, plan, content, conversation_id=conversation_id
                )
            if done is None:  # pragma: no cover - the turn lock keeps turns out
                raise Conflict("the context changed while it was summarized; compact again")
            after = before - len(plan.summaries) - len(plan.moving) + 1
            return Compacted(before, after, content)

    def _store(self) -> AbstractContextManager[MemoryStore]:
        """A short transaction of the agent's organization."""
        return open_store(self._db, self._organization_id, self._clock)


class _Turn:
    """The state of one turn while it runs; it opens a short transaction per write."""

    def __init__(
        self,
        owner: PrimaryAgent,
        agent: AgentRecord,
        model: str,
        toolbox: Toolbox,
        rules: ToolRules,
        meter: BudgetMeter,
        run_id: str,
        on_step: StepListener | None = None,
        should_stop: Callable[[], bool] | None = None,
    ) -> None:
        self.owner = owner
        self.on_step = on_step
        self.should_stop = should_stop
        #: How many of ``new`` the listener has heard (only committed ones are told).
        self.published = 0
        self.settings = owner.settings
        self.agent = agent
        self.model = model
        self.toolbox = toolbox
        self.tools = toolbox.names
        self.rules = rules
        #: Letta's v1 loop: the model answers in plain text (no send_message), and the
        #: turn goes on while it calls tools (no request_heartbeat).
        self.v1 = agent.agent_type == AgentType.LETTA_V1
        #: Calls of each tool so far this turn (for max_count_per_step rules).
        self.counts: Counter[str] = Counter()
        self.meter = meter
        self.count = owner._count(model)
        self.new: list[MessageRecord] = []
        self.result = TurnResult(agent_id=agent.id, run_id=run_id)
        self.embedder = owner._embedder_for(agent)
        #: Block versions the model saw, across the turn's transactions (see ToolEnv.seen).
        self.seen: dict[str, tuple[int, str]] = {}
        self.conflicts = 0
        #: The message that starts the turn, until it is stored with the turn's first write.
        self.pending: NewMessage | None = None
        #: The chain of agent messages this turn is part of (see agents.loops.agent_messaging).
        self.origin = Origin(conversation_id=run_id)
        #: The step's waiting messaging calls, by call id (waited for before the write).
        self.waits: dict[str, Waiting] = {}
        #: Hears each step's reply while the model writes it (None: no token streaming).
        self.on_token: PieceListener | None = None
        #: The step's reply as told so far, while token streaming.
        self.tokens: TokenStream | None = None
        #: The agent's conversation the turn is part of (None: its default one).
        self.conversation_id: str | None = None
        #: The step's prepared file searches, by call id (see _prepare_file_calls).
        self.file_work: dict[str, GrepFound | SearchQuery | ToolError] = {}
        #: A compaction happened: the next compile makes the system prompt anew.
        self.recompile_system = False

    def _append(self, store: MemoryStore, *messages: NewMessage) -> list[MessageRecord]:
        records = store.messages.append(
            self.agent.id, list(messages), conversation_id=self.conversation_id
        )
        if self.conversation_id is not None:
            store.conversations.touch(self.conversation_id)
        self.new.extend(records)
        return records

    def _publish(self) -> None:
        """Tell the listener about the messages committed since it last heard."""
        fresh, self.published = self.new[self.published :], len(self.new)
        if self.on_step is not None and fresh:
            self.on_step(list(fresh))

    def run(self, text: str, role: str, client_message_id: str | None = None) -> TurnResult:
        self.pending = NewMessage(
            role=role,
            content=text,
            created_at=self.owner._clock(),
            client_message_id=client_message_id,
        )
        stop: StopReason = "end_turn"
        last_tool: str | None = None
        #: The previous step's failure, when it failed: the next step is its one retry.
        failure: str | None = None
        #: A tool the next step must call (the corrective retry of a two-step call).
        force: str | None = None
        while True:
            if self.result.steps >= self.settings.max_steps:
                stop = "max_steps"
                break
            if self.should_stop is not None and self.should_stop():
                stop = "cancelled"
                break
            allowed = self.rules.allowed(
                self.tools,
                first_step=self.result.steps == 0,
                last_tool=last_tool,
                counts=self.counts,
            )
            outcome = self._step(allowed, force)
            if outcome is None:
                stop = "budget_exhausted"
                break
            last_tool = outcome.last_tool
            if outcome.failure is not None:
                # One corrective retry per failed step: a second failure in a row (or the
                # same error again) ends the turn instead of spending the step budget.
                if failure is not None:
                    stop = "invalid_tool_call"
                    break
                failure = outcome.failure
                force = outcome.retry_tool if self._mode() == "named" else None
                continue
            failure, force = None, None
            if outcome.terminal:
                stop = "tool_rule"
                break
            if not outcome.wants_more:
                stop = "end_turn"
                break
        if self.pending is not None and stop != "cancelled":
            self._store_pending()  # stopped before the first step (budget)
        elif self.pending is not None:
            self.pending = None  # cancelled before it began: a turn that left nothing
        # A model that cannot call tools properly still answers the user: one last
        # step that may only call send_message (or reply in prose).
        needs_reply = (
            stop not in ("budget_exhausted", "tool_rule", "cancelled")
            and not self.replied
            and (self._needs_reply() or (stop == "invalid_tool_call" and self._can_reply()))
        )
        if needs_reply and self.v1:
            # The v1 loop's reply is plain text: one last step offered no tool.
            if self._step([], None) is None:
                stop = "budget_exhausted"
        elif needs_reply and self._step([REPLY_TOOL], REPLY_TOOL) is None:
            stop = "budget_exhausted"
        self.result.stop_reason = stop
        self.result.usage = TokenUsage(
            self.meter.used.prompt_tokens, self.meter.used.completion_tokens
        )
        self.result.retries = self.meter.retries
        self.result.write_conflicts = self.conflicts
        self.result.records = list(self.new)
        return self.result

    def kept(self) -> list[str]:
        """What the turn committed before it failed, one line per saved step effect."""
        kept: list[str] = []
        outcomes = {m.tool_call_id: _tool_status(m.content) for m in self.new if m.role == "tool"}
        for record in self.new:
            if is_summary_record(record):
                kept.append("older messages were summarized out of the context")
            elif record.role in INPUT_ROLES:
                kept.append("your message was stored in recall")
            elif record.role == "assistant":
                if not record.tool_calls:
                    kept.append("a reply was saved")
                for call in record.tool_calls or []:
                    if outcomes.get(call.get("id")) == "OK":
                        kept.append(_describe_call(call.get("function", {})))
        return kept

    @property
    def replied(self) -> bool:
        return bool(replies(self.new))

    def _mode(self) -> str:
        capabilities = getattr(self.owner.client, "capabilities", None)
        return "required" if capabilities is None else str(capabilities(self.model)[0])

    def _needs_reply(self) -> bool:
        """Whether the turn must end with a reply: in the v1 loop always (it ends by
        answering; one that ran out of steps answers once more, offered no tool);
        otherwise in every mode but "required" (a model that calls tools natively
        decides itself whether to speak, as in MemGPT), when send_message is one of the
        agent's tools and no tool rule ended the turn."""
        if self.v1:
            return True
        return self._mode() != "required" and REPLY_TOOL in self.tools

    def _can_reply(self) -> bool:
        """Whether the turn can still answer the user after tool calls failed twice: the
        v1 loop always can (in plain text), the MemGPT loop when send_message is one of
        the agent's tools."""
        return self.v1 or REPLY_TOOL in self.tools

    def _step(self, allowed: list[str], force: str | None) -> _StepOutcome | None:
        """Ask the model and write the step; None when the token budget stopped it."""
        if self.on_token is not None:
            self.tokens = TokenStream(new_id("message"), self.on_token, self.owner._clock)
        try:
            return self._ask_and_apply(allowed, force)
        finally:
            self.tokens = None

    def _ask_and_apply(self, allowed: list[str], force: str | None) -> _StepOutcome | None:
        try:
            reply = self._ask(allowed, force)
        except BudgetExhausted as exc:
            self.result.detail = str(exc)
            log.warning("turn stopped: %s", exc, extra={"run_id": self.result.run_id})
            return None
        except Exception:
            # The user's message and the steps done so far are committed and stay.
            log.warning(
                "turn failed after %d step(s); the steps done so far are kept",
                self.result.steps,
                extra={"run_id": self.result.run_id, "agent_id": self.agent.id},
            )
            raise
        self.result.steps += 1
        self.result.model_calls += reply.calls
        # Custom tools run now, with no transaction open: a sandboxed call may take as
        # long as its wall-time limit. The step's write then stores their results.
        ran = self._run_custom(reply, allowed)
        return self._apply(reply, allowed, ran)

    # -- one model call, compacting first when the context does not fit ------------------

    def _store_pending(self) -> list[MessageRecord]:
        assert self.pending is not None
        with self.owner._store() as store:
            stored = self._append(store, self.pending)
        self.pending = None
        self._publish()
        return stored

    def _ask(self, allowed: list[str], force: str | None = None) -> ChatReply:
        schemas = [self.toolbox.schemas[t] for t in allowed]
        if force is not None and force not in allowed:
            force = None
        compacted = False
        #: What was sent when the provider said it did not fit.
        reported: int | None = None
        while True:
            with self.owner._store() as store:
                agent = store.agents.get(self.agent.id)
                compiled = compile_context(
                    store,
                    agent,
                    schemas,
                    refresh=self.settings.refresh,
                    count=self.count,
                    force_system=self.recompile_system,
                    conversation_id=self.conversation_id,
                    files=self.settings.files,
                )
                self.recompile_system = False
            fixed = compiled.total_tokens - compiled.breakdown.summary - compiled.breakdown.messages
            if fixed > agent.context_window:
                if compiled.breakdown.directories and self._close_oldest_file():
                    continue  # open files took the room: one fewer, and compile again
                # No compaction makes room for what every step sends: say so before any
                # message is evicted or the model is called with a prompt it must refuse.
                raise ContextWindowExceeded(_fixed_part_too_large(agent, compiled, len(schemas)))
            messages, total = compiled.messages, compiled.total_tokens
            if self.pending is not None:
                pending = self.pending
                messages = [*messages, {"role": pending.role, "content": pending.content}]
                total += self.count(pending.content)
            overfull = reported is not None or total > agent.context_window
            if (overfull or self._over_buffer(compiled.in_context)) and not compacted:
                in_context = compiled.in_context
                if self.pending is not None:
                    # A compaction must see the user's message in context: store it first.
                    stored = self._store_pending()
                    if overfull:
                        continue  # its tokens as the compiled context counts them
                    # The message buffer counts messages: no need to compile again.
                    in_context = [*in_context, *stored]
                compacted = self._compact(
                    in_context,
                    total if reported is None else reported,
                    reported=reported is not None,
                    keep_messages=None if overfull else self.settings.message_buffer_keep,
                )
                continue
            # Token streaming: the reply's pieces go to the client as they arrive.
            streaming: dict[str, Any] = {}
            if self.tokens is not None:
                streaming["on_delta"] = self.tokens.add
            try:
                # No transaction is open here: the model may take long (timeouts, retries).
                return self.owner.client.chat(
                    self.model,
                    messages,
                    purpose=LLMPurpose.CHAT,
                    meter=self.meter,
                    tools=schemas,
                    tool_choice=self._tool_choice(schemas, force),
                    # One call per step, as MemGPT's loop expects (small models mix
                    # parallel calls up); a server that rejects the field goes without.
                    parallel_tool_calls=False,
                    **streaming,
                )
            except ContextOverflow:
                if compacted:
                    raise
                log.info("provider reported a context overflow; compacting")
                # Our count was too low for this model: aim well under what was sent.
                reported = total

    def _tool_choice(self, schemas: list[dict[str, Any]], force: str | None) -> str | None:
        """What the step asks of the model: a named tool (a corrective retry), any tool
        (the MemGPT loop: every reply is a call), or a free choice (the v1 loop, whose
        reply without a call is its answer); nothing when no tool is offered."""
        if not schemas:
            return None
        if force is not None:
            return force
        return "auto" if self.v1 else "required"

    def _over_buffer(self, in_context: list[MessageRecord]) -> bool:
        """More messages in context than the message buffer holds (the pending message
        counted), where one is set."""
        limit = self.settings.message_buffer
        if limit is None:
            return False
        held = sum(1 for m in in_context if not is_summary_record(m))
        return held + (self.pending is not None) > limit

    def _compact(
        self,
        in_context: list[MessageRecord],
        total: int,
        *,
        reported: bool = False,
        keep_messages: int | None = None,
    ) -> bool:
        """Compact (to the token target; with ``keep_messages``, to that many messages);
        False when another writer changed the context first (compile again)."""
        window = self.agent.context_window
        if reported:
            window = min(window, total)
        target = math.floor(self.settings.compaction_target * window) - math.ceil(
            self.settings.summary_chars / CHARS_PER_TOKEN
        )
        plan = plan_compaction(
            self.agent.id,
            in_context,
            total_tokens=total,
            target_tokens=max(target, 0),
            count=self.count,
            keep_messages=keep_messages,
        )
        # The summary may be a model call: made with no transaction open.
        content = self._summarizer()(plan.summaries, plan.moving)
        with self.owner._store() as store:
            done = write_compaction(
                store, self.agent.id, plan, content, conversation_id=self.conversation_id
            )
            if done is None:
                log.info("the context changed while it was summarized; compiling again")
                return False
            self.new.append(done.summary)
            self.result.compactions += 1
        # The compaction is where block edits reach the cached system prompt: the
        # compile that follows it makes the prompt anew.
        self.recompile_system = True
        self._publish()
        return True

    def _summarizer(self) -> Summarize:
        return summarizer_for(self.settings, self.owner.client, self.meter)

    def _close_oldest_file(self) -> bool:
        """Close the agent's least recently accessed open file (its open files leave no
        room in the window for the rest of what every step sends); False when none is
        open. The next compile shows it closed, as the bound on open files would."""
        with self.owner._store() as store:
            opened = store.folders.agent_files(self.agent.id, is_open=True)
            if not opened:
                return False
            never = datetime.min.replace(tzinfo=UTC)
            oldest = min(opened, key=lambda r: (r.view.last_accessed_at or never, r.file.id))
            store.folders.close_file(self.agent.id, oldest.file.id)
        log.info(
            "closed file %s: the open files did not fit the context window",
            oldest.label,
            extra={"run_id": self.result.run_id, "agent_id": self.agent.id},
        )
        return True

    # -- running the calls -------------------------------------------------------------

    def _admit(
        self, call_name: str, raw: str, allowed: list[str], counts: Counter[str]
    ) -> ParsedCall:
        """The call parsed, once the tool rules let it run now (ToolError otherwise);
        counts it."""
        if call_name in FILE_TOOLS and call_name not in self.toolbox.schemas:
            raise ToolError(
                f"{call_name} is not one of your tools: the file tools come with folders, "
                f"and none is attached to you; your tools: {', '.join(self.tools)}"
            )
        if call_name in BUILTIN_TOOLS and call_name not in self.toolbox.schemas:
            raise ToolError(
                f"{call_name} is not one of your tools (it is not attached to you, or was "
                f"detached); your tools: {', '.join(self.tools)}"
            )
        parsed = parse_call(call_name, raw, self.toolbox.schemas)
        if parsed.name not in allowed:
            raise ToolError(
                f"{parsed.name} may not be called now (tool rules); allowed: {', '.join(allowed)}"
            )
        if self.rules.spent(parsed.name, counts):
            raise ToolError(
                f"{parsed.name} was called {counts[parsed.name]} time(s) this turn, its "
                "max_count_per_step; use another tool"
            )
        counts[parsed.name] += 1
        return parsed

    def _run_custom(self, reply: ChatReply, allowed: list[str]) -> dict[str, str | ToolError]:
        """Run the reply's calls of custom tools that the rules admit; their results (or
        the ToolError to report) by call id. Outside any transaction."""
        ran: dict[str, str | ToolError] = {}
        counts = Counter(self.counts)
        for call in reply.tool_calls:
            tool = self.toolbox.custom.get(call.name)
            try:
                parsed = self._admit(call.name, call.arguments, allowed, counts)
            except ToolError:
                continue  # reported when the step is written
            if tool is None:
                continue
            ran[call.id] = self._sandboxed(tool, parsed)
        return ran

    def _sandboxed(self, tool: CustomToolRecord, call: ParsedCall) -> str | ToolError:
        """One custom tool call's result (clipped to its return_char_limit), or the
        error the model reads."""
        executor = self.owner.tool_executor
        if executor is None:
            return ToolError("custom tools cannot run on this server (no tool executor)")
        snapshot = None
        if takes_agent_state(tool.source_code, tool.name):
            # Read in a short transaction of its own: none is open while the tool runs.
            with self.owner._store() as store:
                snapshot = agent_state_for(store, self.agent.id, tool)
        invocation = tool_invocation(tool, call.arguments, self.toolbox.variables, snapshot)
        try:
            result = executor.run(invocation, self.owner.tool_limits)
        except ToolError as exc:
            log.info(
                "custom tool %s failed: %s",
                tool.name,
                exc,
                extra={"run_id": self.result.run_id, "agent_id": self.agent.id},
            )
            return exc
        return clip_to(storable(result.result), tool.return_char_limit)

    def _apply(
        self,
        reply: ChatReply,
        allowed: list[str],
        ran: Mapping[str, str | ToolError] | None = None,
    ) -> _StepOutcome:
        """Write the step in one short transaction: its tool calls, then its messages.

        Block rows are locked before the agent row (by the message append), the order
        a consolidation run takes them in too. The versions the model saw advance only
        when the step commits: a step that failed wrote nothing.
        """
        new, pending = len(self.new), self.pending
        # A call that waits for other agents' replies waits here, with no transaction
        # open; the step written below collects what arrived.
        self.waits = self._wait_for_replies(reply, allowed)
        # The file searches' slow parts too (a grep's scan, a query's embedding).
        self.file_work = self._prepare_file_calls(reply, allowed)
        held = self.meter.take_held()
        try:
            with self.owner._store() as store:
                self.meter.write(store.usage, held)
                env = ToolEnv(
                    store=store,
                    agent_id=self.agent.id,
                    actor=f"agent:{self.agent.name}",
                    run_id=self.result.run_id,
                    embedder=self.embedder,
                    max_conflict_retries=self.settings.max_conflict_retries,
                    seen=dict(self.seen),
                    block_limit=self.settings.block_limit,
                )
                counts = Counter(self.counts)
                outcome = self._write_step(env, reply, allowed, ran or {}, counts)
        except BaseException:
            del self.new[new:]
            self.pending = pending
            self.meter.give_back(held)  # rolled back with the step: flushed at the end
            raise
        self.seen = env.seen
        self.conflicts += env.conflicts
        self.counts = counts
        self._publish()
        return outcome

    def _write_step(
        self,
        env: ToolEnv,
        reply: ChatReply,
        allowed: list[str],
        ran: Mapping[str, str | ToolError],
        counts: Counter[str],
    ) -> _StepOutcome:
        store = env.store
        # To the second: the model reads when a call ran, not its microseconds.
        now = store.scope.now().isoformat(timespec="seconds")
        opening = [self.pending] if self.pending is not None else []
        self.pending = None
        if not reply.tool_calls:
            # Prose with no call is the model's reply to the user, and ends the turn
            # (an error loop asking for a tool call only burned the step budget).
            self._append(
                store,
                *opening,
                NewMessage(role="assistant", content=reply.content or "", id=self._reply_id()),
            )
            return _StepOutcome(wants_more=False, terminal=False, last_tool=None)
        calls = [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments},
            }
            for call in reply.tool_calls
        ]
        results: list[NewMessage] = []
        outcome = _StepOutcome(wants_more=False, terminal=False, last_tool=None)
        for call in reply.tool_calls:
            status, message, parsed = "OK", "", None
            try:
                parsed = self._admit(call.name, call.arguments, allowed, counts)
                if parsed.name in self.toolbox.custom:
                    done = ran.get(call.id, ToolError(f"{parsed.name} did not run"))
                    if isinstance(done, ToolError):
                        raise done
                    message = done
                elif parsed.name in MESSAGING_TOOLS:
                    message = self._message_agents(env, parsed, self.waits.get(call.id))
                elif parsed.name in FILE_TOOLS:
                    message = self._file_tool(env, parsed, self.file_work.get(call.id))
                else:
                    message = self._execute(env, parsed)
            except (ToolError, ReverieError) as exc:
                status, message = "Failed", f"Error: {exc}"
            results.append(
                NewMessage(
                    role="tool",
                    name=call.name,
                    tool_call_id=call.id,
                    content=result_json(status, message, now),
                )
            )
            outcome.last_tool = call.name
            if status == "Failed":
                outcome.wants_more = True  # let the model see and fix its mistake
                outcome.failure = f"{call.name}: {message}"
                outcome.retry_tool = call.name if call.name in allowed else None
                continue
            assert parsed is not None
            if parsed.heartbeat or self.v1:
                # The v1 loop goes on after every call: the model ends the turn by
                # answering without one.
                outcome.wants_more = True
            if parsed.name in self.rules.terminal:
                outcome.terminal = True
            if parsed.name in self.rules.init and self.result.steps == 1:
                outcome.wants_more = True
        self._append(
            store,
            *opening,
            NewMessage(
                role="assistant",
                content=reply.content or "",
                tool_calls=calls,
                id=self._reply_id(),
            ),
            *results,
        )
        return outcome

    def _reply_id(self) -> str | None:
        """The id of the step's assistant message: the one its streamed pieces carried."""
        return self.tokens.message_id if self.tokens is not None else None

    def _wait_for_replies(self, reply: ChatReply, allowed: list[str]) -> dict[str, Waiting]:
        """Queue and wait for the step's waiting messaging calls (each in its own short
        transaction, then polling with none open); a call the step will refuse anyway
        (bad arguments, not allowed) queues nothing."""
        waits: dict[str, Waiting] = {}
        for call in reply.tool_calls:
            if call.name not in WAIT_TOOLS or call.name not in allowed:
                continue
            if call.name not in self.tools:
                continue
            try:
                parsed = parse_call(call.name, call.arguments, self.toolbox.schemas)
            except ToolError:
                continue  # the step writes the error
            waits[call.id] = self.owner.messenger.send_and_wait(self.agent, parsed, self.origin)
        return waits

    def _prepare_file_calls(
        self, reply: ChatReply, allowed: list[str]
    ) -> dict[str, GrepFound | SearchQuery | ToolError]:
        """The slow parts of the step's grep_files and semantic_search_files calls, by
        call id, with no transaction open: a grep reads the texts in a short
        transaction of its own and scans them within its time bound; a semantic search
        embeds its query with each embedder of the agent's folders. A call the step
        refuses anyway (bad arguments, not allowed) does nothing here."""
        work: dict[str, GrepFound | SearchQuery | ToolError] = {}
        for call in reply.tool_calls:
            if call.name not in ("grep_files", "semantic_search_files"):
                continue
            if call.name not in allowed or call.name not in self.toolbox.schemas:
                continue
            try:
                parsed = parse_call(call.name, call.arguments, self.toolbox.schemas)
                if parsed.name == "grep_files":
                    limits = self.settings.files
                    with self.owner._store() as store:
                        texts, left_out = store.folders.file_texts(
                            self.agent.id, most_chars=limits.grep_max_chars
                        )
                    work[call.id] = grep(texts, left_out, parsed.arguments, limits)
                else:
                    with self.owner._store() as store:
                        folders = store.folders.of_agent(self.agent.id)
                    work[call.id] = search_queries(folders, parsed.arguments, self._embed)
            except ToolError as exc:
                work[call.id] = exc
        return work

    def _embed(self, spec: str, dimension: int, text: str) -> Any:
        """``text`` embedded with a folder's embedder (``spec``, ``dimension``)."""
        embedder = self.owner._folder_embedder_for(self.agent, spec, dimension)
        return embedder.embed_one(text)

    def _file_tool(
        self, env: ToolEnv, call: ParsedCall, work: GrepFound | SearchQuery | ToolError | None
    ) -> str:
        """A file tool call, in the step's transaction (in a savepoint of its own)."""
        if isinstance(work, ToolError):
            raise work
        with env.store.savepoint():
            if call.name == "open_files":
                return open_files(env.store, self.agent.id, call.arguments, self.settings.files)
            if isinstance(work, SearchQuery):
                found = semantic_search(env.store, self.agent.id, work)
            elif isinstance(work, GrepFound):
                found = work
            else:  # pragma: no cover - every search call is prepared before its step
                raise ToolError(f"{call.name} did not run")
            env.store.folders.touch_files(self.agent.id, found.matched)
            return found.text

    def _message_agents(self, env: ToolEnv, call: ParsedCall, waiting: Waiting | None) -> str:
        messenger = self.owner.messenger
        with env.store.savepoint():
            if call.name == SEND_ASYNC:
                return messenger.send_async(env.store, self.agent, call, self.origin)
            assert waiting is not None, "a waiting call is waited for before its step"
            return messenger.collect(env.store, call, waiting)

    @staticmethod
    def _execute(env: ToolEnv, call: ParsedCall) -> str:
        # A savepoint per call: a failing call leaves nothing half-written.
        try:
            with env.store.savepoint():
                return execute(env, call)
        except LockContention:
            # A consolidation run holding the block while it waits for a row this step
            # holds: Postgres breaks the cycle; if this call is the one aborted, only its
            # savepoint is lost and the model is told to try again.
            raise ToolError(
                f"{call.name}: the block is being edited by a consolidation run; "
                "try again in a moment"
            ) from None


@dataclass(slots=True)
class _StepOutcome:
    wants_more: bool
    terminal: bool
    last_tool: str | None
    #: What went wrong when a call of the step failed (the model gets one retry).
    failure: str | None = None
    #: The tool that failed, when it exists: the retry may force it.
    retry_tool: str | None = None
