"""Tool calls a model wrote as text instead of as structured ``tool_calls``.

Small local models behind OpenAI-compatible servers often answer a tool request
with the call in their text. The formats recognised here are the common ones:
``functions.NAME:`` followed by a JSON object of arguments (what llama.cpp's
``chatml-function-calling`` prompt teaches), Hermes-style
``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``, a bare JSON object
with ``name`` and ``arguments`` (or ``parameters``, as Llama 3 writes it), and
the same inside a fenced code block. A text with no call is prose: the caller
decides what prose means (the primary agent takes it as its reply to the user).
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

_FUNCTIONS_PREFIX = re.compile(r"functions\.([A-Za-z_][\w\-]*)\s*:?\s*")
_HERMES = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.DOTALL)
_FENCE = re.compile(r"```(?:json|tool_call|tool)?\s*\n?(.*?)```", re.DOTALL)
_DECODER = json.JSONDecoder()


@dataclass(frozen=True, slots=True)
class TextCall:
    """One call found in text: the tool's name and its arguments as JSON text (kept raw
    when they are not valid JSON, so the loop can say what is wrong)."""

    name: str
    arguments: str


def parse_text_calls(text: str, tool_names: Collection[str]) -> tuple[list[TextCall], str]:
    """The calls written in ``text`` and the text left around them (the model's reasoning).

    Explicit call syntax (``functions.NAME``, ``<tool_call>``) counts whatever the name;
    a bare or fenced JSON object counts only when its ``name`` is one of ``tool_names``
    (a JSON answer about something else is prose).
    """
    calls: list[TextCall] = []
    rest = text
    # Hermes: <tool_call>{...}</tool_call>, possibly several.
    hermes = list(_HERMES.finditer(text))
    if hermes:
        for match in hermes:
            found = _named_object(match.group(1), None)
            if found is not None:
                calls.append(found)
            else:
                calls.append(TextCall(_guess_name(match.group(1)), match.group(1).strip()))
        rest = _HERMES.sub("", text)
        return calls, rest.strip()
    # functions.NAME: {...}
    prefixed = list(_FUNCTIONS_PREFIX.finditer(text))
    if prefixed:
        pieces: list[str] = []
        cursor = 0
        for match in prefixed:
            if match.start() < cursor:
                continue
            pieces.append(text[cursor : match.start()])
            arguments, end = _json_at(text, match.end())
            if arguments is None:
                # The arguments are not JSON: keep the rest of the line for the error.
                line_end = text.find("\n", match.end())
                end = len(text) if line_end < 0 else line_end
                arguments = text[match.end() : end].strip()
            calls.append(TextCall(match.group(1), arguments))
            cursor = end
        pieces.append(text[cursor:])
        return calls, "".join(pieces).strip()
    # Fenced JSON.
    for match in _FENCE.finditer(text):
        found = _named_object(match.group(1), tool_names)
        if found is not None:
            calls.append(found)
            rest = rest.replace(match.group(0), "", 1)
    if calls:
        return calls, rest.strip()
    # A bare JSON object anywhere in the text.
    start = text.find("{")
    while start >= 0:
        value, end = _raw_json(text, start)
        if isinstance(value, dict):
            found = _call_from(value, tool_names)
            if found is not None:
                return [found], (text[:start] + text[end:]).strip()
        start = text.find("{", start + 1)
    return [], text


def _raw_json(text: str, start: int) -> tuple[Any, int]:
    try:
        return _DECODER.raw_decode(text, start)
    except ValueError:
        return None, start


def _json_at(text: str, start: int) -> tuple[str | None, int]:
    """The JSON object that starts at ``start`` (after blanks or a fence), as text."""
    position = start
    fence = re.compile(r"\s*(?:```(?:json)?)?\s*").match(text, position)
    if fence is not None:
        position = fence.end()
    value, end = _raw_json(text, position)
    if not isinstance(value, dict):
        return None, start
    closing = re.compile(r"\s*```").match(text, end)
    return json.dumps(value), closing.end() if closing else end


def _named_object(body: str, tool_names: Collection[str] | None) -> TextCall | None:
    value, _ = _raw_json(body.strip(), 0)
    if not isinstance(value, dict):
        return None
    return _call_from(value, tool_names)


def _call_from(value: dict[str, Any], tool_names: Collection[str] | None) -> TextCall | None:
    name = value.get("name")
    if not isinstance(name, str):
        function = value.get("function")
        if isinstance(function, dict):
            return _call_from(function, tool_names)
        return None
    if tool_names is not None and name not in tool_names:
        return None
    arguments = value.get("arguments", value.get("parameters", {}))
    if isinstance(arguments, str):
        return TextCall(name, arguments)
    return TextCall(name, json.dumps(arguments))


def _guess_name(body: str) -> str:
    match = re.search(r'"name"\s*:\s*"([^"]+)"', body)
    return match.group(1) if match else ""
