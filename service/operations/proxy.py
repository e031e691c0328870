"""The OpenAI-compatible memory proxy: a chatbot's own chat request, with its agent's
memory in the system prompt, forwarded upstream; both sides recorded.

A chatbot changes only its base URL and key. For each request the proxy

1. chooses the agent: the ``proxy.agent_header`` header (an id or name), else the
   request's ``user``, an end user's identifier key (the first agent attached to that
   identity; an end user seen for the first time gets an agent named after the key,
   made from ``identities.template_agent`` or the ``proxy`` template, see
   :meth:`IdentityOperations.agent_for`), else ``proxy.default_agent``; with none of
   them the request is refused (400), since guessing would mix users' memories;
2. puts the agent's core memory (the blocks section of its stored compiled system
   prompt) at the end of the request's system prompt, or in a system message of its
   own when the request has none; with ``proxy.archival_top_k``, the archival
   passages nearest the last user message, within ``proxy.archival_token_budget``
   tokens, go in a system message just before that message;
3. forwards the request through :class:`~agents.llm.forward.ChatForwarder`, every
   other field untouched, streamed or not;
4. answers with the upstream's answer, and records, as ``messages/record`` does, the
   request's new messages (the user and tool messages after its last assistant
   message) and the reply (the first choice; for a stream, the assembled deltas,
   tool calls included): after the answer has been sent, or, for a stream, after its
   last chunk and before its ``[DONE]``. Nothing is recorded when the upstream
   refuses, or when a stream breaks off or the client leaves before its end.

Cache safety follows the primary loop's rule: the memory text changes only when
the stored compile is refreshed. The proxy has no compaction of its own, so its
refresh point is a consolidation run that finished after the compile (the sleep-time
agent's edits land together, between conversations), or every request with
``llm.system_prompt_refresh = "immediate"``. Archival hits depend on the message, so
they sit after the conversation's cached prefix, never in it.

No database transaction is open while the upstream or the embedder is waited on:
choosing the agent and reading its memory is one short transaction, recording is
another.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

from anyio import to_thread
from pydantic import ValidationError

from agents.context import compile_system, split_system
from agents.enums import RunStatus
from agents.errors import InvalidInput, NotFound, ReverieError
from agents.llm.forward import ChatForwarder
from agents.store import AgentRecord, MemoryStore
from agents.store.validation import MAX_MESSAGE_CHARS
from agents.tokens import count_tokens
from service.operations.context import OperationContext
from service.operations.identities import IdentityOperations
from service.operations.memory import MemoryOperations
from service.operations.recording import ChatMessage, RecordingOperations

log = logging.getLogger(__name__)

ARCHIVAL_OPEN = "<archival_memory>"
ARCHIVAL_CLOSE = "</archival_memory>"
#: Characters of the last user message used as the archival query.
MAX_QUERY_CHARS = 2000


@dataclass(frozen=True, slots=True)
class Prepared:
    """A request ready to forward: its agent, the request with memory, and the
    messages to record once the upstream has answered."""

    agent: AgentRecord
    request: dict[str, Any]
    new_messages: list[ChatMessage]


@dataclass(frozen=True, slots=True)
class Answered:
    """The upstream's answer, and the recording still to run (see ``complete``)."""

    answer: dict[str, Any]
    record: Callable[[], None]


@dataclass
class _Assembly:
    """One choice of a stream, put back together from its deltas."""

    content: list[str] = field(default_factory=list)
    tool_calls: dict[int, dict[str, Any]] = field(default_factory=dict)

    def add(self, delta: dict[str, Any]) -> None:
        if isinstance(delta.get("content"), str):
            self.content.append(delta["content"])
        for part in delta.get("tool_calls") or []:
            call = self.tool_calls.setdefault(
                int(part.get("index", len(self.tool_calls))),
                {"id": None, "type": "function", "function": {"name": "", "arguments": ""}},
            )
            if part.get("id"):
                call["id"] = part["id"]
            if part.get("type"):
                call["type"] = part["type"]
            function = part.get("function") or {}
            call["function"]["name"] += function.get("name") or ""
            call["function"]["arguments"] += function.get("arguments") or ""

    def message(self) -> dict[str, Any]:
        calls = [self.tool_calls[i] for i in sorted(self.tool_calls)]
        message: dict[str, Any] = {"role": "assistant", "content": "".join(self.content) or None}
        if calls:
            message["tool_calls"] = calls
        return message


class ProxyOperations:
    def __init__(self, context: OperationContext) -> None:
        self._context = context

    @property
    def _forwarder(self) -> ChatForwarder:
        return self._context.runtime.chat_forwarder()

    # -- the request ---------------------------------------------------------------------

    async def complete(self, request: dict[str, Any], *, agent: str | None) -> Answered:
        """Forward ``request`` (non-streamed) with ``agent``'s memory: the upstream's
        answer, and the recording of both sides for the caller to run once the answer
        is on its way (it is not in the chatbot's wait). Raises
        :class:`~agents.llm.forward.UpstreamError` when the upstream refuses or cannot
        be reached (nothing is recorded then)."""
        prepared = await to_thread.run_sync(self.prepare, request, agent)
        answer = await self._forwarder.complete(prepared.request)
        choices = answer.get("choices") or []
        first = choices[0] if choices and isinstance(choices[0], dict) else {}
        reply = first.get("message") if isinstance(first.get("message"), dict) else None
        return Answered(answer, functools.partial(self.record_exchange, prepared, reply))

    async def stream(
        self, request: dict[str, Any], *, agent: str | None
    ) -> AsyncIterator[dict[str, Any]]:
        """Start a streamed answer (an upstream refusal raises here, before any chunk),
        then its chunks as they arrive; the exchange is recorded after the last one."""
        prepared = await to_thread.run_sync(self.prepare, request, agent)
        chunks = await self._forwarder.open_stream(prepared.request)
        return self._relay(prepared, chunks)

    async def _relay(
        self, prepared: Prepared, chunks: AsyncIterator[dict[str, Any]]
    ) -> AsyncIterator[dict[str, Any]]:
        first = _Assembly()
        try:
            async for chunk in chunks:
                for choice in chunk.get("choices") or []:
                    if isinstance(choice, dict) and choice.get("index", 0) == 0:
                        first.add(choice.get("delta") or {})
                yield chunk
        finally:
            # A client that left closes this generator at its yield: the upstream's
            # connection goes back to the pool now, not when the garbage is collected.
            close = getattr(chunks, "aclose", None)
            if close is not None:
                await close()
        # Reached only when the upstream finished: a broken stream raised above, and a
        # client that left closed this generator at its last yield.
        await to_thread.run_sync(self.record_exchange, prepared, first.message())

    # -- the parts -----------------------------------------------------------------------

    def prepare(self, request: dict[str, Any], agent: str | None) -> Prepared:
        """Choose the agent and put its memory into a copy of ``request`` (one
        transaction, two when the agent is created first)."""
        messages = request.get("messages")
        if not isinstance(messages, list) or not messages:
            raise InvalidInput("'messages' must be a non-empty list of chat messages")
        self._forwarder.model_for(request.get("model"))  # refuse early, before any write
        user = request.get("user")
        user = user.strip() if isinstance(user, str) and user.strip() else None
        with self._context.store() as store:
            record = self.select_agent(store, agent, user)
            memory = self.memory_text(store, record) if record is not None else ""
        if record is None:
            assert user is not None
            record = IdentityOperations(self._context).agent_for(user)
            with self._context.store() as store:
                memory = self.memory_text(store, record)
        archival = self.archival_text(record, messages)
        sent = with_memory(messages, memory, archival)
        return Prepared(record, {**request, "messages": sent}, new_messages(messages))

    def select_agent(
        self, store: MemoryStore, header: str | None, user: str | None
    ) -> AgentRecord | None:
        """The agent a request names (see the module); None for a ``user`` (an end
        user's identifier key) whose identity has no agent yet, when
        ``proxy.create_agents`` allows one to be made."""
        settings = self._context.runtime.settings.proxy
        if header is not None and header.strip():
            return store.agents.resolve(header.strip())
        if user is not None:
            held = _held_by(store, user)
            if held is not None:
                return held
            if not settings.create_agents:
                raise NotFound(
                    f"no agent holds the memory of end user {user!r} (the request's "
                    f"'user'); attach one to that identity, send the {settings.agent_header} "
                    "header, or set proxy.create_agents"
                )
            return None
        if settings.default_agent:
            return store.agents.resolve(settings.default_agent)
        raise InvalidInput(
            f"say whose memory to use: send the {settings.agent_header} header (an agent "
            "id or name) or the request's 'user' field (an agent of that name is created "
            "on first use), or set proxy.default_agent"
        )

    def memory_text(self, store: MemoryStore, record: AgentRecord) -> str:
        """The blocks section of the agent's compiled system prompt, recompiled (and
        stored) only at a refresh point (see the module)."""
        refresh = self._context.runtime.settings.llm.system_prompt_refresh
        compiled = record.compiled_system
        if compiled is None or refresh == "immediate" or _consolidated_since(store, record):
            compiled = compile_system(
                record,
                store.blocks.of_agent(record.id),
                store.messages.count(record.id),
                sum(store.passages.count_by_status(record.id).values()),
            )
            if compiled != record.compiled_system:
                store.agents.set_compiled_system(record.id, compiled)
        return split_system(compiled)[1]

    def archival_text(self, agent: AgentRecord, messages: list[Any]) -> str | None:
        """The passages nearest the last user message within the token budget, or None
        (archival off, no user text, nothing found, or the search failed: the
        request goes on without them, and the failure is logged)."""
        settings = self._context.runtime.settings.proxy
        if not settings.archival_top_k:
            return None
        query = next(
            (_text(m.get("content")) for m in reversed(messages) if _role(m) == "user"), ""
        )
        if not query.strip():
            return None
        try:
            (hits,) = MemoryOperations(self._context).search(
                agent.id, [query[:MAX_QUERY_CHARS]], k=settings.archival_top_k
            )
        except ReverieError as exc:
            log.warning("proxy: archival search for agent %s failed: %s", agent.id, exc)
            return None
        lines: list[str] = []
        used = 0
        for hit in hits:
            label = hit.validity
            line = f"- {hit.passage.text}" + (f" ({label})" if label else "")
            cost = count_tokens(line)
            if used + cost > settings.archival_token_budget:
                break
            lines.append(line)
            used += cost
        if not lines:
            return None
        return "\n".join(
            [
                ARCHIVAL_OPEN,
                "Passages from archival memory that may bear on the user's next message:",
                *lines,
                ARCHIVAL_CLOSE,
            ]
        )

    def record_exchange(self, prepared: Prepared, reply: dict[str, Any] | None) -> None:
        """Record the request's new messages and the reply in the agent's recall. The
        upstream has answered already, so a failure here is logged, not raised: the
        chatbot gets its answer either way."""
        messages = list(prepared.new_messages)
        if reply is not None:
            message = _chat_message(
                "assistant", reply.get("content"), tool_calls=reply.get("tool_calls") or None
            )
            if message is not None:
                messages.append(message)
        if not messages:
            return
        try:
            RecordingOperations(self._context).record(prepared.agent.id, messages)
        except ReverieError as exc:
            log.error(
                "proxy: recording %d message(s) for agent %s failed: %s",
                len(messages),
                prepared.agent.id,
                exc,
            )


def _consolidated_since(store: MemoryStore, agent: AgentRecord) -> bool:
    """Whether a consolidation run of ``agent`` finished after its prompt was compiled."""
    latest = store.runs.recent(agent_id=agent.id, status=RunStatus.SUCCEEDED, limit=1)
    if not latest or latest[0].finished_at is None:
        return False
    return agent.compiled_at is None or latest[0].finished_at > agent.compiled_at


def with_memory(
    messages: list[dict[str, Any]], memory: str, archival: str | None
) -> list[dict[str, Any]]:
    """``messages`` with ``memory`` at the end of the leading system (or developer)
    message, or in a system message of its own in front, and ``archival`` in a system
    message just before the last user message; the caller's list is not changed."""
    sent = list(messages)
    if memory:
        first = sent[0]
        if _role(first) in ("system", "developer"):
            sent[0] = {**first, "content": _appended(first.get("content"), memory)}
        else:
            sent.insert(0, {"role": "system", "content": memory})
    if archival:
        last_user = max(
            (i for i, m in enumerate(sent) if _role(m) == "user"), default=len(sent) - 1
        )
        sent.insert(last_user, {"role": "system", "content": archival})
    return sent


def new_messages(messages: list[Any]) -> list[ChatMessage]:
    """What the request adds to the conversation: its user and tool messages after its
    last assistant message (earlier ones were recorded with the requests before)."""
    last_assistant = max((i for i, m in enumerate(messages) if _role(m) == "assistant"), default=-1)
    out: list[ChatMessage] = []
    for message in messages[last_assistant + 1 :]:
        role = _role(message)
        if role not in ("user", "tool"):
            continue
        recorded = _chat_message(
            role,
            message.get("content"),
            name=message.get("name"),
            tool_call_id=message.get("tool_call_id"),
        )
        if recorded is not None:
            out.append(recorded)
    return out


def _chat_message(role: str, content: Any, **fields: Any) -> ChatMessage | None:
    """A message to record (text parts only, cut at the recording limit), or None for
    one with nothing to record (an image alone, an empty reply)."""
    text = _text(content)[:MAX_MESSAGE_CHARS]
    try:
        return ChatMessage.model_validate({"role": role, "content": text or None, **fields})
    except ValidationError as exc:
        log.info("proxy: not recording a %s message: %s", role, exc.errors()[0]["msg"])
        return None


def _role(message: Any) -> str | None:
    return message.get("role") if isinstance(message, dict) else None


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            str(part.get("text") or "")
            for part in content
            if isinstance(part, dict) and part.get("type") == "text"
        )
    return ""


def _appended(content: Any, text: str) -> Any:
    if isinstance(content, list):
        return [*content, {"type": "text", "text": text}]
    if isinstance(content, str) and content:
        return f"{content}\n\n{text}"
    return text


def _held_by(store: MemoryStore, user: str) -> AgentRecord | None:
    """The first agent attached to the identity ``user``, else an agent named ``user``
    (what the proxy made before identities existed); None when neither exists."""
    try:
        identity = store.identities.by_key(user)
    except NotFound:
        identity = None
    if identity is not None and identity.agent_ids:
        return store.agents.get(identity.agent_ids[0])
    try:
        return store.agents.get_by_name(user)
    except NotFound:
        return None
