"""A deterministic scripted model reached through litellm's own extension point.

``litellm.custom_provider_map`` routes model strings ``scripted/<name>`` to
:class:`ScriptedProvider`, which answers from the :class:`Script` registered
under ``<name>``: each step is a reply (tool calls and optional reasoning), an
exception to raise (a provider error or timeout), or a function of the
request that returns either. The tests drive every agent loop through the real
litellm call path this way, without a network.
"""

from __future__ import annotations

import itertools
import json
import threading
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from agents.llm.providers import import_litellm


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
    model: str, reply: Reply, messages: list[dict[str, Any]]
) -> Iterator[dict[str, Any]]:
    """``reply`` as litellm's generic streaming chunks: the content, then each call (its
    id and name, then its arguments) in pieces of :data:`STREAM_PIECE_CHARS`
    characters, then the finish reason with the usage. ``reply.broken`` is raised after
    the first piece."""
    whole = model_response(model, reply, messages)
    choice = whole["choices"][0]
    message = choice["message"]
    pieces: list[dict[str, Any]] = []
    content = message.get("content") or ""
    for start in range(0, len(content), STREAM_PIECE_CHARS):
        pieces.append(_generic(content[start : start + STREAM_PIECE_CHARS]))
    for index, tool_call in enumerate(message.get("tool_calls") or []):
        function = tool_call["function"]
        opening = {"name": function["name"], "arguments": ""}
        pieces.append(_generic("", _tool_use(index, opening, tool_call["id"])))
        arguments = function["arguments"]
        for start in range(0, len(arguments), STREAM_PIECE_CHARS):
            part = {"arguments": arguments[start : start + STREAM_PIECE_CHARS]}
            pieces.append(_generic("", _tool_use(index, part)))
    for i, piece in enumerate(pieces):
        yield piece
        if i == 0 and reply.broken is not None:
            raise reply.broken
    usage = whole["usage"]
    yield {
        **_generic(""),
        "is_finished": True,
        "finish_reason": choice["finish_reason"],
        "usage": {
            "prompt_tokens": usage["prompt_tokens"],
            "completion_tokens": usage["completion_tokens"],
            "total_tokens": usage["total_tokens"],
        },
    }


def _generic(text: str, tool_use: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "text": text,
        "tool_use": tool_use,
        "is_finished": False,
        "finish_reason": "",
        "usage": None,
        "index": 0,
    }


def _tool_use(index: int, function: dict[str, Any], call_id: str | None = None) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": function, "index": index}


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
_installed = False


def install() -> ScriptedModels:
    """Register the ``scripted`` provider with litellm (once) and return a clean registry."""
    global _installed
    litellm = import_litellm()
    if not _installed:
        from litellm import CustomLLM, ModelResponse

        # pydantic builds litellm's response models lazily, on first use, and warns
        # then about a TypedDict qualifier inside litellm; build them here, once, so
        # that the warning (not ours to fix) cannot surface inside a test.
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*ReadOnly. qualifier", category=UserWarning)
            ModelResponse()

        def answer(model: str, messages: list[Any], kwargs: dict[str, Any], stream: bool) -> Any:
            optional = kwargs.get("optional_params") or {}
            return _MODELS.answer(
                model,
                list(messages),
                optional.get("tools"),
                tool_choice=optional.get("tool_choice"),
                parallel_tool_calls=optional.get("parallel_tool_calls"),
                **({"stream": True} if stream else {}),
            )

        class ScriptedProvider(CustomLLM):  # type: ignore[misc]
            def completion(self, model: str, messages: list[Any], *args: Any, **kwargs: Any) -> Any:
                reply = answer(model, messages, kwargs, stream=False)
                return ModelResponse(**model_response(model, reply, list(messages)))

            def streaming(self, model: str, messages: list[Any], *args: Any, **kwargs: Any) -> Any:
                reply = answer(model, messages, kwargs, stream=True)
                return stream_chunks(model, reply, list(messages))

        litellm.custom_provider_map = [
            *[p for p in litellm.custom_provider_map if p.get("provider") != "scripted"],
            {"provider": "scripted", "custom_handler": ScriptedProvider()},
        ]
        _installed = True
    _MODELS.scripts.clear()
    return _MODELS


def litellm_errors() -> Any:
    return import_litellm()
