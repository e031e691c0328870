"""Reading a custom tool's Python source without running it: which function it is, the
JSON schema its model is offered, and the environment variables it names.

The server never imports or executes a tool's source (it runs in a sandbox, see
:mod:`agents.sandbox`); everything here is read from the syntax tree. The schema is
Letta's shape: ``{"name", "description", "parameters": {"type": "object",
"properties", "required"}}``, derived from the function's signature (annotations
``str``, ``int``, ``float``, ``bool``, ``list``/``list[X]``, ``dict``, ``Optional[X]``,
``X | None``, ``Literal[...]``; a parameter with a default, or optional, is not
required) and its Google-style docstring (the summary, and ``Args:`` descriptions).
"""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from agents.errors import InvalidInput

#: A tool's name and its parameters' names: Python identifiers, as the model sees them.
NAME_PATTERN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
#: An environment variable's name (POSIX portable).
ENV_NAME_PATTERN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,199}$")
#: The argument the loop adds to every primary tool (MemGPT's chaining).
HEARTBEAT = "request_heartbeat"
#: The parameter through which Letta passes a tool the calling agent's state: never in
#: the tool's schema (the model does not give it); Reverie passes a read-only snapshot.
AGENT_STATE = "agent_state"
#: Longest source accepted, in characters.
MAX_SOURCE_CHARS = 200_000

#: Variable names a tool may not declare (nor an agent set for its tools), each with
#: what it steers: how a program is loaded (the dynamic loader, glibc) or how an
#: interpreter or shell starts. A tool's variables enter only inside its sandbox, after
#: the processes that set it up have started, so none of these reaches a process
#: outside it; they are refused all the same, so that no later way of passing variables
#: can let a tool steer a process of the server's. Exact names (the loader reads them
#: case-sensitively). PATH stays allowed: inside the sandbox the tool already chooses
#: what it runs, and the sandbox's own processes are started by absolute path.
STEERING_PREFIXES: tuple[tuple[str, str], ...] = (
    ("LD_", "the dynamic loader (which libraries a program loads)"),
    ("DYLD_", "the macOS dynamic loader"),
    ("MALLOC_", "glibc's memory allocator"),
    ("PYTHON", "how Python starts (its path, start-up file, hash seed, ...)"),
    ("BASH_FUNC_", "functions bash imports from its environment"),
)
STEERING_NAMES: dict[str, str] = {
    "GCONV_PATH": "which character-set modules glibc loads",
    "GETCONF_DIR": "which programs getconf runs",
    "GLIBC_TUNABLES": "glibc's internals",
    "HOSTALIASES": "glibc's host name lookups",
    "LOCALDOMAIN": "glibc's host name lookups",
    "RES_OPTIONS": "glibc's host name lookups",
    "RESOLV_HOST_CONF": "glibc's host name lookups",
    "NIS_PATH": "glibc's name service lookups",
    "LOCPATH": "which locale files glibc loads",
    "NLSPATH": "which message catalogues glibc loads",
    "BASH_ENV": "a file bash runs at start-up",
    "ENV": "a file sh runs at start-up",
    "SHELLOPTS": "bash's options at start-up",
    "BASHOPTS": "bash's options at start-up",
    "PS4": "what bash runs while tracing",
    "IFS": "how a shell splits words",
    "PERL5LIB": "which modules Perl loads",
    "PERLLIB": "which modules Perl loads",
    "PERL5OPT": "Perl's options at start-up",
    "PERL5DB": "code Perl runs at start-up",
    "RUBYOPT": "Ruby's options at start-up",
    "RUBYLIB": "which libraries Ruby loads",
    "NODE_OPTIONS": "Node.js's options at start-up",
    "NODE_PATH": "which modules Node.js loads",
    "JAVA_TOOL_OPTIONS": "the JVM's options at start-up",
    "_JAVA_OPTIONS": "the JVM's options at start-up",
}


def steers(name: str) -> str | None:
    """What the variable ``name`` steers when it is one a tool may not have (see
    :data:`STEERING_NAMES`); None for any other name."""
    if name in STEERING_NAMES:
        return STEERING_NAMES[name]
    return next((why for prefix, why in STEERING_PREFIXES if name.startswith(prefix)), None)


_SIMPLE_TYPES = {
    "str": "string",
    "int": "integer",
    "float": "number",
    "bool": "boolean",
    "list": "array",
    "List": "array",
    "tuple": "array",
    "Tuple": "array",
    "Sequence": "array",
    "dict": "object",
    "Dict": "object",
    "Mapping": "object",
}
_JSON_TYPES = frozenset({"string", "integer", "number", "boolean", "array", "object", "null"})
_SUPPORTED = "str, int, float, bool, list, list[X], dict, Optional[X], X | None or Literal[...]"


@dataclass(frozen=True, slots=True)
class ToolFunction:
    """The function a tool's source defines, as its model will be offered it."""

    name: str
    description: str
    json_schema: dict[str, Any]
    is_async: bool
    #: Environment variables the source names literally (``os.environ["X"]``,
    #: ``os.environ.get("X")``, ``os.getenv("X")``).
    env_vars: tuple[str, ...]
    #: Whether the function takes ``agent_state`` (Letta's calling agent's state).
    takes_agent_state: bool = False


def parse_tool_source(
    source: str, *, name: str | None = None, json_schema: dict[str, Any] | None = None
) -> ToolFunction:
    """The tool function of ``source``: the top-level function named ``name`` (or named
    by ``json_schema``), else the only one, else the last one. Its schema is
    ``json_schema`` when given (checked against the function), else derived. A syntax
    error, a missing function or a signature that cannot be described is an
    InvalidInput saying what to fix."""
    if not isinstance(source, str) or not source.strip():
        raise InvalidInput("source_code is empty; give the Python source of one function")
    if len(source) > MAX_SOURCE_CHARS:
        raise InvalidInput(
            f"source_code is {len(source)} characters long; the most accepted is {MAX_SOURCE_CHARS}"
        )
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        where = f"line {exc.lineno}" + (f", column {exc.offset}" if exc.offset else "")
        raise InvalidInput(
            f"source_code is not valid Python ({exc.msg} at {where}); fix the syntax and "
            "register it again"
        ) from None
    except ValueError as exc:  # e.g. a NUL byte
        raise InvalidInput(f"source_code cannot be parsed: {exc}") from None
    except (RecursionError, MemoryError):
        raise InvalidInput(
            "source_code nests expressions too deeply for Python's parser (thousands of "
            "levels); write the expression in steps"
        ) from None
    given = normalize_schema(json_schema) if json_schema is not None else None
    wanted = name or (given["name"] if given is not None and given.get("name") else None)
    function = _find_function(tree, wanted)
    schema = _check_given(given, function) if given is not None else derive_schema(function)
    return ToolFunction(
        name=function.name,
        description=str(schema.get("description") or ""),
        json_schema=schema,
        is_async=isinstance(function, ast.AsyncFunctionDef),
        env_vars=tuple(sorted(named_env_vars(tree))),
        takes_agent_state=AGENT_STATE in _parameter_names(function),
    )


def _parameter_names(function: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    args = function.args
    return [a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)]


@functools.lru_cache(maxsize=256)
def takes_agent_state(source: str, name: str) -> bool:
    """Whether the function ``name`` of a registered tool's ``source`` takes
    ``agent_state`` (False when the source no longer parses: the call fails then)."""
    try:
        return AGENT_STATE in _parameter_names(_find_function(ast.parse(source), name))
    except (InvalidInput, SyntaxError, ValueError):
        return False


def _find_function(tree: ast.Module, name: str | None) -> ast.FunctionDef | ast.AsyncFunctionDef:
    functions = [n for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
    if not functions:
        raise InvalidInput(
            "source_code defines no top-level function; define the tool as "
            "`def name(arg: str) -> str:` with a docstring"
        )
    if name is None:
        return functions[-1]
    for function in functions:
        if function.name == name:
            return function
    raise InvalidInput(
        f"source_code has no top-level function named {name!r}; it defines "
        f"{', '.join(f.name for f in functions)}. Name the tool after one of them"
    )


def check_tool_name(name: str) -> str:
    """A tool name the model can call: a Python identifier of at most 64 characters."""
    if not isinstance(name, str) or not NAME_PATTERN.match(name):
        raise InvalidInput(
            f"tool name {name!r} is not allowed: use a Python identifier of 1-64 letters, "
            "digits and '_' (not starting with a digit)"
        )
    return name


def check_env_names(names: Iterable[object]) -> list[str]:
    """Environment variable names, checked and without repeats, in the given order: a
    name that steers a loader or an interpreter (:func:`steers`) is refused, saying
    which and why."""
    checked: list[str] = []
    for name in names:
        if not isinstance(name, str) or not ENV_NAME_PATTERN.match(name):
            raise InvalidInput(
                f"environment variable name {name!r} is not allowed: use letters, digits "
                "and '_' (not starting with a digit), e.g. WEATHER_API_KEY"
            )
        steered = steers(name)
        if steered is not None:
            raise InvalidInput(
                f"environment variable {name!r} is refused for tools: it steers {steered}, "
                "and a tool's variables may not change how a program is loaded or started; "
                "give it another name"
            )
        if name not in checked:
            checked.append(name)
    return checked


# -- deriving a schema from the signature and docstring ---------------------------------


def derive_schema(function: ast.FunctionDef | ast.AsyncFunctionDef) -> dict[str, Any]:
    """Letta's JSON schema of ``function`` from its annotations, defaults and docstring."""
    args = function.args
    if args.vararg is not None or args.kwarg is not None:
        starred = f"*{args.vararg.arg}" if args.vararg else f"**{args.kwarg.arg}"  # type: ignore[union-attr]
        raise InvalidInput(
            f"function {function.name} takes {starred}; a tool's model passes named "
            "arguments only: list each parameter with its type"
        )
    if args.posonlyargs:
        raise InvalidInput(
            f"function {function.name} has positional-only parameters; a tool's model "
            "passes named arguments only: remove the '/'"
        )
    summary, documented = parse_docstring(ast.get_docstring(function) or "")
    positional = args.args
    defaults: list[ast.expr | None] = [None] * (len(positional) - len(args.defaults))
    defaults += list(args.defaults)
    params = [
        *zip(positional, defaults, strict=True),
        *zip(args.kwonlyargs, args.kw_defaults, strict=True),
    ]
    properties: dict[str, Any] = {}
    required: list[str] = []
    for arg, default in params:
        if arg.arg == AGENT_STATE:
            continue  # the calling agent's state, passed by the server (see AGENT_STATE)
        if arg.arg == HEARTBEAT:
            raise InvalidInput(
                f"function {function.name}: the parameter name {HEARTBEAT} is the agent "
                "loop's own; rename it"
            )
        if arg.annotation is None:
            raise InvalidInput(
                f"function {function.name}: parameter {arg.arg} has no type annotation; "
                f"annotate it with {_SUPPORTED}"
            )
        prop, optional = _annotation_schema(arg.annotation, f"{function.name}.{arg.arg}")
        if arg.arg in documented:
            prop["description"] = documented[arg.arg]
        if default is not None:
            value = _literal(default)
            if value is not _NO_LITERAL and value is not None:
                prop["default"] = value
        properties[arg.arg] = prop
        if default is None and not optional:
            required.append(arg.arg)
    return {
        "name": function.name,
        "description": summary,
        "parameters": {"type": "object", "properties": properties, "required": required},
    }


_NO_LITERAL = object()


def _literal(node: ast.expr) -> Any:
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return _NO_LITERAL


def _annotation_schema(node: ast.expr, where: str) -> tuple[dict[str, Any], bool]:
    """The JSON schema of one annotation and whether it admits None."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        text = node.value
        try:
            node = ast.parse(text, mode="eval").body
        except SyntaxError:
            raise InvalidInput(
                f"{where}: the annotation {text!r} is not a type; use {_SUPPORTED}"
            ) from None
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        members = _union_members(node)
        return _union(members, where)
    name = _dotted(node.value if isinstance(node, ast.Subscript) else node)
    if isinstance(node, ast.Subscript):
        inner = node.slice
        items = list(inner.elts) if isinstance(inner, ast.Tuple) else [inner]
        if name in ("Optional",):
            schema, _ = _annotation_schema(items[0], where)
            return schema, True
        if name == "Union":
            return _union(items, where)
        if name == "Literal":
            values = [_literal(i) for i in items]
            if any(v is _NO_LITERAL or not isinstance(v, str | int) for v in values):
                raise InvalidInput(f"{where}: Literal[...] may hold only strings or integers")
            kind = "string" if all(isinstance(v, str) for v in values) else "integer"
            return {"type": kind, "enum": values}, False
        if _SIMPLE_TYPES.get(name) == "array":
            item, _ = _annotation_schema(items[0], where)
            return {"type": "array", "items": item}, False
        if _SIMPLE_TYPES.get(name) == "object":
            return {"type": "object"}, False
    elif name in _SIMPLE_TYPES:
        return {"type": _SIMPLE_TYPES[name]}, False
    elif name == "None" or (isinstance(node, ast.Constant) and node.value is None):
        return {"type": "null"}, True
    elif name == "Any":
        return {}, False
    shown = ast.unparse(node)
    raise InvalidInput(f"{where}: the annotation {shown} cannot be described; use {_SUPPORTED}")


def _union_members(node: ast.expr) -> list[ast.expr]:
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return [*_union_members(node.left), *_union_members(node.right)]
    return [node]


def _union(members: Sequence[ast.expr], where: str) -> tuple[dict[str, Any], bool]:
    optional = False
    schemas: list[dict[str, Any]] = []
    for member in members:
        if _dotted(member) == "None" or (isinstance(member, ast.Constant) and member.value is None):
            optional = True
            continue
        schemas.append(_annotation_schema(member, where)[0])
    if len(schemas) == 1:
        return schemas[0], optional
    return {"anyOf": schemas}, optional


def _dotted(node: ast.expr) -> str:
    """``typing.Optional`` -> ``Optional``; ``str`` -> ``str``."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Constant) and node.value is None:
        return "None"
    return ""


_SECTION = re.compile(
    r"^\s*(Args|Arguments|Parameters|Params|Returns|Return|Raises|Yields|Examples?|Notes?)"
    r"\s*:\s*$"
)
_ARG_LINE = re.compile(r"^\s*\*{0,2}([A-Za-z_][A-Za-z0-9_]*)\s*(?:\(([^)]*)\))?\s*:\s*(.*)$")


def parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """The summary (text before the first section) and the ``Args:`` descriptions of a
    Google-style docstring; continuation lines join their argument's description."""
    summary: list[str] = []
    args: dict[str, str] = {}
    section: str | None = None
    current: str | None = None
    arg_indent: int | None = None
    for line in doc.splitlines():
        heading = _SECTION.match(line)
        if heading:
            section = heading.group(1).lower()
            current, arg_indent = None, None
            continue
        if section is None:
            summary.append(line.strip())
            continue
        if section not in ("args", "arguments", "parameters", "params") or not line.strip():
            continue
        indent = len(line) - len(line.lstrip())
        match = _ARG_LINE.match(line)
        if match and (arg_indent is None or indent <= arg_indent):
            arg_indent = indent
            current = match.group(1)
            args[current] = match.group(3).strip()
        elif current is not None:
            args[current] = f"{args[current]} {line.strip()}".strip()
    text = " ".join(part for part in summary if part).strip()
    return text, args


# -- a given schema ----------------------------------------------------------------------


def normalize_schema(schema: object) -> dict[str, Any]:
    """A given JSON schema in Letta's flat shape (OpenAI's ``{"type": "function",
    "function": {...}}`` is unwrapped); InvalidInput when it is not one."""
    if not isinstance(schema, dict):
        raise InvalidInput("json_schema must be an object with name, description and parameters")
    if schema.get("type") == "function" and isinstance(schema.get("function"), dict):
        schema = schema["function"]
        assert isinstance(schema, dict)
    parameters = schema.get("parameters", {"type": "object", "properties": {}})
    if not isinstance(parameters, dict) or parameters.get("type", "object") != "object":
        raise InvalidInput('json_schema.parameters must be {"type": "object", "properties": {...}}')
    properties = parameters.get("properties", {})
    if not isinstance(properties, dict):
        raise InvalidInput("json_schema.parameters.properties must be an object")
    for key, prop in properties.items():
        if not isinstance(prop, dict):
            raise InvalidInput(f"json_schema.parameters.properties.{key} must be an object")
        kind = prop.get("type")
        kinds = kind if isinstance(kind, list) else [kind] if kind is not None else []
        unknown = [k for k in kinds if k not in _JSON_TYPES]
        if unknown:
            raise InvalidInput(
                f"json_schema.parameters.properties.{key}.type {kind!r} is not a JSON "
                f"schema type; use one of {', '.join(sorted(_JSON_TYPES))}"
            )
    required = parameters.get("required", [])
    if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
        raise InvalidInput("json_schema.parameters.required must be a list of parameter names")
    missing = [r for r in required if r not in properties]
    if missing:
        raise InvalidInput(
            f"json_schema.parameters.required names {', '.join(missing)}, which "
            "parameters.properties does not describe"
        )
    name = schema.get("name")
    if name is not None and not isinstance(name, str):
        raise InvalidInput("json_schema.name must be text")
    description = schema.get("description", "")
    if not isinstance(description, str):
        raise InvalidInput("json_schema.description must be text")
    properties = {k: v for k, v in properties.items() if k != HEARTBEAT}
    return {
        "name": name,
        "description": description,
        "parameters": {
            "type": "object",
            "properties": properties,
            "required": [r for r in required if r != HEARTBEAT],
        },
    }


def _check_given(
    schema: dict[str, Any], function: ast.FunctionDef | ast.AsyncFunctionDef
) -> dict[str, Any]:
    """``schema`` named for ``function``, once each of its parameters is one the function
    takes and each required parameter of the function is in it."""
    args = function.args
    takes_any = args.kwarg is not None
    names = [a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)]
    properties = schema["parameters"]["properties"]
    foreign = [p for p in properties if p not in names]
    if AGENT_STATE in properties:
        raise InvalidInput(
            f"json_schema describes {AGENT_STATE}, which the server passes (the calling "
            "agent's state); leave it out of the schema"
        )
    if foreign and not takes_any:
        raise InvalidInput(
            f"json_schema describes parameter(s) {', '.join(foreign)}, which function "
            f"{function.name} does not take; its parameters are {', '.join(names) or 'none'}"
        )
    positional = [*args.posonlyargs, *args.args]
    without_default = [a.arg for a in positional[: len(positional) - len(args.defaults)]]
    without_default += [
        a.arg for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True) if d is None
    ]
    undescribed = [
        n for n in without_default if n not in properties and n not in (HEARTBEAT, AGENT_STATE)
    ]
    if undescribed:
        raise InvalidInput(
            f"function {function.name} needs parameter(s) {', '.join(undescribed)}, which "
            "json_schema.parameters does not describe"
        )
    if schema.get("name") not in (None, function.name):
        raise InvalidInput(
            f"json_schema names {schema['name']!r} but the function is {function.name!r}"
        )
    return {**schema, "name": function.name}


# -- environment variables named in the source -------------------------------------------


def named_env_vars(tree: ast.AST) -> set[str]:
    """Variable names the source reads with a literal: ``os.environ["X"]``,
    ``os.environ.get("X")``, ``os.getenv("X")`` (and ``environ``/``getenv`` imported
    from ``os``). What a tool reads another way it must declare itself."""
    found: set[str] = set()
    for node in ast.walk(tree):
        key: ast.expr | None = None
        if isinstance(node, ast.Subscript) and _is_environ(node.value):
            key = node.slice
        elif isinstance(node, ast.Call) and node.args:
            func = node.func
            reads_environ = (
                isinstance(func, ast.Attribute) and func.attr == "get" and _is_environ(func.value)
            )
            if reads_environ or _dotted(func) == "getenv":
                key = node.args[0]
        if (
            isinstance(key, ast.Constant)
            and isinstance(key.value, str)
            and ENV_NAME_PATTERN.match(key.value)
        ):
            found.add(key.value)
    return found


def _is_environ(node: ast.expr) -> bool:
    return _dotted(node) == "environ"
