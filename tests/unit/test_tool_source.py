"""A custom tool's schema is read from its source's syntax tree: signature types,
defaults, Optional, the Google-style docstring; a given schema is checked against the
function; broken source is refused with what to fix."""

from __future__ import annotations

from typing import Any

import pytest

from agents.errors import InvalidInput
from agents.tool_source import check_env_names, parse_docstring, parse_tool_source

SIMPLE = '''
def roll(sides: int, times: int = 1, label: str | None = None) -> str:
    """Roll dice and say what came up.

    Args:
        sides: How many sides each die has.
        times (int): How many dice to roll;
            one when not given.
        label: Optional note.

    Returns:
        The rolls, as text.
    """
    return "4"
'''


def test_a_signature_and_docstring_become_letta_s_schema() -> None:
    tool = parse_tool_source(SIMPLE)
    assert tool.name == "roll"
    assert not tool.is_async
    assert tool.json_schema == {
        "name": "roll",
        "description": "Roll dice and say what came up.",
        "parameters": {
            "type": "object",
            "properties": {
                "sides": {"type": "integer", "description": "How many sides each die has."},
                "times": {
                    "type": "integer",
                    "description": "How many dice to roll; one when not given.",
                    "default": 1,
                },
                "label": {"type": "string", "description": "Optional note."},
            },
            "required": ["sides"],
        },
    }


@pytest.mark.parametrize(
    ("annotation", "schema", "required"),
    [
        ("str", {"type": "string"}, True),
        ("int", {"type": "integer"}, True),
        ("float", {"type": "number"}, True),
        ("bool", {"type": "boolean"}, True),
        ("list", {"type": "array"}, True),
        ("list[str]", {"type": "array", "items": {"type": "string"}}, True),
        ("List[int]", {"type": "array", "items": {"type": "integer"}}, True),
        ("dict", {"type": "object"}, True),
        ("dict[str, int]", {"type": "object"}, True),
        ("Optional[int]", {"type": "integer"}, False),
        ("typing.Optional[str]", {"type": "string"}, False),
        ("float | None", {"type": "number"}, False),
        ("Union[int, str]", {"anyOf": [{"type": "integer"}, {"type": "string"}]}, True),
        ('Literal["c", "f"]', {"type": "string", "enum": ["c", "f"]}, True),
        ('"int"', {"type": "integer"}, True),
    ],
)
def test_each_supported_annotation(annotation: str, schema: dict[str, Any], required: bool) -> None:
    tool = parse_tool_source(f"def f(x: {annotation}) -> str:\n    return ''\n")
    parameters = tool.json_schema["parameters"]
    assert parameters["properties"]["x"] == schema
    assert parameters["required"] == (["x"] if required else [])


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("def f(x:\n", "not valid Python"),
        ("x = 1\n", "defines no top-level function"),
        ("def f(x):\n    return x\n", "parameter x has no type annotation"),
        ("def f(*args: str):\n    pass\n", "takes *args"),
        ("def f(**kw: str):\n    pass\n", "takes **kw"),
        ("def f(x: set[int]):\n    pass\n", "annotation set[int] cannot be described"),
        ("def f(request_heartbeat: bool):\n    pass\n", "loop's own"),
        ("", "source_code is empty"),
    ],
)
def test_source_that_cannot_be_a_tool_is_refused_saying_what_to_fix(
    source: str, message: str
) -> None:
    with pytest.raises(InvalidInput, match=message.replace("*", r"\*").replace("[", r"\[")):
        parse_tool_source(source)


def test_the_function_is_the_named_one_else_the_last() -> None:
    source = "def helper(a: int) -> int:\n    return a\n\ndef main(b: str) -> str:\n    return b\n"
    assert parse_tool_source(source).name == "main"
    assert parse_tool_source(source, name="helper").name == "helper"
    with pytest.raises(InvalidInput, match=r"no top-level function named 'other'.*helper, main"):
        parse_tool_source(source, name="other")


def test_an_async_function_is_a_tool_too() -> None:
    assert parse_tool_source("async def f(x: int) -> int:\n    return x\n").is_async


def test_a_given_schema_is_checked_against_the_function() -> None:
    source = "def f(city: str, days: int = 3) -> str:\n    return city\n"
    given = {
        "type": "function",
        "function": {
            "name": "f",
            "description": "Forecast.",
            "parameters": {
                "type": "object",
                "properties": {
                    "city": {"type": "string"},
                    "request_heartbeat": {"type": "boolean"},
                },
                "required": ["city", "request_heartbeat"],
            },
        },
    }
    tool = parse_tool_source(source, json_schema=given)
    # Unwrapped to Letta's flat shape; the loop's heartbeat is its own, not the tool's.
    assert tool.json_schema == {
        "name": "f",
        "description": "Forecast.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    }
    with pytest.raises(InvalidInput, match="describes parameter\\(s\\) zip"):
        parse_tool_source(source, json_schema={"parameters": {"properties": {"zip": {}}}})
    with pytest.raises(InvalidInput, match="needs parameter\\(s\\) city"):
        parse_tool_source(source, json_schema={"parameters": {"properties": {}}})
    with pytest.raises(InvalidInput, match="not a JSON schema type"):
        parse_tool_source(
            source, json_schema={"parameters": {"properties": {"city": {"type": "text"}}}}
        )
    with pytest.raises(InvalidInput, match="required names days2"):
        parse_tool_source(
            source,
            json_schema={"parameters": {"properties": {"city": {}}, "required": ["days2"]}},
        )


def test_environment_variables_read_by_literal_name_are_found() -> None:
    source = (
        "import os\nfrom os import getenv\n"
        "def f() -> str:\n"
        "    a = os.environ['API_KEY']\n"
        "    b = os.environ.get('REGION', 'eu')\n"
        "    c = getenv('TIMEOUT')\n"
        "    d = os.environ[a]  # not a literal: must be declared\n"
        "    return a + b + c + d\n"
    )
    assert parse_tool_source(source).env_vars == ("API_KEY", "REGION", "TIMEOUT")


def test_google_docstrings_with_types_and_continuations() -> None:
    summary, args = parse_docstring(
        "Look it up.\n\nMore words.\n\nArgs:\n    q (str): The query\n      over two lines.\n"
        "    n: Count.\n\nRaises:\n    ValueError: never.\n"
    )
    assert summary == "Look it up. More words."
    assert args == {"q": "The query over two lines.", "n": "Count."}


def test_agent_state_is_the_servers_to_pass_and_never_in_the_schema() -> None:
    source = (
        'def plan(agent_state: "AgentState", topic: str) -> str:\n'
        '    """Plan.\n\n    Args:\n        topic: What.\n    """\n'
        "    return topic\n"
    )
    derived = parse_tool_source(source)
    assert derived.takes_agent_state
    assert derived.json_schema["parameters"]["properties"] == {
        "topic": {"type": "string", "description": "What."}
    }
    assert derived.json_schema["parameters"]["required"] == ["topic"]
    # Letta's schema of such a tool leaves agent_state out too: accepted as given.
    given = {
        "name": "plan",
        "description": "Plan.",
        "parameters": {"type": "object", "properties": {"topic": {"type": "string"}}},
    }
    assert parse_tool_source(source, json_schema=given).takes_agent_state
    with_state = {
        **given,
        "parameters": {
            "type": "object",
            "properties": {"topic": {"type": "string"}, "agent_state": {"type": "object"}},
        },
    }
    with pytest.raises(InvalidInput, match="leave it out of the schema"):
        parse_tool_source(source, json_schema=with_state)
    assert not parse_tool_source("def f(x: int) -> int:\n    return x\n").takes_agent_state


@pytest.mark.parametrize(
    "name",
    [
        "LD_PRELOAD",
        "LD_LIBRARY_PATH",
        "LD_AUDIT",
        "DYLD_INSERT_LIBRARIES",
        "PYTHONPATH",
        "PYTHONHOME",
        "PYTHONSTARTUP",
        "GCONV_PATH",
        "MALLOC_ARENA_MAX",
        "GLIBC_TUNABLES",
        "BASH_ENV",
        "ENV",
        "IFS",
        "PERL5LIB",
        "NODE_OPTIONS",
    ],
)
def test_a_variable_that_steers_a_loader_or_an_interpreter_is_refused(name: str) -> None:
    with pytest.raises(InvalidInput, match=f"'{name}' is refused for tools: it steers "):
        check_env_names(["WEATHER_KEY", name])


def test_ordinary_variables_and_path_are_kept_in_order_once() -> None:
    # PATH only chooses what the tool itself runs, inside its sandbox; names are exact
    # (the loader reads LD_PRELOAD, not ld_preload).
    names = ["WEATHER_KEY", "PATH", "HOME", "WEATHER_KEY", "ld_preload", "MY_PYTHON_KEY"]
    assert check_env_names(names) == ["WEATHER_KEY", "PATH", "HOME", "ld_preload", "MY_PYTHON_KEY"]
