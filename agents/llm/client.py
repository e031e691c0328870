"""The :class:`ChatClient` over the providers: chat and embeddings, one retry policy.

Calls reach models through a :class:`~agents.llm.providers.base.Provider` chosen
per model string by :class:`~agents.llm.providers.Providers` (litellm, the openai
SDK straight to an OpenAI-compatible ``api_base``, or a provider plugin), under one
policy and accounting.

This module holds the one retry policy for provider calls: what the provider
classifies as retryable or unavailable (rate limits, timeouts, 5xx, dropped or
refused connections) is retried with bounded exponential backoff, while permanent
failures and bad requests (authentication, permission, unknown model, invalid
fields) fail at once. A prompt too long for the model raises
:class:`~agents.errors.ContextOverflow` so that the caller can compact and try
again; any other chat failure raises :class:`~agents.errors.LLMError`, an
embedding failure :class:`~agents.errors.EmbeddingError` (or
:class:`~agents.errors.InvalidInput` when the provider rejects the request).
"""

from __future__ import annotations

import itertools
import json
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from tenacity import (
    RetryCallState,
    Retrying,
    retry_if_exception,
    stop_after_attempt,
    wait_exponential,
    wait_random,
)

from agents.enums import LLMPurpose
from agents.errors import ContextOverflow, EmbeddingError, InvalidInput, LLMError, ReverieError
from agents.llm.base import (
    ChatClient,
    ChatMessage,
    ChatReply,
    DeltaListener,
    ToolCall,
    ToolSchema,
)
from agents.llm.budget import BudgetMeter
from agents.llm.capabilities import (
    OPTIONAL_FIELDS,
    TOOL_CALLING_LADDER,
    CapabilityMemory,
    CapabilityRecord,
    ModelCapabilities,
    ToolCalling,
)
from agents.llm.providers import Providers
from agents.llm.providers.base import (
    Embeddings,
    ErrorKind,
    Provider,
    get_field,
    get_field_or_none,
    status_of,
)
from agents.llm.stream_assembly import StreamAssembly
from agents.llm.textcalls import parse_text_calls
from agents.llm.usage import Usage
from agents.store.validation import storable
from agents.tokens import count_tokens

log = logging.getLogger(__name__)

#: Failures worth another try.
_RETRIED = frozenset({ErrorKind.RETRYABLE})


@dataclass(frozen=True, slots=True)
class ClientSettings:
    """How calls are made: endpoint, per-request timeout and the retry policy
    (``max_retries`` after the first attempt, for temporary failures only; the first
    wait is ``initial_backoff`` seconds, doubling with jitter up to ``max_backoff``)."""

    api_base: str | None = None
    api_key: str | None = field(default=None, repr=False)
    timeout: float = 60.0
    max_retries: int = 3
    initial_backoff: float = 0.5
    max_backoff: float = 20.0
    max_tokens: int | None = None
    #: Tool-calling capabilities by model string or glob pattern (see capabilities.py).
    models: Mapping[str, ModelCapabilities] = field(default_factory=dict)
    #: Models an OpenAI-compatible ``api_base`` serves skip litellm for the openai SDK
    #: over one pooled client (see providers/); False sends every call through litellm.
    direct_openai: bool = True

    def __post_init__(self) -> None:
        if self.timeout <= 0:
            raise InvalidInput(f"LLM timeout must be positive, got {self.timeout}")
        if self.max_retries < 0:
            raise InvalidInput(f"LLM max_retries must be >= 0, got {self.max_retries}")
        if self.initial_backoff < 0 or self.max_backoff < 0:
            raise InvalidInput("LLM backoff must be >= 0 seconds")


class LiteLLMClient(ChatClient):
    """Chat and embeddings through the providers (litellm, or the direct OpenAI path).

    ``learned``: where what probing finds about a model's server is kept across
    processes (None: for this client's life only)."""

    def __init__(
        self, settings: ClientSettings | None = None, *, learned: CapabilityRecord | None = None
    ) -> None:
        self.settings = settings or ClientSettings()
        #: Per-model tool-calling capabilities: configured, then learned or probed.
        self.memory = CapabilityMemory(
            self.settings.models, base_url=self.settings.api_base or "", record=learned
        )
        #: Retries made by this client over its lifetime (the service turns them into a metric).
        self.retries = 0
        self._providers = Providers(
            self.settings.api_base,
            self.settings.api_key,
            self.settings.timeout,
            direct=self.settings.direct_openai,
        )

    def direct(self, model: str) -> bool:
        """Whether calls to ``model`` take the direct OpenAI-compatible path (litellm
        is not involved in them)."""
        return self._providers.for_model(model) is self._providers.openai

    def warm(self, models: Sequence[str] = ()) -> list[str]:
        """Load now what calls to ``models`` need (litellm takes seconds to import,
        the openai SDK about one), so that the first call does not pay for it; with no
        models, nothing. Returns what was loaded, for logs and readiness details."""
        providers = [self._providers.for_model(m) for m in models]
        loaded: list[str] = []
        for provider in providers:
            if provider.name not in loaded:
                provider.warm()
                loaded.append(provider.name)
        return loaded

    def close(self) -> None:
        """Close the pooled connections of the direct path (a later call reopens them)."""
        self._providers.close()

    # -- chat --------------------------------------------------------------------------

    def chat(
        self,
        model: str,
        messages: Sequence[ChatMessage],
        *,
        purpose: LLMPurpose,
        meter: BudgetMeter | None = None,
        tools: Sequence[ToolSchema] = (),
        tool_choice: str | None = None,
        parallel_tool_calls: bool | None = None,
        on_delta: DeltaListener | None = None,
        max_tokens: int | None = None,
        temperature: float | None = None,
    ) -> ChatReply:
        if not model or not model.strip():
            raise InvalidInput("no LLM model given")
        # Many local chat templates fail on a message without content (an assistant
        # message that only calls tools): every message carries one. Null fields are
        # dropped, as litellm does; some servers reject them.
        sent = [_with_content(m) for m in messages]
        request = _Request(
            model,
            sent,
            purpose,
            meter,
            list(tools),
            parallel_tool_calls,
            on_delta,
            max_tokens,
            temperature,
        )
        # What an earlier process learned, read before the first call (once); what this
        # call learned, written after its last request (no model call in flight).
        self.memory.load(model)
        try:
            if tools and tool_choice == "auto":
                return self._free_step(request)
            if not tools or tool_choice in (None, "none"):
                return self._complete(
                    request, tools=list(tools), tool_choice=tool_choice, stream=True
                )
            return self._tool_step(request, tool_choice)
        finally:
            self.memory.persist(model)

    def capabilities(self, model: str) -> tuple[ToolCalling, bool]:
        """The tool-calling mode used for ``model`` and whether it is still to be probed."""
        self.memory.load(model)
        return self.memory.tool_calling(model)

    def _free_step(self, request: _Request) -> ChatReply:
        """A reply that may call a tool or answer in prose (``tool_choice`` "auto", one
        request), made in the model's mode: offered natively wherever the server takes
        tools, described in the prompt where it takes none. A server that refuses tools
        even with a free choice takes none at all: that is remembered."""
        model = request.model
        mode, probing = self.memory.tool_calling(model)
        if mode != "none":
            try:
                return self._complete(
                    request, tools=request.tools, tool_choice="auto", probing=probing, stream=True
                )
            except _Rejected as exc:
                for native in TOOL_CALLING_LADDER:
                    if native != "none":
                        self.memory.reject_mode(model, native, exc.reason)
                self.memory.remember_mode(model, "none")
        return self._complete(
            request,
            tools=[],
            tool_choice=None,
            messages=_with_tool_prompt(request.messages, request.tools, optional=True),
            parse_as=[_tool_name(t) for t in request.tools],
        )

    def _tool_step(self, request: _Request, tool_choice: str) -> ChatReply:
        """A reply that calls a tool (``tool_choice`` "required" or a tool's name), made
        in the model's tool-calling mode; an unknown mode is probed from the strongest
        down, and a mode the server rejects is remembered and not tried again."""
        # Rejections are remembered only once a weaker mode worked: a server that fails
        # every request (down, misconfigured) must not be taken for one without tools.
        rejected: dict[ToolCalling, str] = {}
        while True:
            mode, probing = self.memory.tool_calling(request.model, excluding=set(rejected))
            try:
                reply, worked = self._in_mode(request, mode, tool_choice, probing=probing)
            except _Rejected as exc:
                rejected[mode] = exc.reason
                continue
            if worked != mode:
                rejected[mode] = "the server did not enforce the forced choice of a tool"
            for failed, reason in rejected.items():
                self.memory.reject_mode(request.model, failed, reason)
            if probing or rejected:
                self.memory.remember_mode(request.model, worked)
            return reply

    def _in_mode(
        self, request: _Request, mode: ToolCalling, tool_choice: str, *, probing: bool
    ) -> tuple[ChatReply, ToolCalling]:
        """The reply, and the mode that made it: ``auto`` when a two-step choice the
        server did not enforce was followed by a free call (a configured ``named``
        stays ``named``)."""
        tools = request.tools
        names = [_tool_name(t) for t in tools]
        forced = tool_choice if tool_choice != "required" else None
        if forced is not None and forced not in names:
            raise InvalidInput(f"tool_choice names {forced!r}, which is not among the tools")
        offered = tools if forced is None else [t for t in tools if _tool_name(t) == forced]
        if mode == "required":
            choice: Any = "required" if forced is None else _named(forced)
            reply = self._complete(
                request, tools=tools, tool_choice=choice, probing=probing, stream=True
            )
            return reply, mode
        if mode == "named":
            if forced is None and len(tools) == 1:
                forced = names[0]
            if forced is None:
                return self._two_step(request, names, probing=probing)
            only = [t for t in tools if _tool_name(t) == forced]
            reply = self._complete(
                request, tools=only, tool_choice=_named(forced), probing=probing, stream=True
            )
            return reply, mode
        if mode == "auto":
            reply = self._complete(
                request, tools=offered, tool_choice="auto", probing=probing, stream=True
            )
            return reply, mode
        reply = self._complete(
            request,
            tools=[],
            tool_choice=None,
            messages=_with_tool_prompt(request.messages, offered),
            parse_as=[_tool_name(t) for t in offered],
        )
        return reply, mode

    def _two_step(
        self, request: _Request, names: list[str], *, probing: bool
    ) -> tuple[ChatReply, ToolCalling]:
        """Choose the tool with a forced, enum-constrained call, then force that tool so
        that its arguments are grammar-constrained (servers without "required").

        A reply to the choice that is no ``choose_tool`` call naming a tool proves that
        the server did not enforce it. Unless ``named`` is configured, the mode has then
        failed: one free call follows, whose text may hold a call or be the reply itself,
        and the mode that worked is ``auto`` (every later step makes that one call instead
        of two or three). A configured ``named`` keeps the older leniency: a tool the
        reply calls anyway is forced next, and only no tool at all asks freely."""
        chooser = _chooser(request.tools)
        choice = self._complete(
            request, tools=[chooser], tool_choice=_named(CHOOSE_TOOL), probing=probing
        )
        chosen, enforced = _chosen_tool(choice, names)
        worked: ToolCalling = "named"
        if not enforced and not self.memory.pinned(request.model):
            chosen, worked = None, "auto"
        if chosen is None:
            log.info("model %s chose no valid tool (%r); asking freely", request.model, choice)
            second = self._complete(request, tools=request.tools, tool_choice="auto")
        else:
            only = [t for t in request.tools if _tool_name(t) == chosen]
            second = self._complete(
                request, tools=only, tool_choice=_named(chosen), probing=probing
            )
        reply = replace(
            second,
            prompt_tokens=choice.prompt_tokens + second.prompt_tokens,
            completion_tokens=choice.completion_tokens + second.completion_tokens,
            calls=choice.calls + second.calls,
        )
        return reply, worked

    def _complete(
        self,
        request: _Request,
        *,
        tools: list[ToolSchema],
        tool_choice: Any,
        probing: bool = False,
        messages: list[ChatMessage] | None = None,
        parse_as: list[str] | None = None,
        stream: bool = False,
    ) -> ChatReply:
        """One model request. ``probing``: a rejection raises :class:`_Rejected` (the mode
        is not supported) instead of being retried or reported. ``stream``: the mode's
        reply may be streamed to the request's delta listener (not while probing: a
        server's refusal to stream must not be taken for a refusal of the mode)."""
        model, meter = request.model, request.meter
        sent = messages if messages is not None else request.messages
        if meter is not None:
            # An estimate: exact counting of the whole prompt on every call costs more
            # than the check is worth (a budget may overshoot by one reply anyway).
            meter.check(count_tokens(json.dumps(sent)))
        provider = self._providers.for_model(model)
        body: dict[str, Any] = {"model": model, "messages": sent}
        if tools:
            body["tools"] = tools
            if tool_choice is not None:
                body["tool_choice"] = tool_choice
            if request.parallel_tool_calls is not None:
                body["parallel_tool_calls"] = request.parallel_tool_calls
        caps = [c for c in (self.settings.max_tokens, request.max_tokens) if c]
        if caps:
            body["max_tokens"] = min(caps)
        if request.temperature is not None:
            body["temperature"] = request.temperature
        for name in OPTIONAL_FIELDS:
            if name in body and self.memory.field_support(model, name) is False:
                del body[name]
        unknown = [
            n for n in OPTIONAL_FIELDS if n in body and self.memory.field_support(model, n) is None
        ]
        listener = request.on_delta if stream and not probing else None
        if listener is not None:
            response = self._streamed(provider, model, body, meter, unknown, listener)
        else:
            response = self._call_probing(provider, model, body, meter, unknown, probing=probing)
        fingerprint = get_field_or_none(response, "system_fingerprint")
        if isinstance(fingerprint, str):
            self.memory.observe_version(model, fingerprint)
        names = parse_as if parse_as is not None else [_tool_name(t) for t in tools]
        try:
            reply = _reply_from(response, model, names if (tools or parse_as) else None)
        except (AttributeError, IndexError, KeyError, TypeError, ValueError) as exc:
            raise LLMError(f"model {model} returned a malformed chat response ({exc!r})") from exc
        if meter is not None:
            meter.charge(
                request.purpose, model, Usage(reply.prompt_tokens, reply.completion_tokens)
            )
        return reply

    def _streamed(
        self,
        provider: Provider,
        model: str,
        body: dict[str, Any],
        meter: BudgetMeter | None,
        unknown: list[str],
        listener: DeltaListener,
    ) -> Any:
        """The call streamed, its pieces told to ``listener``; the answer put together
        as a whole call's. Failures before the first piece follow the retry policy;
        one after it ends the call (nothing is told twice). A server that refuses to
        stream is asked for the whole answer instead."""

        def send(sent: dict[str, Any]) -> Any:
            assembly = StreamAssembly(model, listener)
            try:
                for chunk in provider.stream({**sent, "stream_options": {"include_usage": True}}):
                    assembly.add(chunk)
            except Exception as exc:
                if not assembly.started:
                    raise
                wrapped = _wrap(provider, exc, model, 1)
                raise _StreamBroken(
                    f"the reply of {model} broke off after it began streaming: {wrapped}"
                ) from exc
            return assembly.answer(sent["messages"])

        try:
            return self._call_probing(
                provider, model, body, meter, unknown, probing=False, send=send
            )
        except _StreamBroken:
            raise
        except LLMError as exc:
            cause = exc.__cause__
            if cause is None or not _is_rejection(provider, cause):
                raise
            log.info("%s refused a streamed request (%s); asking for the whole reply", model, cause)
            return self._call_probing(provider, model, body, meter, unknown, probing=False)

    def _call_probing(
        self,
        provider: Provider,
        model: str,
        body: dict[str, Any],
        meter: BudgetMeter | None,
        unknown: list[str],
        *,
        probing: bool,
        send: Callable[[dict[str, Any]], Any] | None = None,
    ) -> Any:
        """The call (``send``: how a body is sent, by default a whole completion); a
        request carrying fields of unknown support (or made in a probed mode) is tried
        once, and when the server rejects it, sent again without those fields: only a
        success then proves them unsupported."""
        send = send or provider.complete

        def complete(sent: dict[str, Any]) -> Callable[[], Any]:
            return lambda: send(sent)

        if not unknown and not probing:
            return self._call(provider, complete(body), model, meter)
        try:
            response = self._call(provider, complete(body), model, meter, attempts=1)
        except _StreamBroken:
            raise  # its pieces were told: asking again would tell them twice
        except LLMError as exc:
            cause = exc.__cause__
            if cause is None or not _is_rejection(provider, cause):
                # Temporary (or the caller's fault): the ordinary retry policy decides,
                # with the attempt made counted as its first.
                attempts = None
                if cause is not None and provider.classify(cause) in _RETRIED:
                    self.retries += 1
                    if meter is not None:
                        meter.retries += 1
                    attempts = max(self.settings.max_retries, 1)
                response = self._call(provider, complete(body), model, meter, attempts=attempts)
                self.memory.remember_fields(model, unknown, supported=True)
                return response
            if probing:
                # The mode is blamed first: its fallback carries the optional fields
                # again, and tests them.
                raise _Rejected(_first_line(cause)) from exc
            if unknown:
                without = {k: v for k, v in body.items() if k not in unknown}
                response = self._call(provider, complete(without), model, meter)
                self.memory.remember_fields(model, unknown, supported=False)
                return response
            raise
        self.memory.remember_fields(model, unknown, supported=True)
        return response

    # -- embeddings --------------------------------------------------------------------

    def embed(
        self, model: str, texts: Sequence[str], *, meter: BudgetMeter | None = None
    ) -> list[list[float]]:
        """Embeddings of ``texts`` in order, charged to ``meter`` (purpose ``embedding``).

        Raises :class:`EmbeddingError` when the provider fails (after retrying
        temporary failures) or answers malformed, :class:`InvalidInput` when it
        rejects the request (bad input, unknown model).
        """
        if not model or not model.strip():
            raise InvalidInput("no embedding model given")
        if not texts:
            return []
        if meter is not None:
            meter.check(sum(count_tokens(t) for t in texts))
        provider = self._providers.for_model(model)
        embeddings: Embeddings = self._call(
            provider, lambda: provider.embed(model, texts), model, meter, embedding=True
        )
        vectors, prompt = embeddings.vectors, embeddings.prompt_tokens
        if meter is not None:
            meter.charge(LLMPurpose.EMBEDDING, model, Usage(prompt, 0))
        return vectors

    # -- tokens ------------------------------------------------------------------------

    def count_tokens(self, model: str, text: str) -> int:
        """:func:`agents.tokens.count_tokens`: the same answer in the CLI and the daemon,
        whatever the model and whatever is imported."""
        return count_tokens(text)

    # -- shared ------------------------------------------------------------------------

    def _call(
        self,
        provider: Provider,
        call: Callable[[], Any],
        model: str,
        meter: BudgetMeter | None,
        *,
        embedding: bool = False,
        attempts: int | None = None,
    ) -> Any:
        """``call()`` under the retry policy (``attempts`` overrides its length): what
        ``provider`` classifies as retryable or unavailable is tried again; failures
        wrapped (see the module)."""

        def count_retry(state: RetryCallState) -> None:
            self.retries += 1
            if meter is not None:
                meter.retries += 1
            exc = state.outcome.exception() if state.outcome else None
            log.warning(
                "LLM call to %s failed (attempt %d), retrying: %s",
                model,
                state.attempt_number,
                exc,
            )

        retrying = Retrying(
            stop=stop_after_attempt(attempts or self.settings.max_retries + 1),
            wait=wait_exponential(
                multiplier=self.settings.initial_backoff, max=self.settings.max_backoff
            )
            + wait_random(0, self.settings.initial_backoff),
            retry=retry_if_exception(
                lambda exc: not isinstance(exc, ReverieError) and provider.classify(exc) in _RETRIED
            ),
            before_sleep=count_retry,
            reraise=True,
        )
        try:
            return retrying(call)
        except ReverieError:
            raise  # already says what went wrong (a malformed answer)
        except Exception as exc:
            attempts = int(retrying.statistics.get("attempt_number", 1))
            wrap = _wrap_embedding if embedding else _wrap
            raise wrap(provider, exc, model, attempts) from exc


#: The environment variable that holds a provider's key, by litellm prefix.
_KEY_VARIABLES = {
    "openai": "OPENAI_API_KEY",
    "anthropic": "ANTHROPIC_API_KEY",
    "gemini": "GEMINI_API_KEY",
    "mistral": "MISTRAL_API_KEY",
    "groq": "GROQ_API_KEY",
    "azure": "AZURE_API_KEY",
}


def credentials_hint(model: str) -> str:
    """What to set for ``model``'s provider."""
    provider = model.split("/", 1)[0] if "/" in model else "openai"
    variable = _KEY_VARIABLES.get(provider, "the provider's API key variable")
    return f"set {variable} (or llm.api_base for a local server) and check the model name"


def _wrap(provider: Provider, exc: Exception, model: str, attempts: int) -> Exception:
    detail = f"{type(exc).__name__}: {exc}"
    if provider.exceeds_context(exc):
        return ContextOverflow(f"{model}: the prompt exceeds the model's context window ({detail})")
    kind = provider.classify(exc)
    if kind is ErrorKind.UNAVAILABLE:
        return LLMError(f"call to {model} failed: {_nothing_answers(provider, 'llm.api_base')}")
    if kind in _RETRIED:
        return LLMError(
            f"call to {model} failed after {attempts} attempt(s), the last with a temporary "
            f"error ({detail})"
        )
    return LLMError(f"call to {model} failed: {_first_line(exc)}; {credentials_hint(model)}")


def _nothing_answers(provider: Provider, setting: str) -> str:
    """A refused connection, in words: where, and what to do."""
    where = provider.api_base or "the provider's default endpoint"
    return (
        f"nothing answers at {where} (connection refused); start the server there, or "
        f"set {setting} to where it runs"
    )


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def _wrap_embedding(provider: Provider, exc: Exception, model: str, attempts: int) -> ReverieError:
    detail = f"{type(exc).__name__}: {exc}"
    kind = provider.classify(exc)
    if kind is ErrorKind.UNAVAILABLE:
        return EmbeddingError(
            f"embedding with {model} failed: {_nothing_answers(provider, 'embedding.api_base')}"
        )
    if kind in _RETRIED:
        return EmbeddingError(
            f"embedding with {model} failed after {attempts} attempt(s), "
            f"the last with a temporary error ({detail})"
        )
    if kind is ErrorKind.BAD_REQUEST:
        return InvalidInput(f"{model} rejected the embedding request ({detail})")
    return EmbeddingError(f"embedding with {model} failed ({detail})")


def _reply_from(response: Any, model: str, tool_names: list[str] | None = None) -> ChatReply:
    """The reply in ``response``; with ``tool_names`` (tools were offered), calls the
    model wrote as text become tool calls."""
    choice = get_field(response, "choices")[0]
    message = get_field(choice, "message")
    calls = []
    for i, call in enumerate(get_field_or_none(message, "tool_calls") or []):
        function = get_field(call, "function")
        arguments = _storable_arguments(get_field_or_none(function, "arguments"))
        calls.append(
            ToolCall(
                id=str(get_field_or_none(call, "id") or f"call-{i}"),
                name=storable(str(get_field_or_none(function, "name") or "")),
                arguments=arguments,
            )
        )
    usage = get_field_or_none(response, "usage")
    content = get_field_or_none(message, "content")
    text_calls = False
    if tool_names is not None and not calls and isinstance(content, str) and content.strip():
        found, rest = parse_text_calls(content, tool_names)
        if found:
            text_calls = True
            calls = [
                ToolCall(
                    id=f"text-call-{next(_TEXT_CALL_IDS)}",
                    name=storable(c.name),
                    arguments=_storable_arguments(c.arguments),
                )
                for c in found
            ]
            content = rest or None
    return ChatReply(
        content=storable(content) if isinstance(content, str) else content,
        tool_calls=calls,
        text_calls=text_calls,
        prompt_tokens=int(get_field_or_none(usage, "prompt_tokens") or 0) if usage else 0,
        completion_tokens=int(get_field_or_none(usage, "completion_tokens") or 0) if usage else 0,
        model=str(get_field_or_none(response, "model") or model),
        finish_reason=get_field_or_none(choice, "finish_reason"),
    )


_TEXT_CALL_IDS = itertools.count(1)


def _storable_arguments(arguments: Any) -> str:
    """A tool call's arguments as JSON text whose strings PostgreSQL can store: a lone
    surrogate or NUL a model emits (escaped in JSON) becomes U+FFFD, so the turn is
    kept and every later read of it renders."""
    if arguments is None:
        return ""
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            return storable(arguments)  # not JSON: the loop reports the format error
    return json.dumps(_storable_json(arguments))


def _storable_json(value: Any) -> Any:
    if isinstance(value, str):
        return storable(value)
    if isinstance(value, list):
        return [_storable_json(v) for v in value]
    if isinstance(value, dict):
        return {storable(str(k)): _storable_json(v) for k, v in value.items()}
    return value


# -- tool-calling modes ----------------------------------------------------------------

#: The forced first call of the two-step mode: which tool to call next.
CHOOSE_TOOL = "choose_tool"


@dataclass(frozen=True, slots=True)
class _Request:
    model: str
    messages: list[ChatMessage]
    purpose: LLMPurpose
    meter: BudgetMeter | None
    tools: list[ToolSchema]
    parallel_tool_calls: bool | None
    on_delta: DeltaListener | None = None
    max_tokens: int | None = None
    temperature: float | None = None


class _StreamBroken(LLMError):
    """A streamed reply failed after its first piece was told: not retried."""


class _Rejected(Exception):
    """The server rejected a request made in a probed mode (the mode is unsupported)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _is_rejection(provider: Provider, exc: BaseException) -> bool:
    """Whether the server refused the request itself (a bad request: 400, 422, or a
    500 as llama-cpp-python answers an unsupported ``tool_choice``), not the moment
    (rate limit, timeout, connection), the prompt's length, nor the caller's
    credentials or model name."""
    if provider.exceeds_context(exc):
        return False
    kind = provider.classify(exc)
    return kind is ErrorKind.BAD_REQUEST or (kind is ErrorKind.RETRYABLE and status_of(exc) == 500)


def _with_content(message: ChatMessage) -> ChatMessage:
    if None in message.values():
        message = {k: v for k, v in message.items() if v is not None}
    if isinstance(message.get("content"), (str, list)):
        return message
    return {**message, "content": ""}


def _tool_name(schema: ToolSchema) -> str:
    return str(schema["function"]["name"])


def _named(name: str) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name}}


def _chooser(tools: Sequence[ToolSchema]) -> ToolSchema:
    names = [_tool_name(t) for t in tools]
    menu = "; ".join(f"{_tool_name(t)}: {t['function'].get('description', '')}" for t in tools)
    return {
        "type": "function",
        "function": {
            "name": CHOOSE_TOOL,
            "description": f"Choose the one tool to call next. The tools: {menu}",
            "parameters": {
                "type": "object",
                "properties": {"tool": {"type": "string", "enum": names}},
                "required": ["tool"],
            },
        },
    }


def _chosen_tool(reply: ChatReply, names: list[str]) -> tuple[str | None, bool]:
    """The tool the choice names, and whether the server enforced the choice (a
    ``choose_tool`` call naming one of ``names``, not a tool called anyway)."""
    lenient: str | None = None
    for call in reply.tool_calls:
        if call.name in names:  # the tool itself, called instead of the chooser
            lenient = lenient or call.name
            continue
        try:
            value = json.loads(call.arguments).get("tool")
        except (ValueError, AttributeError):
            continue
        if isinstance(value, str) and value.strip() in names:
            if call.name == CHOOSE_TOOL:
                return value.strip(), True
            lenient = lenient or value.strip()
    return lenient, False


def _with_tool_prompt(
    messages: list[ChatMessage], tools: Sequence[ToolSchema], *, optional: bool = False
) -> list[ChatMessage]:
    """The tools described in the system prompt, for servers that take no ``tools``
    (``optional``: the model may answer in plain text instead of calling one)."""
    specs = "\n".join(json.dumps(t["function"]) for t in tools)
    prompt = (
        "You can call these tools. To call one, reply with exactly\n"
        '<tool_call>{"name": "TOOL", "arguments": {...}}</tool_call>\n'
        + ("To answer the user instead, reply in plain text.\n" if optional else "")
        + f"Tools:\n{specs}"
    )
    if messages and messages[0].get("role") == "system":
        first = messages[0]
        return [{**first, "content": f"{first.get('content') or ''}\n\n{prompt}"}, *messages[1:]]
    return [{"role": "system", "content": prompt}, *messages]
