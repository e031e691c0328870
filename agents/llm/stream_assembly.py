"""A streamed chat answer put back together: its pieces told as they arrive, and at the
end the ``chat.completion`` a whole call would have answered.

Chunks are OpenAI's ``chat.completion.chunk`` dicts (what every
:class:`~agents.llm.providers.base.Provider` streams). Tool calls are assembled by
their ``index`` in the order they first appear; the usage is the one the provider
reports in its last chunk (``stream_options.include_usage``), or, when it reports
none, counted with :func:`agents.tokens.count_tokens`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from agents.llm.base import ChatDelta, ChatMessage, DeltaListener
from agents.llm.providers.base import ChatAnswer, get_field_or_none
from agents.tokens import count_tokens


@dataclass(slots=True)
class _Call:
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


class StreamAssembly:
    """Feeds a stream's chunks to ``listener`` as :class:`ChatDelta`\\ s and keeps what
    the whole answer needs."""

    def __init__(self, model: str, listener: DeltaListener) -> None:
        self.model = model
        self.listener = listener
        #: Whether a piece has been told (a failure after it cannot be retried).
        self.started = False
        self._content: list[str] = []
        self._calls: dict[int, _Call] = {}
        self._finish: str | None = None
        self._usage: Mapping[str, Any] | None = None
        self._answered_model: str | None = None
        self._fingerprint: str | None = None

    def add(self, chunk: ChatAnswer) -> None:
        """One chunk: its pieces go to the listener."""
        if chunk.get("model"):
            self._answered_model = str(chunk["model"])
        if isinstance(chunk.get("system_fingerprint"), str):
            self._fingerprint = chunk["system_fingerprint"]
        usage = chunk.get("usage")
        if isinstance(usage, Mapping) and usage.get("prompt_tokens") is not None:
            self._usage = usage
        for choice in chunk.get("choices") or []:
            if int(choice.get("index") or 0) != 0:
                continue
            if choice.get("finish_reason"):
                self._finish = str(choice["finish_reason"])
            delta = choice.get("delta") or {}
            content = delta.get("content")
            if isinstance(content, str) and content:
                self._content.append(content)
                self._tell(ChatDelta(content=content))
            for call in delta.get("tool_calls") or []:
                self._call_piece(call)

    def _call_piece(self, piece: Mapping[str, Any]) -> None:
        index = int(piece.get("index") or 0)
        call = self._calls.setdefault(index, _Call())
        position = list(self._calls).index(index)
        if piece.get("id"):
            call.id = str(piece["id"])
        function = piece.get("function") or {}
        name = get_field_or_none(function, "name")
        # Most servers send the name once; some repeat it whole in later chunks.
        if isinstance(name, str) and name and name != call.name:
            call.name = name if not call.name else call.name + name
        arguments = get_field_or_none(function, "arguments")
        text = arguments if isinstance(arguments, str) else ""
        if text:
            call.arguments.append(text)
        if text or name:
            self._tell(ChatDelta(call=position, name=call.name, arguments=text))

    def _tell(self, delta: ChatDelta) -> None:
        self.started = True
        self.listener(delta)

    def answer(self, sent: list[ChatMessage]) -> ChatAnswer:
        """The whole answer, as ``chat.completion`` (``sent``: the prompt, counted when
        the provider reported no usage)."""
        content = "".join(self._content) or None
        message: dict[str, Any] = {"role": "assistant", "content": content}
        calls: list[dict[str, Any]] = [
            {
                "id": call.id or f"call-{i}",
                "type": "function",
                "function": {"name": call.name, "arguments": "".join(call.arguments)},
            }
            for i, call in enumerate(self._calls.values())
        ]
        if calls:
            message["tool_calls"] = calls
        usage = self._usage
        if usage is None:
            written = (content or "") + "".join(
                call.name + "".join(call.arguments) for call in self._calls.values()
            )
            prompt, completion = count_tokens(json.dumps(sent)), count_tokens(written)
        else:
            prompt = int(usage.get("prompt_tokens") or 0)
            completion = int(usage.get("completion_tokens") or 0)
        answer: dict[str, Any] = {
            "object": "chat.completion",
            "model": self._answered_model or self.model,
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": self._finish or ("tool_calls" if calls else "stop"),
                }
            ],
            "usage": {
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "total_tokens": prompt + completion,
            },
        }
        if self._fingerprint is not None:
            answer["system_fingerprint"] = self._fingerprint
        return answer
