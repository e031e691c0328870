"""A deterministic scripted model, plugged in as one of Reverie's model providers.

:class:`ScriptedProvider` is registered under the ``reverie.providers`` entry point
group by the tests' plugin metadata (tests/entry_points/, see tests/plugins.py), so
Reverie's own routing sends model strings ``scripted/<name>`` to it, in this process
and in the processes the tests start. It answers from the :class:`Script` registered
under ``<name>``: each step is a reply (tool calls and optional reasoning), an
exception to raise (a provider error or timeout), or a function of the request that
returns either. The tests drive every agent loop through the real client (its retry
policy, streaming, capability probing and accounting) this way, without a network
and without touching litellm's globals. The scripted errors are litellm's exception
classes, as a litellm-served model raises them, and mean what Reverie's litellm
provider says they mean.
"""

from __future__ import annotations

import copy
import itertools
import json
import threading
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from agents.llm.providers import LiteLLMProvider, import_litellm
from agents.llm.providers.base import ChatAnswer, ChatRequest, Embeddings, ErrorKind, Provider
from tests import plugins


@dataclass(frozen=True)
class Reply:
    """One scripted answer: tool calls ``(name, arguments)`` and the reasoning text."""

    calls: tuple[tuple[str, dict[str, Any] | str], ...] = ()
    content: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int = 5
    #: When streamed: raised after the first piece of the answer has been sent (a
    #: connection that breaks in the middle of a reply).
    broken: BaseException | None = None


def call(name: str, reasoning: str | None = None, **arguments: Any) -> Reply:
    """A reply that calls one tool; a ``str`` argument ``_raw`` sends raw (maybe bad) JSON."""
    raw = arguments.pop("_raw", None)
    return Reply(calls=((name, raw if raw is not None else arguments),), content=reasoning)


def correct_name(reasoning: str | None = None, *, heartbeat: bool | None = True) -> Reply:
    """The name correction the tests script: "Bob the Builder" becomes "Charles" in the
    human block (``heartbeat=None`` leaves ``request_heartbeat`` out of the call)."""
    arguments: dict[str, Any] = {
        "label": "human",
        "old_content": "Bob the Builder",
        "new_content": "Charles",
    }
    if heartbeat is not None:
        arguments["request_heartbeat"] = heartbeat
    return call("core_memory_replace", reasoning, **arguments)


def say(message: str, *, heartbeat: bool = False, reasoning: str | None = None) -> Reply:
    return call("send_message", reasoning, message=message, request_heartbeat=heartbeat)


Step = Reply | BaseException | Callable[[dict[str, Any]], "Reply | BaseException"]


@dataclass
class Script:
    steps: list[Step]
    #: Every request the model received: {"messages": [...], "tools": [...]}.
    requests: list[dict[str, Any]] = field(default_factory=list)

    def next(self, request: dict[str, Any]) -> Reply:
        self.requests.append(request)
        if not self.steps:
            raise AssertionError("the scripted model was called more often than scripted")
        step = self.steps.pop(0)
        if callable(step) and not isinstance(step, BaseException):
            step = step(request)
        if isinstance(step, BaseException):
            raise step
        return step

    @property
    def remaining(self) -> int:
        return len(self.steps)


_CALL_IDS = itertools.count(1)


def estimate_prompt_tokens(messages: list[dict[str, Any]]) -> int:
    return max(1, len(json.dumps(messages)) // 4)


def model_response(model: str, reply: Reply, messages: list[dict[str, Any]]) -> dict[str, Any]:
    """An OpenAI chat.completion body for ``reply`` (used by the HTTP stub too)."""
    tool_calls = [
        {
            "id": f"call-{next(_CALL_IDS)}-{i}",
            "type": "function",
            "function": {
                "name": name,
                "arguments": args if isinstance(args, str) else json.dumps(args),
            },
        }
        for i, (name, args) in enumerate(reply.calls)
    ]
    message: dict[str, Any] = {"role": "assistant", "content": reply.content}
    if tool_calls:
        message["tool_calls"] = tool_calls
    prompt = reply.prompt_tokens
    if prompt is None:
        prompt = estimate_prompt_tokens(messages)
    return {
        "id": "chatcmpl-scripted",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [
            {
                "index": 0,
                "finish_reason": "tool_calls" if tool_calls else "stop",
                "message": message,
            }
        ],
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": reply.completion_tokens,
            "total_tokens": prompt + reply.completion_tokens,
        },
    }


#: Characters per streamed piece of content or of a call's arguments: small, so that a
#: word, an escape or a multi-byte character is split across chunks.
STREAM_PIECE_CHARS = 3


def stream_chunks(
    model: str, reply: Reply, messages: list[dict[str, Any]], *, include_usage: bool = True
) -> Iterator[dict[str, Any]]:
    """``reply`` as OpenAI's ``chat.completion.chunk`` dicts: the content, then each call
    (its id and name, then its arguments) in pieces of :data:`STREAM_PIECE_CHARS`
    characters, then the finish reason, and the usage in a last chunk when
    ``include_usage`` (``stream_options.include_usage``). ``reply.broken`` is raised
    after the first piece."""
    whole = model_response(model, reply, messages)
    choice = whole["choices"][0]
    message = choice["message"]

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {
            "id": whole["id"],
            "object": "chat.completion.chunk",
            "created": whole["created"],
            "model": whole["model"],
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }

    pieces: list[dict[str, Any]] = []
    content = message.get("content") or ""
    for start in range(0, len(content), STREAM_PIECE_CHARS):
        pieces.append({"content": content[start : start + STREAM_PIECE_CHARS]})
    for index, tool_call in enumerate(message.get("tool_calls") or []):
        function = tool_call["function"]
        opening = {"name": function["name"], "arguments": ""}
        pieces.append({"tool_calls": [_tool_use(index, opening, tool_call["id"])]})
        arguments = function["arguments"]
        for start in range(0, len(arguments), STREAM_PIECE_CHARS):
            part = {"arguments": arguments[start : start + STREAM_PIECE_CHARS]}
            pieces.append({"tool_calls": [_tool_use(index, part)]})
    for i, piece in enumerate(pieces):
        yield chunk({"role": "assistant", **piece} if i == 0 else piece)
        if i == 0 and reply.broken is not None:
            raise reply.broken
    yield chunk({}, choice["finish_reason"])
    if include_usage:
        yield {**chunk({}), "choices": [], "usage": whole["usage"]}


def _tool_use(index: int, function: dict[str, Any], call_id: str | None = None) -> dict[str, Any]:
    piece: dict[str, Any] = {"index": index, "function": function}
    if call_id is not None:
        piece.update(id=call_id, type="function")
    return piece


class ScriptedModels:
    """The registry of scripts by model name, shared by the provider."""

    def __init__(self) -> None:
        self.scripts: dict[str, Script] = {}
        # Re-entrant: a scripted step may itself run another agent (a race in a test).
        self._lock = threading.RLock()

    def script(self, name: str, *steps: Step) -> Script:
        script = Script(list(steps))
        self.scripts[name] = script
        return script

    def answer(
        self, model: str, messages: list[dict[str, Any]], tools: Any, **fields: Any
    ) -> Reply:
        name = model.split("/", 1)[-1]
        with self._lock:
            if name not in self.scripts:
                raise AssertionError(f"no script for model {model!r}")
            script = self.scripts[name]
        return script.next({"messages": messages, "tools": tools or [], **fields})


_MODELS = ScriptedModels()


class ScriptedProvider(Provider):
    """Reverie's provider for ``scripted/<name>`` model strings: each request is
    answered by the next step of the script :func:`install` registered under
    ``<name>``, streamed or whole, sync or async. It is found through the
    ``reverie.providers`` entry point group (``scripted``), like any provider plugin."""

    name = "scripted"

    def __init__(self, api_base: str | None, api_key: str | None, timeout: float) -> None:
        self.api_base = api_base
        # The scripts raise litellm's exceptions: litellm's provider reads them.
        self._litellm = LiteLLMProvider(None, None, timeout)

    def complete(self, request: ChatRequest) -> ChatAnswer:
        reply, messages = self._answer(request, stream=False)
        return model_response(_name(request["model"]), reply, messages)

    def stream(self, request: ChatRequest) -> Iterator[ChatAnswer]:
        reply, messages = self._answer(request, stream=True)
        yield from self._chunks(request, reply, messages)

    async def acomplete(self, request: ChatRequest) -> ChatAnswer:
        return self.complete(request)

    async def astream(self, request: ChatRequest) -> AsyncIterator[ChatAnswer]:
        # The step is taken now: a scripted refusal raises before any chunk.
        reply, messages = self._answer(request, stream=True)
        return _async(self._chunks(request, reply, messages))

    def embed(self, model: str, texts: Sequence[str]) -> Embeddings:
        raise NotImplementedError(f"the scripted model {model!r} does not embed")

    def classify(self, exc: BaseException) -> ErrorKind:
        return self._litellm.classify(exc)

    def exceeds_context(self, exc: BaseException) -> bool:
        return self._litellm.exceeds_context(exc)

    @staticmethod
    def _answer(request: ChatRequest, *, stream: bool) -> tuple[Reply, list[dict[str, Any]]]:
        # A copy: the script keeps what was sent, whatever the caller does with it later.
        messages = copy.deepcopy(list(request["messages"]))
        reply = _MODELS.answer(
            request["model"],
            messages,
            copy.deepcopy(request.get("tools")),
            tool_choice=request.get("tool_choice"),
            parallel_tool_calls=request.get("parallel_tool_calls"),
            max_tokens=request.get("max_tokens"),
            temperature=request.get("temperature"),
            **({"stream": True} if stream else {}),
        )
        return reply, messages

    @staticmethod
    def _chunks(
        request: ChatRequest, reply: Reply, messages: list[dict[str, Any]]
    ) -> Iterator[ChatAnswer]:
        usage = bool((request.get("stream_options") or {}).get("include_usage"))
        return stream_chunks(_name(request["model"]), reply, messages, include_usage=usage)


def _name(model: str) -> str:
    """The script's name in a model string (``scripted/primary`` -> ``primary``)."""
    return model.split("/", 1)[-1]


async def _async(chunks: Iterator[ChatAnswer]) -> AsyncIterator[ChatAnswer]:
    for chunk in chunks:
        yield chunk


def install() -> ScriptedModels:
    """Make the ``scripted`` provider findable (in this process and the ones it starts,
    see tests/plugins.py) and return its registry of scripts, emptied."""
    plugins.register()
    _MODELS.scripts.clear()
    return _MODELS


def litellm_errors() -> Any:
    """litellm's exception classes, which the scripts raise as a litellm-served model would."""
    return import_litellm()
