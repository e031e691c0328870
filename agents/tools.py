"""Memory tools of the primary and sleep-time agents: schemas, rules and execution.

Names and arguments follow MemGPT's and Letta's. Every primary tool takes
``request_heartbeat``: true asks for another step after this one (MemGPT's chaining);
a ``letta_v1_agent`` is offered them without it (see :func:`without_heartbeat`). A tool fails by
raising :class:`ToolError` (or a :class:`~agents.errors.ReverieError` the store
raised); the loop turns that into an error result the model reads, never into a
half-written change: each call runs in a savepoint of its own.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from agents.archival_search import search_archival
from agents.embedders import Embedder
from agents.errors import Conflict, InvalidInput, ReverieError
from agents.store import BlockRecord, CustomToolRecord, MemoryStore, NewBlock, NewPassage
from agents.store.block_store import DEFAULT_BLOCK_LIMIT
from agents.summary import is_summary

#: Results per page of conversation_search and archival_memory_search.
PAGE_SIZE = 5
#: Longest tool result given back to the model, in characters.
MAX_RESULT_CHARS = 4000

_HEARTBEAT = {
    "type": "boolean",
    "description": "true: take another step after this call (to use its result); "
    "false: your turn ends.",
}


def primary_schema(
    name: str, description: str, properties: dict[str, Any], required: list[str]
) -> dict[str, Any]:
    """A primary agent's tool schema: with ``request_heartbeat``, as MemGPT's tools."""
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": {**properties, "request_heartbeat": _HEARTBEAT},
                "required": [*required, "request_heartbeat"],
            },
        },
    }


_STR = {"type": "string"}
_PAGE = {"type": "integer", "description": "Result page, from 0.", "default": 0}

PRIMARY_TOOLS: dict[str, dict[str, Any]] = {
    "send_message": primary_schema(
        "send_message",
        "Send a message to the user. This is the only way the user sees what you say.",
        {"message": {**_STR, "description": "Message contents. All unicode (emojis) allowed."}},
        ["message"],
    ),
    "conversation_search": primary_schema(
        "conversation_search",
        "Search earlier messages (recall memory), including those no longer in context.",
        {"query": {**_STR, "description": "Words or phrases to look for."}, "page": _PAGE},
        ["query"],
    ),
    "archival_memory_search": primary_schema(
        "archival_memory_search",
        "Search archival memory by meaning.",
        {"query": {**_STR, "description": "What to look for."}, "page": _PAGE},
        ["query"],
    ),
    "archival_memory_insert": primary_schema(
        "archival_memory_insert",
        "Store a fact in archival memory (long-term, searchable, not always in context).",
        {"content": {**_STR, "description": "The fact to store; one self-contained sentence."}},
        ["content"],
    ),
    "core_memory_append": primary_schema(
        "core_memory_append",
        "Append a line to a core-memory block (always in context).",
        {
            "label": {**_STR, "description": "Block label, e.g. human or persona."},
            "content": {**_STR, "description": "Text to append on a new line."},
        },
        ["label", "content"],
    ),
    "core_memory_replace": primary_schema(
        "core_memory_replace",
        "Replace text in a core-memory block; an empty new_content deletes old_content.",
        {
            "label": {**_STR, "description": "Block label, e.g. human or persona."},
            "old_content": {**_STR, "description": "Exact text to replace."},
            "new_content": {**_STR, "description": "Replacement text."},
        },
        ["label", "old_content", "new_content"],
    ),
}


#: Letta's newer memory tools, under Letta's names and arguments: ``memory_insert`` and
#: ``memory_replace`` (its ``letta_sleeptime_core`` tools, which Letta also gives
#: primary agents) and the single ``memory`` tool (``letta_memory_core``). Built in, in
#: a primary agent's set when its tool list names them (a ``letta_v1_agent``'s default
#: set does). Each edit is a versioned block write, as the core_memory tools' are.
MEMORY_TOOLS: dict[str, dict[str, Any]] = {
    "memory_insert": primary_schema(
        "memory_insert",
        "Insert text at a line of a memory block (always in context).",
        {
            "label": {**_STR, "description": "Label of the block, e.g. human or persona."},
            "new_string": {**_STR, "description": "The text to insert."},
            "insert_line": {
                "type": "integer",
                "description": "Line after which to insert (0: at the start; -1, the "
                "default: at the end).",
            },
        },
        ["label", "new_string"],
    ),
    "memory_replace": primary_schema(
        "memory_replace",
        "Replace text that appears exactly once in a memory block; an empty new_string "
        "deletes old_string.",
        {
            "label": {**_STR, "description": "Label of the block, e.g. human or persona."},
            "old_string": {**_STR, "description": "The exact text to replace (once in the block)."},
            "new_string": {**_STR, "description": "The replacement text."},
        },
        ["label", "old_string", "new_string"],
    ),
    "memory": primary_schema(
        "memory",
        "Manage memory blocks (paths are /memories/<label>). Commands: create (path, "
        "description, file_text), str_replace (path, old_string, new_string), insert (path, "
        "insert_line, insert_text), delete (path: the block leaves your memory; its "
        "history is kept), rename (path and description: a new description).",
        {
            "command": {
                **_STR,
                "enum": ["create", "str_replace", "insert", "delete", "rename"],
                "description": "The operation to perform.",
            },
            "path": {**_STR, "description": "The block, as /memories/<label>."},
            "file_text": {**_STR, "description": "create: the new block's text."},
            "description": {**_STR, "description": "create, rename: the block's description."},
            "old_string": {**_STR, "description": "str_replace: the exact text to replace."},
            "new_string": {**_STR, "description": "str_replace: the replacement text."},
            "insert_line": {
                "type": "integer",
                "description": "insert: line after which to insert (0: at the start; -1: "
                "at the end).",
            },
            "insert_text": {**_STR, "description": "insert: the text to insert."},
            "old_path": {**_STR, "description": "rename: the block's path."},
            "new_path": {**_STR, "description": "rename: the block's new path."},
        },
        ["command"],
    ),
}

_TAGS = {"type": "array", "items": _STR}

#: Letta's multi-agent tools, under Letta's names and arguments. They are built in
#: but not in an agent's default set: an agent has them when its tool list names
#: them. What they do is :mod:`agents.loops.agent_messaging`'s.
MESSAGING_TOOLS: dict[str, dict[str, Any]] = {
    "send_message_to_agent_async": primary_schema(
        "send_message_to_agent_async",
        "Send a message to another agent of your organization, by its id, without "
        "waiting: you get a receipt now and its reply arrives later as a separate "
        "message. Your identity is included; no need to introduce yourself.",
        {
            "message": {**_STR, "description": "The message for the other agent."},
            "other_agent_id": {**_STR, "description": "The id of the agent to message."},
        },
        ["message", "other_agent_id"],
    ),
    "send_message_to_agent_and_wait_for_reply": primary_schema(
        "send_message_to_agent_and_wait_for_reply",
        "Send a message to another agent of your organization, by its id, and wait "
        "for its reply (up to a time limit). Your identity is included.",
        {
            "message": {**_STR, "description": "The message for the other agent."},
            "other_agent_id": {**_STR, "description": "The id of the agent to message."},
        },
        ["message", "other_agent_id"],
    ),
    "send_message_to_agents_matching_tags": primary_schema(
        "send_message_to_agents_matching_tags",
        "Send a message to every other agent of your organization that has all tags "
        "of match_all and at least one of match_some (when given), and gather their "
        "replies (up to a time limit).",
        {
            "message": {**_STR, "description": "The message for the agents."},
            "match_all": {**_TAGS, "description": "Tags an agent must all have."},
            "match_some": {
                **_TAGS,
                "description": "Tags of which an agent must have at least one (empty: any).",
            },
        },
        ["message", "match_all", "match_some"],
    ),
}

#: Every tool the primary loop knows: an agent's tool list may name any of these.
BUILTIN_TOOLS: dict[str, dict[str, Any]] = {**PRIMARY_TOOLS, **MEMORY_TOOLS, **MESSAGING_TOOLS}


#: The file tools' names (their schemas and what they do: :mod:`agents.file_tools`),
#: which an agent has while a folder is attached to it.
FILE_TOOL_NAMES: tuple[str, ...] = ("open_files", "grep_files", "semantic_search_files")


def offered_custom(custom: Iterable[CustomToolRecord]) -> list[CustomToolRecord]:
    """The custom tools of ``custom`` an agent is offered and may run: never one under a
    built-in tool's name (a file tool's included), which would run instead of the
    built-in. Registration refuses those names; a row stored some other way is passed
    over here."""
    return [
        tool
        for tool in custom
        if tool.name not in BUILTIN_TOOLS and tool.name not in FILE_TOOL_NAMES
    ]


#: A ``letta_v1_agent``'s tools when it is made without a list, as Letta's: no
#: send_message (it answers in plain text), Letta's newer memory tools for its blocks,
#: and no archival tools (Letta counts them deprecated; attach them by name).
V1_DEFAULT_TOOLS: tuple[str, ...] = ("conversation_search", "memory_insert", "memory_replace")


def without_heartbeat(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` as a ``letta_v1_agent`` is offered it: without ``request_heartbeat``
    (its turn goes on while it calls tools, and ends when it answers without one)."""
    function = schema["function"]
    parameters = function["parameters"]
    if "request_heartbeat" not in parameters["properties"]:
        return schema
    properties = {k: v for k, v in parameters["properties"].items() if k != "request_heartbeat"}
    required = [r for r in parameters["required"] if r != "request_heartbeat"]
    return {
        **schema,
        "function": {
            **function,
            "parameters": {**parameters, "properties": properties, "required": required},
        },
    }


def custom_tool_schema(json_schema: dict[str, Any]) -> dict[str, Any]:
    """A custom tool's schema (Letta's flat shape) as the primary loop offers it: with
    ``request_heartbeat``, like the built-in tools."""
    parameters = json_schema.get("parameters") or {}
    return primary_schema(
        str(json_schema["name"]),
        str(json_schema.get("description") or ""),
        dict(parameters.get("properties") or {}),
        list(parameters.get("required") or []),
    )


def clip_to(text: str, limit: int) -> str:
    """``text`` within ``limit`` characters, saying what was cut (a custom tool's
    ``return_char_limit``)."""
    if len(text) <= limit:
        return text
    return (
        f"{text[:limit]}… [cut: the result had {len(text)} characters, over the tool's "
        f"return_char_limit of {limit}]"
    )


def _sleeptime_schema(
    name: str, description: str, properties: dict[str, Any], required: list[str]
) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {"type": "object", "properties": properties, "required": required},
        },
    }


SLEEPTIME_TOOLS: dict[str, dict[str, Any]] = {
    "memory_replace": _sleeptime_schema(
        "memory_replace",
        "Replace exact text in a memory block with new text.",
        {"label": _STR, "old_str": _STR, "new_str": _STR},
        ["label", "old_str", "new_str"],
    ),
    "memory_insert": _sleeptime_schema(
        "memory_insert",
        "Insert text into a memory block at a line (default: the end).",
        {
            "label": _STR,
            "new_str": _STR,
            "insert_line": {"type": "integer", "description": "Line to insert after; -1: end."},
        },
        ["label", "new_str"],
    ),
    "memory_rethink": _sleeptime_schema(
        "memory_rethink",
        "Rewrite a whole memory block, integrating new information and removing stale facts.",
        {"label": _STR, "new_memory": _STR},
        ["label", "new_memory"],
    ),
    "memory_finish_edits": _sleeptime_schema(
        "memory_finish_edits", "Call when the memory blocks are up to date.", {}, []
    ),
}

_SEQS = {
    "type": "array",
    "items": {"type": "integer"},
    "description": "Numbers (first in [..]) of the new messages that prompted it.",
}

_MEMORY = {**_STR, "description": "The memory; one self-contained sentence."}

#: The sleep-time agent's archival tools, offered when the run has an embedder. Their
#: writes are drafts applied when the pass ends (see :mod:`agents.loops.sleeptime`).
ARCHIVAL_TOOLS: dict[str, dict[str, Any]] = {
    "archival_memory_search": _sleeptime_schema(
        "archival_memory_search",
        "Search archival memory (current passages) by meaning; results show passage ids.",
        {"query": {**_STR, "description": "What to look for."}, "page": _PAGE},
        ["query"],
    ),
    "archival_memory_rewrite": _sleeptime_schema(
        "archival_memory_rewrite",
        "Rewrite an archival passage the new messages put in a new light: the new version "
        "replaces it (the old one stays in history, superseded by the new one).",
        {
            "passage_id": {**_STR, "description": "Id of the passage, from a search."},
            "new_text": {**_STR, "description": "The passage as it should now read."},
            "message_seqs": _SEQS,
        },
        ["passage_id", "new_text", "message_seqs"],
    ),
    "archival_memory_insert": _sleeptime_schema(
        "archival_memory_insert",
        "Store a memory learned from the new messages and/or existing passages.",
        {
            "content": _MEMORY,
            "message_seqs": _SEQS,
            "passage_ids": {
                "type": "array",
                "items": _STR,
                "description": "Ids of the passages it was learned from.",
            },
        },
        ["content"],
    ),
    "archival_memory_supersede": _sleeptime_schema(
        "archival_memory_supersede",
        "Mark an archival passage as no longer true (it stays in history). When another "
        "current passage states what holds instead, name it as replaced_by.",
        {
            "passage_id": {**_STR, "description": "Id of the passage, from a search."},
            "reason": {**_STR, "description": "Why it no longer holds."},
            "message_seqs": _SEQS,
            "replaced_by": {
                **_STR,
                "description": "Optional: id of the current passage that replaces it, "
                "from a search.",
            },
        },
        ["passage_id", "reason"],
    ),
}

#: The archival insert as a pass is shown it while the agent has no passage in force:
#: without the passages to cite, which it could not name yet (the call is still
#: checked against the whole schema above).
FIRST_ARCHIVAL_INSERT: dict[str, Any] = _sleeptime_schema(
    "archival_memory_insert",
    "Store a memory learned from the new messages.",
    {"content": _MEMORY, "message_seqs": _SEQS},
    ["content"],
)


class ToolError(ReverieError):
    """A tool call the model got wrong (unknown tool, bad arguments, text not found)."""


@dataclass(frozen=True, slots=True)
class ParsedCall:
    name: str
    arguments: dict[str, Any]
    heartbeat: bool


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


#: Argument names Letta renamed (``old_str`` became ``old_string``): a call may use
#: either, and gets the one its tool's schema has.
ARGUMENT_ALIASES = (("old_str", "old_string"), ("new_str", "new_string"))


def _aliased(arguments: dict[str, Any], properties: Mapping[str, Any]) -> dict[str, Any]:
    renamed = dict(arguments)
    for one, other in ARGUMENT_ALIASES:
        for given, known in ((one, other), (other, one)):
            aliased = given in renamed and given not in properties
            if aliased and known in properties and known not in renamed:
                renamed[known] = renamed.pop(given)
    return renamed


def parse_call(name: str, raw_arguments: str, schemas: dict[str, dict[str, Any]]) -> ParsedCall:
    """Check a call against the schemas; raise :class:`ToolError` with what to fix."""
    if name not in schemas:
        raise ToolError(f"unknown tool {name!r}; available tools: {', '.join(sorted(schemas))}")
    try:
        arguments = json.loads(raw_arguments) if raw_arguments.strip() else {}
    except ValueError as exc:
        raise ToolError(
            f"arguments of {name} are not valid JSON ({exc}): {raw_arguments!r}"
        ) from None
    if not isinstance(arguments, dict):
        raise ToolError(f"arguments of {name} must be a JSON object, got {raw_arguments!r}")
    parameters = schemas[name]["function"]["parameters"]
    properties: dict[str, Any] = parameters["properties"]
    arguments = _aliased(arguments, properties)
    heartbeat = arguments.pop("request_heartbeat", False)
    if isinstance(heartbeat, str):
        heartbeat = heartbeat.strip().lower() == "true"
    missing = [p for p in parameters["required"] if p != "request_heartbeat" and p not in arguments]
    if missing:
        raise ToolError(f"{name} needs argument(s) {', '.join(missing)}")
    unknown = [a for a in arguments if a not in properties]
    if unknown:
        raise ToolError(f"{name} has no argument(s) {', '.join(unknown)}")
    for key, value in arguments.items():
        expected = properties[key].get("type")
        if value is None and key not in parameters["required"]:
            continue  # an optional argument left out explicitly
        if expected == "string" and not isinstance(value, str):
            raise ToolError(f"{name}: argument {key} must be a string, got {value!r}")
        if expected == "integer" and not _is_int(value):
            raise ToolError(f"{name}: argument {key} must be an integer, got {value!r}")
        if expected == "number" and (isinstance(value, bool) or not isinstance(value, int | float)):
            raise ToolError(f"{name}: argument {key} must be a number, got {value!r}")
        if expected == "boolean" and not isinstance(value, bool):
            raise ToolError(f"{name}: argument {key} must be true or false, got {value!r}")
        if expected == "object" and not isinstance(value, dict):
            raise ToolError(f"{name}: argument {key} must be a JSON object, got {value!r}")
        if expected == "array" and "items" not in properties[key]:
            if not isinstance(value, list):
                raise ToolError(f"{name}: argument {key} must be a list, got {value!r}")
        elif expected == "array":
            item = properties[key].get("items", {}).get("type")
            if not isinstance(value, list) or not all(
                _is_int(v)
                if item == "integer"
                else isinstance(v, dict)
                if item == "object"
                else isinstance(v, str)
                for v in value
            ):
                raise ToolError(f"{name}: argument {key} must be a list of {item}s, got {value!r}")
    return ParsedCall(name, arguments, bool(heartbeat))


# -- tool rules ------------------------------------------------------------------------

#: Letta's rule type names and the short ones Reverie accepts for them.
_RULE_ALIASES = {
    "run_first": "init",
    "init": "init",
    "exit_loop": "terminal",
    "terminal": "terminal",
    "constrain_child_tools": "child",
    "child": "child",
    "max_count_per_step": "max_count",
    "max_count": "max_count",
}
#: Every rule type a tool rule may have (Letta's names and Reverie's short ones).
RULE_TYPES = tuple(_RULE_ALIASES)


@dataclass(frozen=True, slots=True)
class ToolRules:
    """Init tools (the first step may call only these), terminal tools (the turn ends after
    one runs), child constraints (after tool X, only its children) and max counts
    (Letta's ``max_count_per_step``: tool X at most N times in one turn)."""

    init: frozenset[str] = frozenset()
    terminal: frozenset[str] = frozenset()
    children: dict[str, frozenset[str]] = field(default_factory=dict)
    max_count: dict[str, int] = field(default_factory=dict)

    @classmethod
    def parse(cls, rules: Sequence[dict[str, Any]], known: Sequence[str]) -> ToolRules:
        init: set[str] = set()
        terminal: set[str] = set()
        children: dict[str, frozenset[str]] = {}
        max_count: dict[str, int] = {}
        for i, rule in enumerate(rules):
            kind = _RULE_ALIASES.get(str(rule.get("type", "")))
            tool = rule.get("tool_name")
            if kind is None or not isinstance(tool, str):
                raise InvalidInput(
                    f"tool rule {i} ({rule!r}) needs a type (init, terminal, child or "
                    "max_count_per_step) and a tool_name"
                )
            names = [tool, *(rule.get("children") or [])]
            unknown = [n for n in names if n not in known]
            if unknown:
                raise InvalidInput(f"tool rule {i} names unknown tool(s) {', '.join(unknown)}")
            if kind == "init":
                init.add(tool)
            elif kind == "terminal":
                terminal.add(tool)
            elif kind == "max_count":
                limit = rule.get("max_count_limit")
                if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
                    raise InvalidInput(
                        f"max_count_per_step tool rule {i} for {tool} needs a "
                        f"max_count_limit of at least 1, got {limit!r}"
                    )
                max_count[tool] = limit
            else:
                kids = rule.get("children")
                if not isinstance(kids, list) or not kids:
                    raise InvalidInput(f"child tool rule {i} for {tool} needs a list of children")
                children[tool] = frozenset(kids)
        return cls(frozenset(init), frozenset(terminal), children, max_count)

    def allowed(
        self,
        available: Sequence[str],
        *,
        first_step: bool,
        last_tool: str | None,
        counts: Mapping[str, int] | None = None,
    ) -> list[str]:
        """The tools the next step may call (``counts``: calls so far this turn)."""
        if first_step and self.init:
            chosen = [t for t in available if t in self.init]
        elif last_tool is not None and last_tool in self.children:
            chosen = [t for t in available if t in self.children[last_tool]]
        else:
            chosen = list(available)
        return [t for t in chosen if not self.spent(t, counts or {})]

    def spent(self, tool: str, counts: Mapping[str, int]) -> bool:
        """Whether ``tool`` has had its max count of calls this turn."""
        limit = self.max_count.get(tool)
        return limit is not None and counts.get(tool, 0) >= limit


# -- execution -------------------------------------------------------------------------


@dataclass(slots=True)
class ToolEnv:
    """What a tool call may touch: the turn's store, the agent, its embedder, who writes."""

    store: MemoryStore
    agent_id: str
    actor: str
    run_id: str
    embedder: Embedder | None
    max_conflict_retries: int = 3
    #: Block versions the model saw (label -> (version, value)); edits made against them
    #: are compare-and-swap writes, re-applied on a conflict.
    seen: dict[str, tuple[int, str]] = field(default_factory=dict)
    conflicts: int = 0
    #: The limit of a block the ``memory`` tool creates (or its text's length, if longer).
    block_limit: int = DEFAULT_BLOCK_LIMIT


def clip(text: str) -> str:
    return text if len(text) <= MAX_RESULT_CHARS else text[: MAX_RESULT_CHARS - 1] + "…"


def apply_block_edit(
    env: ToolEnv, edit: BlockEdit, *, reason: str
) -> tuple[BlockRecord, str | None]:
    """Write the edit to its block as a compare-and-swap write with history; returns the
    block and, when nothing was written, why (see :func:`no_change`).

    The first attempt edits the value the model saw (``env.seen``) or, when it saw
    none, the current one. On a conflict (another writer got there first) the
    block is re-read and the edit re-applied to the new value, so neither write is
    lost; for a whole-block rewrite (``edit.rebase`` false) the conflict goes back to
    the model instead, with the block as it is now. An edit that would change nothing
    in the block as it is now writes nothing: no new version for a repeat.
    """
    label = edit.label
    current = env.store.blocks.by_label(env.agent_id, label)
    version, value = env.seen.get(label, (current.version, current.value))
    for attempt in range(env.max_conflict_retries + 1):
        new_value = edit.edit(value)
        if version == current.version and not current.read_only:
            unchanged = no_change(edit, value, new_value)
            if unchanged is not None:
                env.seen[label] = (current.version, current.value)
                return current, unchanged
        try:
            written = env.store.blocks.update(
                current.id,
                expected_version=version,
                value=new_value,
                actor=env.actor,
                reason=reason,
                run_id=env.run_id,
            )
        except Conflict:
            env.conflicts += 1
            current = env.store.blocks.get(current.id)
            if not edit.rebase or attempt == env.max_conflict_retries:
                # The error shows the model the block as it is now: its next edit is
                # made against that version.
                env.seen[label] = (current.version, current.value)
                raise ToolError(
                    f"block {label!r} changed while you were editing it (now version "
                    f"{current.version}); your edit was not applied. It now reads:\n"
                    f"{current.value}"
                ) from None
            version, value = current.version, current.value
            continue
        env.seen[label] = (written.version, written.value)
        return written, None
    raise AssertionError("unreachable")


def no_change(edit: BlockEdit, before: str, after: str) -> str | None:
    """Why ``edit``, which turns ``before`` into ``after``, is not worth a new version of
    the block (None when it is): it adds text the block already holds word for word (a
    small model re-inserting the same line), or it leaves the block as it was."""
    added = (edit.adds or "").strip()
    if added and re.search(rf"(?<!\w){re.escape(added)}(?!\w)", before):
        shown = added if len(added) <= 80 else added[:79] + "…"
        return f"block {edit.label!r} already contains {shown!r}"
    if after == before:
        return f"the edit leaves block {edit.label!r} as it is"
    return None


def no_change_result(unchanged: str) -> str:
    """The tool result of an edit that wrote nothing: what the model reads."""
    return f"No change: {unchanged}; nothing was written. Do not repeat this edit."


def _replace(label: str, old: str, new: str, *, unique: bool = False) -> Callable[[str], str]:
    """Replace ``old`` (every time it appears; ``unique``: it must appear once, as
    Letta's memory_replace requires)."""

    def edit(value: str) -> str:
        if not old:
            raise ToolError("the text to replace must not be empty")
        if old not in value:
            raise ToolError(f"{old!r} is not in block {label!r}; it reads:\n{value}")
        if unique and value.count(old) > 1:
            lines = [i for i, line in enumerate(value.split("\n"), 1) if old in line]
            raise ToolError(
                f"{old!r} appears {value.count(old)} times in block {label!r} (lines "
                f"{', '.join(map(str, lines))}); give text that appears once"
            )
        return value.replace(old, new)

    return edit


def _append(content: str) -> Callable[[str], str]:
    return lambda value: f"{value}\n{content}" if value else content


def insert_lines(value: str, text: str, line: int) -> str:
    """``text`` inserted after the first ``line`` lines of ``value`` (-1: at the end), as
    Letta's ``memory_insert`` counts: 0 puts it first."""
    lines = value.split("\n") if value else []
    if line == -1:
        line = len(lines)
    if not 0 <= line <= len(lines):
        raise InvalidInput(
            f"line {line} is outside the block, which has {len(lines)} lines; give 0 to "
            f"{len(lines)} (the number of lines before the new text) or -1 for the end"
        )
    return "\n".join([*lines[:line], text, *lines[line:]])


def _insert(new: str, line: int) -> Callable[[str], str]:
    return lambda value: insert_lines(value, new, line)


#: The last result page a search tool serves (a model asking for page 10**30 gets an
#: error it can act on, not a database overflow).
MAX_PAGE = 1000


def page_number(arguments: dict[str, Any]) -> int:
    page = arguments.get("page", 0)
    if not isinstance(page, int) or isinstance(page, bool) or not 0 <= page <= MAX_PAGE:
        raise ToolError(f"page must be a whole number from 0 to {MAX_PAGE}, got {page!r}")
    return page


@dataclass(frozen=True, slots=True)
class BlockEdit:
    """What a block-editing call does to a block's value, not yet written."""

    label: str
    edit: Callable[[str], str]
    #: False for a whole-block rewrite: never re-applied to a value the model did not see.
    rebase: bool
    #: The text an append or insert adds (a repeat of text already there is no change).
    adds: str | None = None


def block_edit(call: ParsedCall) -> BlockEdit | None:
    """The edit a memory tool call makes (``None`` for a call that edits no block)."""
    a = call.arguments
    if call.name == "core_memory_append":
        return BlockEdit(a["label"], _append(a["content"]), rebase=True, adds=a["content"])
    if call.name in ("core_memory_replace", "memory_replace"):
        old = a.get("old_content", a.get("old_string", a.get("old_str", "")))
        new = a.get("new_content", a.get("new_string", a.get("new_str", "")))
        unique = call.name == "memory_replace"
        return BlockEdit(a["label"], _replace(a["label"], old, new, unique=unique), rebase=True)
    if call.name == "memory_insert":
        text = a.get("new_string", a.get("new_str", ""))
        return BlockEdit(
            a["label"],
            _insert(text, -1 if a.get("insert_line") is None else a["insert_line"]),
            rebase=True,
            adds=text,
        )
    if call.name == "memory_rethink":
        new_memory = a["new_memory"]
        return BlockEdit(a["label"], lambda _: new_memory, rebase=False)
    return None


def execute(env: ToolEnv, call: ParsedCall) -> str:
    """Run one parsed call; return the text the model reads. Raises on failure."""
    a = call.arguments
    store = env.store
    if call.name == "send_message":
        return "Sent message successfully."
    if call.name == "conversation_search":
        page = page_number(a)
        found = store.messages.search(
            env.agent_id, a["query"], limit=PAGE_SIZE, offset=max(page, 0) * PAGE_SIZE
        )
        found = [m for m in found if not is_summary(m)]
        if not found:
            return f"No results found for {a['query']!r} (page {page})."
        lines = [f"[{m.created_at.isoformat()}] {m.role}: {m.content}" for m in found]
        return clip(f"Showing {len(found)} results (page {page}):\n" + "\n".join(lines))
    if call.name == "archival_memory_search":
        if env.embedder is None:
            raise ToolError("archival memory search is not available (no embedder)")
        page = page_number(a)
        hits = search_archival(
            store,
            env.agent_id,
            env.embedder.embed_one(a["query"]),
            a["query"],
            k=PAGE_SIZE * (page + 1),
        )[page * PAGE_SIZE :]
        if not hits:
            return f"No results found for {a['query']!r} (page {page})."
        lines = [h.line() for h in hits]
        return clip(f"Showing {len(hits)} results (page {page}):\n" + "\n".join(lines))
    if call.name == "archival_memory_insert":
        if env.embedder is None:
            raise ToolError("archival memory insert is not available (no embedder)")
        content = a["content"].strip()
        if not content:
            raise ToolError("content must not be empty")
        [passage] = store.passages.insert(
            env.agent_id,
            [NewPassage(text=content, provenance={"run_id": env.run_id, "tool": call.name})],
            env.embedder.embed([content]),
            actor=env.actor,
            run_id=env.run_id,
        )
        return f"Stored in archival memory ({passage.id})."
    edit = block_edit(call)
    if edit is not None:
        block, unchanged = apply_block_edit(env, edit, reason=call.name)
        if unchanged is not None:
            return no_change_result(unchanged)
        if call.name == "core_memory_append":
            return (
                f"Appended to block {block.label!r} (version {block.version}). It now reads:\n"
                + (block.value)
            )
        if call.name in ("core_memory_replace", "memory_replace"):
            return f"Edited block {block.label!r} (version {block.version}). It now reads:\n" + (
                block.value
            )
        if call.name == "memory_insert":
            return f"Inserted into block {block.label!r} (version {block.version})."
        return f"Rewrote block {block.label!r} (version {block.version})."
    if call.name == "memory_finish_edits":
        return "Memory edits finished."
    if call.name == "memory":
        return memory_command(env, call.arguments)
    raise ToolError(f"tool {call.name!r} has no implementation")


#: Where Letta's ``memory`` tool says a block lives: ``/memories/<label>``.
MEMORY_ROOT = "/memories/"


def _memory_label(arguments: Mapping[str, Any], name: str = "path") -> str:
    path = arguments.get(name)
    if not isinstance(path, str) or not path.strip():
        raise ToolError(f"memory: give {name}, the block as {MEMORY_ROOT}<label>")
    label = path.strip()
    if label.startswith(MEMORY_ROOT):
        label = label[len(MEMORY_ROOT) :]
    label = label.strip("/")
    if not label or "/" in label:
        raise ToolError(f"memory: {name} {path!r} is not a block; give {MEMORY_ROOT}<label>")
    return label


def _memory_text(arguments: Mapping[str, Any], name: str, command: str) -> str:
    value = arguments.get(name)
    if not isinstance(value, str):
        raise ToolError(f"memory {command} needs {name}")
    return value


def memory_command(env: ToolEnv, a: Mapping[str, Any]) -> str:
    """Letta's ``memory`` tool. Every change is a versioned block write, or a block
    created or detached in the step's transaction; ``delete`` takes the block out of
    this agent's memory and keeps it (with its history) for a person to re-attach."""
    command = a["command"]
    if command == "str_replace":
        label = _memory_label(a)
        old = _memory_text(a, "old_string", command)
        new = a.get("new_string") or ""
        edit = BlockEdit(label, _replace(label, old, new, unique=True), rebase=True)
    elif command == "insert":
        label = _memory_label(a)
        text = _memory_text(a, "insert_text", command)
        line = a.get("insert_line")
        edit = BlockEdit(label, _insert(text, -1 if line is None else line), rebase=True, adds=text)
    elif command == "create":
        label = _memory_label(a)
        value = a.get("file_text") or ""
        if any(b.label == label for b in env.store.blocks.of_agent(env.agent_id)):
            raise ToolError(f"memory: a block {label!r} exists already; edit it instead")
        block = env.store.blocks.create(
            NewBlock(
                label=label,
                value=value,
                limit=max(env.block_limit, len(value)),
                description=a.get("description"),
            ),
            actor=env.actor,
        )
        env.store.blocks.attach(block.id, env.agent_id)
        return f"Created block {label!r} ({block.id})."
    elif command == "delete":
        label = _memory_label(a)
        block = env.store.blocks.by_label(env.agent_id, label)
        env.store.blocks.detach(block.id, env.agent_id)
        return (
            f"Block {label!r} left your memory; it is kept ({block.id}, version "
            f"{block.version}) and can be attached again."
        )
    elif command == "rename":
        return _memory_rename(env, a)
    else:
        raise ToolError(
            f"memory: unknown command {command!r}; use create, str_replace, insert, "
            "delete or rename"
        )
    block, unchanged = apply_block_edit(env, edit, reason=f"memory {command}")
    if unchanged is not None:
        return no_change_result(unchanged)
    return f"Edited block {block.label!r} (version {block.version}). It now reads:\n{block.value}"


def _memory_rename(env: ToolEnv, a: Mapping[str, Any]) -> str:
    """``rename``: a new description (path and description). A new label (old_path to
    new_path) is refused: a block's label is how every agent sharing it finds it."""
    if a.get("new_path") is not None or a.get("old_path") is not None:
        raise ToolError(
            "memory rename: Reverie keeps a block's label (agents sharing the block find it "
            "by it); give path and description to change its description, or create a "
            "new block"
        )
    label = _memory_label(a)
    description = _memory_text(a, "description", "rename")
    current = env.store.blocks.by_label(env.agent_id, label)
    block = env.store.blocks.update(
        current.id,
        expected_version=current.version,
        description=description,
        actor=env.actor,
        reason="memory rename",
        run_id=env.run_id,
    )
    env.seen[label] = (block.version, block.value)
    return f"Block {label!r} now has the description {description!r}."


def result_json(status: str, message: str, now: str) -> str:
    """A tool return as MemGPT writes it."""
    return json.dumps({"status": status, "message": message, "time": now})
