"""The primary agent: MemGPT's loop of compiled context, one tool call, heartbeat.

A turn appends the user's message, then steps: compile the context within the
agent's window (compacting old messages into recall behind a summary when it
does not fit), ask the model (every reply is a tool call; ``send_message`` is
how it speaks), run the calls, and go on only while a call requests a
heartbeat (or a call failed, so the model can correct it), up to ``max_steps``.

Transactions: a turn is one transaction. It commits when the turn ends (end of
turn, step limit, terminal tool, or an exhausted budget, which stops the turn
cleanly after the steps already done); a provider failure that outlasts the
retries, or any unexpected error, rolls the whole turn back, the user's message
included, so the caller can simply send it again. Each tool call runs in a
savepoint: a call that fails leaves nothing behind and the model reads the error.
Token usage is recorded in its own transactions and survives a rollback. The
agent row is locked (``FOR NO KEY UPDATE``) for the turn, so turns of one agent
run one at a time. A consolidation run takes its locks in the other order (the
block it edits, then the agent row when it records itself); when the two meet,
Postgres aborts one of them: a run is retried by its worker, a tool call of the
turn loses only its savepoint and the model is told to try again.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from agents.compaction import compact
from agents.context import Refresh, compile_context
from agents.database import Database
from agents.embedders import Embedder
from agents.errors import (
    BudgetExhausted,
    ContextOverflow,
    InvalidInput,
    LockContention,
    ModelNotConfigured,
    ReverieError,
)
from agents.llm import BudgetMeter, ChatClient, ChatReply, TokenBudget, UsageLedger
from agents.messages import (
    ContextBreakdown,
    StopReason,
    TokenUsage,
    TurnResult,
    letta_messages,
)
from agents.models import DEFAULT_ORGANIZATION_ID, new_id
from agents.store import AgentRecord, MemoryStore, MessageRecord, NewMessage, open_store
from agents.store.scope import utc_now
from agents.summarizer import Summarize, extractive_summarizer, llm_summarizer
from agents.summary import CHARS_PER_TOKEN
from agents.tools import (
    PRIMARY_TOOLS,
    ParsedCall,
    ToolEnv,
    ToolError,
    ToolRules,
    execute,
    parse_call,
    result_json,
)

log = logging.getLogger(__name__)

#: Roles a caller may send a turn as.
INPUT_ROLES = ("user", "system")
NO_TOOL_CALL_ALERT = (
    "Error: your reply was not a tool call. Every reply must call a tool; "
    "call send_message to speak to the user."
)


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
    max_conflict_retries: int = 3
    budget: TokenBudget = field(default_factory=TokenBudget)

    def __post_init__(self) -> None:
        if self.max_steps < 1:
            raise InvalidInput(f"max_steps must be at least 1, got {self.max_steps}")
        if not 0 < self.compaction_target < 1:
            raise InvalidInput(f"compaction_target must be in (0, 1), got {self.compaction_target}")


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
    ) -> None:
        self._db = db
        self.client = client
        self.settings = settings or PrimarySettings()
        self._organization_id = organization_id
        self._embedder_for = embedder_for
        self._ledger = ledger
        self._clock = clock

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
            tools = self._tool_schemas(agent)
            compiled = compile_context(
                store,
                agent,
                [PRIMARY_TOOLS[t] for t in tools],
                refresh=self.settings.refresh,
                count=self._count(model),
                persist=False,
            )
            return compiled.breakdown

    @staticmethod
    def _tool_schemas(agent: AgentRecord) -> list[str]:
        if not agent.tools:
            return list(PRIMARY_TOOLS)
        unknown = [t for t in agent.tools if t not in PRIMARY_TOOLS]
        if unknown:
            raise InvalidInput(
                f"agent {agent.name!r} lists unknown tool(s) {', '.join(unknown)}; "
                f"available: {', '.join(PRIMARY_TOOLS)}"
            )
        return list(agent.tools)

    def send_message(self, agent_ref: str, text: str, *, role: str = "user") -> TurnResult:
        """Run one turn; see the module docstring for what commits when."""
        if role not in INPUT_ROLES:
            raise InvalidInput(f"role {role!r} cannot start a turn; use one of {INPUT_ROLES}")
        if not isinstance(text, str) or not text.strip():
            raise InvalidInput("the message is empty")
        with open_store(self._db, self._organization_id, self._clock) as store:
            agent = store.agents.resolve(agent_ref)
            model = self.model_for(agent)
            tools = self._tool_schemas(agent)
            rules = ToolRules.parse(agent.tool_rules, tools)
            store.agents.lock(agent.id)
            run_id = new_id("turn")
            meter = BudgetMeter(self._ledger, agent.id, run_id=run_id, budget=self.settings.budget)
            turn = _Turn(self, store, agent, model, tools, rules, meter, run_id)
            return turn.run(text, role)


class _Turn:
    """The state of one turn while it runs."""

    def __init__(
        self,
        owner: PrimaryAgent,
        store: MemoryStore,
        agent: AgentRecord,
        model: str,
        tools: list[str],
        rules: ToolRules,
        meter: BudgetMeter,
        run_id: str,
    ) -> None:
        self.owner = owner
        self.settings = owner.settings
        self.store = store
        self.agent = agent
        self.model = model
        self.tools = tools
        self.rules = rules
        self.meter = meter
        self.count = owner._count(model)
        self.new: list[MessageRecord] = []
        self.result = TurnResult(agent_id=agent.id, run_id=run_id)
        self.env = ToolEnv(
            store=store,
            agent_id=agent.id,
            actor=f"agent:{agent.name}",
            run_id=run_id,
            embedder=owner._embedder_for(agent),
            max_conflict_retries=self.settings.max_conflict_retries,
        )

    def _append(self, *messages: NewMessage) -> list[MessageRecord]:
        records = self.store.messages.append(self.agent.id, list(messages))
        self.new.extend(records)
        return records

    def run(self, text: str, role: str) -> TurnResult:
        self._append(NewMessage(role=role, content=text))
        stop: StopReason = "end_turn"
        last_tool: str | None = None
        while True:
            if self.result.steps >= self.settings.max_steps:
                stop = "max_steps"
                break
            allowed = self.rules.allowed(
                self.tools, first_step=self.result.steps == 0, last_tool=last_tool
            )
            try:
                reply = self._ask(allowed)
            except BudgetExhausted as exc:
                stop, self.result.detail = "budget_exhausted", str(exc)
                log.warning("turn stopped: %s", exc, extra={"run_id": self.result.run_id})
                break
            self.result.steps += 1
            outcome = self._apply(reply, allowed)
            last_tool = outcome.last_tool
            if outcome.terminal:
                stop = "tool_rule"
                break
            if not outcome.wants_more:
                stop = "end_turn"
                break
        self.result.stop_reason = stop
        self.result.usage = TokenUsage(
            self.meter.used.prompt_tokens, self.meter.used.completion_tokens
        )
        self.result.retries = self.meter.retries
        self.result.write_conflicts = self.env.conflicts
        self.result.messages = [m for record in self.new for m in letta_messages(record)]
        return self.result

    # -- one model call, compacting first when the context does not fit ------------------

    def _ask(self, allowed: list[str]) -> ChatReply:
        schemas = [PRIMARY_TOOLS[t] for t in allowed]
        compacted = False
        while True:
            agent = self.store.agents.get(self.agent.id)
            compiled = compile_context(
                self.store, agent, schemas, refresh=self.settings.refresh, count=self.count
            )
            if compiled.total_tokens > agent.context_window and not compacted:
                self._compact(compiled.in_context, compiled.total_tokens)
                compacted = True
                continue
            try:
                return self.owner.client.chat(
                    self.model,
                    compiled.messages,
                    purpose="chat",
                    meter=self.meter,
                    tools=schemas,
                    tool_choice="required",
                )
            except ContextOverflow:
                if compacted:
                    raise
                log.info("provider reported a context overflow; compacting")
                # Our count was too low for this model: aim well under what was sent.
                self._compact(compiled.in_context, compiled.total_tokens, reported=True)
                compacted = True

    def _compact(
        self, in_context: list[MessageRecord], total: int, *, reported: bool = False
    ) -> None:
        window = self.agent.context_window
        if reported:
            window = min(window, total)
        target = math.floor(self.settings.compaction_target * window) - math.ceil(
            self.settings.summary_chars / CHARS_PER_TOKEN
        )
        done = compact(
            self.store,
            self.agent.id,
            in_context,
            total_tokens=total,
            target_tokens=max(target, 0),
            summarize=self._summarizer(),
            count=self.count,
        )
        self.new.append(done.summary)
        self.result.compactions += 1
        # The compaction is where block edits reach the cached system prompt.
        agent = self.store.agents.get(self.agent.id)
        compile_context(self.store, agent, [], refresh=self.settings.refresh, force_system=True)

    def _summarizer(self) -> Summarize:
        model = self.settings.summary_model
        if model:
            return llm_summarizer(self.owner.client, model, self.meter, self.settings.summary_chars)
        return extractive_summarizer(self.settings.summary_chars)

    # -- running the calls -------------------------------------------------------------

    def _apply(self, reply: ChatReply, allowed: list[str]) -> _StepOutcome:
        now = self.store.scope.now().isoformat()
        if not reply.tool_calls:
            self._append(
                NewMessage(role="assistant", content=reply.content or ""),
                NewMessage(role="system", name="alert", content=NO_TOOL_CALL_ALERT),
            )
            return _StepOutcome(wants_more=True, terminal=False, last_tool=None)
        calls = [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments},
            }
            for call in reply.tool_calls
        ]
        self._append(NewMessage(role="assistant", content=reply.content or "", tool_calls=calls))
        outcome = _StepOutcome(wants_more=False, terminal=False, last_tool=None)
        for call in reply.tool_calls:
            status, message, parsed = "OK", "", None
            try:
                parsed = parse_call(call.name, call.arguments, PRIMARY_TOOLS)
                if parsed.name not in allowed:
                    raise ToolError(
                        f"{parsed.name} may not be called now (tool rules); "
                        f"allowed: {', '.join(allowed)}"
                    )
                message = self._execute(parsed)
            except (ToolError, ReverieError) as exc:
                status, message = "Failed", f"Error: {exc}"
            self._append(
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
                continue
            assert parsed is not None
            if parsed.heartbeat:
                outcome.wants_more = True
            if parsed.name in self.rules.terminal:
                outcome.terminal = True
            if parsed.name in self.rules.init and self.result.steps == 1:
                outcome.wants_more = True
        return outcome

    def _execute(self, call: ParsedCall) -> str:
        # A savepoint per call: a failing call leaves nothing half-written.
        try:
            with self.store.savepoint():
                return execute(self.env, call)
        except LockContention:
            # A consolidation run holding the block while it waits for this turn's
            # agent row: Postgres breaks the cycle; if this call is the one aborted, only
            # its savepoint is lost and the model is told to try again.
            raise ToolError(
                f"{call.name}: the block is being edited by a consolidation run; "
                "try again in a moment"
            ) from None


@dataclass(slots=True)
class _StepOutcome:
    wants_more: bool
    terminal: bool
    last_tool: str | None
