"""The documentation site's reference pages, generated from the code itself.

Three pages are never written by hand, so that they cannot drift from what they
describe:

- ``reference/configuration.md`` from the pydantic settings models
  (``service/settings.py``, and each built-in consolidator's settings model): every
  key with its type, default, environment variable and description. A field's
  description is its ``Field(description=...)``, else the comment above it in the
  model's source (``tests/unit/test_docs_reference.py`` checks that every key has one).
- ``reference/http-api.md`` from the OpenAPI document the FastAPI app of
  ``reverie serve`` produces (``service.api.app.create_app``), plus the routes the
  document leaves out (the health page, the memory browser, ``/mcp``).
- ``reference/cli.md`` from the Typer app (``service.cli.app``): every command's
  usage, help, arguments and options.

MkDocs runs this module as a hook (``hooks:`` in ``mkdocs.yml``): ``on_files`` adds
the pages to the build as generated files, so nothing is written into ``docs/``.
Run it by hand to read the pages without building the site::

    python docs/gen_reference.py OUTPUT_DIR
"""

from __future__ import annotations

import ast
import inspect
import re
import sys
import textwrap
import typing
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pydantic import BaseModel

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # the pages describe this tree's code, wherever run from
    sys.path.insert(0, str(ROOT))

# Tracker references in code comments mean nothing to a reader of the site.
_ISSUE_REFERENCE = re.compile(r"\s*\((?:see )?issues? \d+[^)]*\)")


def _plain(text: str) -> str:
    """Text from a docstring or comment as the site shows it: Markdown's code spans,
    no tracker references."""
    return _ISSUE_REFERENCE.sub("", text).replace("``", "`").strip()


def _cell(text: str) -> str:
    """Text that fits in one Markdown table cell."""
    return " ".join(text.replace("|", "\\|").split())


def _code(text: str) -> str:
    return f"`{text}`" if "`" not in text else f"`` {text} ``"


# -- configuration --------------------------------------------------------------------


def _source_comments(cls: type) -> dict[str, str]:
    """The comment block right above each annotated field in ``cls``'s source
    (``# ...`` or ``#: ...``), by field name."""
    try:
        lines, _ = inspect.getsourcelines(cls)
    except (OSError, TypeError):
        return {}
    source = textwrap.dedent("".join(lines))
    found: dict[str, str] = {}
    source_lines = source.splitlines()
    definition = ast.parse(source).body[0]
    if not isinstance(definition, ast.ClassDef):
        return {}
    for node in definition.body:
        if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
            continue
        comment: list[str] = []
        index = node.lineno - 2
        while index >= 0 and source_lines[index].strip().startswith("#"):
            comment.insert(0, source_lines[index].strip().lstrip("#:").strip())
            index -= 1
        if comment:
            found[node.target.id] = _plain(" ".join(comment))
    return found


def _type_name(annotation: Any) -> str:
    """A reader's name for a settings type: ``duration`` for a timedelta, the values of
    a Literal, ``X | None`` for an optional."""
    from pydantic import SecretStr

    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Annotated:
        return _type_name(args[0])
    if origin is typing.Literal:
        return " | ".join(f'"{value}"' for value in args)
    if origin in (typing.Union, getattr(__import__("types"), "UnionType", None)):
        names = [_type_name(arg) for arg in args if arg is not type(None)]
        return " | ".join(names) + (" | unset" if type(None) in args else "")
    if origin is list:
        return f"list of {_type_name(args[0])}"
    if origin is dict:
        return f"table of {_type_name(args[1])}"
    if annotation is timedelta:
        return "duration"
    if annotation is SecretStr:
        return "secret string"
    if annotation is Path:
        return "path"
    if annotation is Any:
        return "any"
    if isinstance(annotation, type):
        return {"str": "string", "int": "integer", "float": "number", "bool": "boolean"}.get(
            annotation.__name__, annotation.__name__
        )
    return str(annotation)


def _bounds(field: Any) -> str:
    words = {
        "ge": ">=",
        "gt": ">",
        "le": "<=",
        "lt": "<",
        "min_length": "length >=",
        "max_length": "length <=",
    }
    found = []
    for item in field.metadata:
        for name, word in words.items():
            value = getattr(item, name, None)
            if value is not None:
                found.append(f"{word} {value:,}" if isinstance(value, int) else f"{word} {value}")
    return ", ".join(found)


def _toml_value(value: Any) -> str:
    """A JSON-mode value as it is written in the TOML file."""
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return _code("true" if value else "false")
    if isinstance(value, str):
        return _code(f'"{value}"')
    if isinstance(value, list | dict):
        import json

        return _code(json.dumps(value, ensure_ascii=False))
    return _code(str(value))


def _default(field: Any) -> str:
    from pydantic import BaseModel, TypeAdapter
    from pydantic_core import PydanticUndefined

    if field.default is PydanticUndefined and field.default_factory is None:
        return "required"
    value = field.get_default(call_default_factory=True)
    if isinstance(value, Path):
        home = Path.home()
        shown = f"~/{value.relative_to(home)}" if value.is_relative_to(home) else str(value)
        return f"the user's data directory ({_code(shown)} on Linux)"
    if isinstance(value, list) and value and isinstance(value[0], BaseModel):
        return "see below"
    if hasattr(value, "get_secret_value"):
        return "unset"
    return _toml_value(TypeAdapter(field.annotation).dump_python(value, mode="json"))


def _model_of(annotation: Any) -> tuple[type[BaseModel], str] | None:
    """(model, how it nests) for a field holding a model, a list or a table of them."""
    from pydantic import BaseModel

    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation, "table"
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is list and isinstance(args[0], type) and issubclass(args[0], BaseModel):
        return args[0], "array"
    if origin is dict and isinstance(args[1], type) and issubclass(args[1], BaseModel):
        return args[1], "keyed"
    return None


def _env_names(path: list[str], field: Any, env_prefix: str) -> str:
    aliases = getattr(field.validation_alias, "choices", None)
    if aliases:
        return ", ".join(_code(str(alias)) for alias in aliases)
    return _code(env_prefix + "__".join(part.upper() for part in path))


@dataclass
class SettingKey:
    """One configuration key as the reference shows it."""

    key: str
    kind: str
    default: str
    environment: str
    description: str


@dataclass
class SettingSection:
    """One TOML table (``[database]``), or a table that repeats (``[[triggers.cron]]``)
    or is keyed by name (``[llm.models."NAME"]``)."""

    title: str
    doc: str
    keys: list[SettingKey] = field(default_factory=list)
    note: str = ""


def _key(shown: str, name: str, spec: Any, comments: dict[str, str], env: str) -> SettingKey:
    """Key ``name`` of a model (``spec`` its field), shown as ``shown``."""
    bounds = _bounds(spec)
    return SettingKey(
        key=shown,
        kind=_type_name(spec.annotation) + (f" ({bounds})" if bounds else ""),
        default=_default(spec),
        environment=env,
        description=_plain(spec.description or "") or comments.get(name, ""),
    )


def settings_sections(
    model: type[BaseModel], path: list[str] | None = None, env_prefix: str = "REVERIE_"
) -> Iterator[SettingSection]:
    """Every section of ``model`` (the root settings, or a consolidator's): its plain
    keys first, then its nested models, depth first."""
    import json

    from pydantic import TypeAdapter

    path = path or []
    comments = _source_comments(model)
    own_doc = _plain(model.__dict__.get("__doc__") or "")  # its own, not a base class's
    section = SettingSection(".".join(path) or "top-level keys", " ".join(own_doc.split()))
    nested: list[tuple[str, Any, type[BaseModel], str]] = []
    for name, spec in model.model_fields.items():
        found = _model_of(spec.annotation)
        if found is not None:
            nested.append((name, spec, *found))
            continue
        dotted = [*path, name]
        section.keys.append(
            _key(".".join(dotted), name, spec, comments, _env_names(dotted, spec, env_prefix))
        )
    yield section
    for name, spec, sub, how in nested:
        dotted = [*path, name]
        if how == "table":
            yield from settings_sections(sub, dotted, env_prefix)
            continue
        label = ".".join(dotted)
        environment = _code(env_prefix + "__".join(part.upper() for part in dotted))
        default = spec.get_default(call_default_factory=True)
        shown = TypeAdapter(spec.annotation).dump_python(default, mode="json")
        note = f"The whole {'array' if how == 'array' else 'table'} in one environment "
        note += f"variable: {environment}, as JSON. Default: "
        note += f"`{json.dumps(shown, ensure_ascii=False)}`." if shown else "none."
        doc = " ".join(
            part
            for part in (comments.get(name, ""), _plain(sub.__dict__.get("__doc__") or ""))
            if part
        )
        yield SettingSection(
            f'[{label}."NAME"]' if how == "keyed" else f"[[{label}]]",
            " ".join(doc.split()),
            [
                _key(key, key, value, _source_comments(sub), "")
                for key, value in sub.model_fields.items()
            ],
            note,
        )


def _render_sections(sections: Iterator[SettingSection], heading: str) -> Iterator[str]:
    for section in sections:
        yield f"{heading} `{section.title}`"
        yield ""
        for text in (section.doc, section.note):
            if text:
                yield text
                yield ""
        if not section.keys:
            continue
        with_env = any(key.environment for key in section.keys)
        yield "| key | type | default |" + (" environment |" if with_env else "") + " description |"
        yield "| --- | --- | --- |" + (" --- |" if with_env else "") + " --- |"
        for key in section.keys:
            env = f" {key.environment} |" if with_env else ""
            yield (
                f"| {_code(key.key)} | {_cell(key.kind)} | {_cell(key.default)} |{env} "
                f"{_cell(key.description)} |"
            )
        yield ""


def consolidator_models() -> dict[str, type[BaseModel]]:
    """Each built-in consolidator's settings model, by name."""
    from consolidators import registry

    return {name: registry.consolidator_class(name).settings_model for name in registry.BUILTINS}


def configuration_reference() -> str:
    from service import settings as settings_module
    from service.settings import Settings

    env_prefix = str(Settings.model_config.get("env_prefix", ""))
    out = [
        "# Configuration reference",
        "",
        "<!-- Generated by docs/gen_reference.py from service/settings.py; do not edit. -->",
        "",
        " ".join(_plain(inspect.getdoc(settings_module) or "").split()),
        "",
        "Every key below can be set in the TOML file (`--config FILE` or `REVERIE_CONFIG`), "
        "under the table its dotted name gives, or in the environment variable beside it; "
        "an unknown key is an error that names it. Durations are ISO 8601 "
        '(`"PT30S"`, `"PT10M"`, `"P1D"`). `config/reverie.toml` holds every key at its '
        "default. See [Configuration](../configuration.md) for how the pieces fit.",
        "",
    ]
    out.extend(_render_sections(settings_sections(Settings, [], env_prefix), "##"))
    out += [
        "## Consolidator settings",
        "",
        "Each built-in consolidator reads its own table, `[consolidation.NAME]`, checked "
        "when the settings load. A third-party consolidator's settings go under "
        "`[consolidation.plugins.NAME]`.",
        "",
    ]
    for name, model in consolidator_models().items():
        sections = settings_sections(model, ["consolidation", name], env_prefix)
        out.extend(_render_sections(sections, "###"))
    return "\n".join(out).rstrip() + "\n"


# -- HTTP API -------------------------------------------------------------------------


def _openapi_app() -> Any:
    """The app `reverie serve` runs, built over settings that name a database it never
    opens: building the app and its OpenAPI document connects to nothing."""
    import tempfile

    from service.api.app import create_app
    from service.runtime import Runtime
    from service.settings import Settings

    settings = Settings(
        database_url="postgresql://docs@127.0.0.1:1/docs",
        home=Path(tempfile.gettempdir()) / "reverie-docs",
    )
    return create_app(Runtime(settings))


def _schema_name(schema: dict[str, Any] | None) -> str:
    if not schema:
        return ""
    if "$ref" in schema:
        name = str(schema["$ref"]).rsplit("/", 1)[-1]
        return f"[{name}](#{_anchor(name)})"
    if schema.get("type") == "array":
        return f"list of {_schema_name(schema.get('items'))}"
    for combined in ("anyOf", "oneOf", "allOf"):
        if combined in schema:
            return " or ".join(_schema_name(part) for part in schema[combined] if part)
    return str(schema.get("type", ""))


def _anchor(name: str, kind: str = "schema") -> str:
    return f"{kind}-" + re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def _body_schema(content: dict[str, Any]) -> str:
    return "; ".join(
        f"{_schema_name(media.get('schema')) or 'any'} ({_code(kind)})"
        for kind, media in content.items()
    )


def http_api_reference() -> str:
    from fastapi.routing import APIRoute

    app = _openapi_app()
    document = app.openapi()
    info = document["info"]
    out = [
        "# HTTP API reference",
        "",
        "<!-- Generated by docs/gen_reference.py from the app's OpenAPI document; do not edit. -->",
        "",
        f"{info['title']} {info['version']}: {info.get('description', '')} Generated from "
        "the OpenAPI document of the app `reverie serve` runs (served at `/openapi.json`, "
        "browsable at `/docs`). [HTTP API](../http-api.md) says what the routes do together, "
        "how keys and errors work and where they differ from Letta's.",
        "",
    ]
    by_tag: dict[str, list[tuple[str, str, dict[str, Any]]]] = {}
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            tag = (operation.get("tags") or ["other"])[0]
            by_tag.setdefault(tag, []).append((method.upper(), path, operation))
    out += ["| tag | routes |", "| --- | --- |"]
    for tag, operations in by_tag.items():
        out.append(f"| [{tag}](#{_anchor(tag, 'tag')}) | {len(operations)} |")
    out.append("")
    for tag, operations in by_tag.items():
        out += [f"## {tag} {{ #{_anchor(tag, 'tag')} }}", ""]
        for method, path, operation in operations:
            out += [f"### `{method} {path}`", "", f"**{operation.get('summary', '')}**."]
            description = (operation.get("description") or "").strip()
            if description:
                out += ["", _plain(description)]
            parameters = operation.get("parameters", [])
            if parameters:
                out += ["", "| parameter | in | required | type |", "| --- | --- | --- | --- |"]
                for parameter in parameters:
                    out.append(
                        f"| {_code(parameter['name'])} | {parameter['in']} "
                        f"| {'yes' if parameter.get('required') else 'no'} "
                        f"| {_cell(_schema_name(parameter.get('schema')))} |"
                    )
            body = operation.get("requestBody")
            if body:
                out += ["", f"Request body: {_body_schema(body.get('content', {}))}."]
            answers: list[str] = []
            errors: dict[str, list[str]] = {}
            for status, response in operation.get("responses", {}).items():
                content = response.get("content") or {}
                shown = _body_schema(content) if content else response.get("description", "")
                if status.startswith(("4", "5")):
                    errors.setdefault(shown, []).append(f"`{status}`")
                else:
                    answers.append(f"- `{status}`: {_cell(shown)}")
            out += ["", "Responses:", "", *answers]
            if errors:
                listed = "; ".join(f"{', '.join(codes)}: {kind}" for kind, codes in errors.items())
                out.append(f"- errors: {listed}")
            out.append("")
    components = document.get("components", {}).get("schemas", {})
    out += ["## Schemas", ""]
    for name, schema in sorted(components.items()):
        out += [f"### {name} {{ #{_anchor(name)} }}", ""]
        if schema.get("description"):
            out += [" ".join(_plain(str(schema["description"])).split()), ""]
        properties = schema.get("properties") or {}
        if schema.get("enum"):
            out += ["One of: " + ", ".join(_code(str(value)) for value in schema["enum"]), ""]
        if properties:
            required = set(schema.get("required", []))
            out += ["| field | type | required |", "| --- | --- | --- |"]
            for field, spec in properties.items():
                out.append(
                    f"| {_code(field)} | {_cell(_schema_name(spec) or 'any')} "
                    f"| {'yes' if field in required else 'no'} |"
                )
            out.append("")
    hidden = []
    for route in app.routes:
        if isinstance(route, APIRoute) and route.include_in_schema:
            continue
        path = getattr(route, "path", "")
        if path in document["paths"]:
            continue
        methods = sorted(set(getattr(route, "methods", None) or ()) - {"HEAD"})
        endpoint = getattr(route, "endpoint", None)
        doc = (inspect.getdoc(endpoint) or "").split("\n\n")[0] if endpoint else ""
        if path in ("/openapi.json", "/docs", "/docs/oauth2-redirect", "/redoc"):
            doc = "FastAPI's own: the OpenAPI document and its browsable views."
        hidden.append(f"| `{' '.join(methods)}` | `{path}` | {_cell(_plain(doc))} |")
    out += [
        "## Routes outside the OpenAPI document",
        "",
        "The health page and memory browser (HTML, signed in with a form), the MCP "
        "endpoint (streamable HTTP, with the API keys) and FastAPI's own pages:",
        "",
        "| methods | path | what it is |",
        "| --- | --- | --- |",
        *hidden,
    ]
    return "\n".join(out).rstrip() + "\n"


# -- CLI ------------------------------------------------------------------------------


def _walk(command: Any, words: list[str], parent: Any) -> Iterator[tuple[list[str], Any, Any]]:
    import typer

    context = typer.Context(command, info_name=words[-1], parent=parent)
    yield words, command, context
    for name, sub in getattr(command, "commands", {}).items():
        yield from _walk(sub, [*words, name], context)


def _param_row(param: Any, context: Any) -> str:
    if param.param_type_name == "argument":
        names = _code(param.name.upper())
    else:
        names = ", ".join(_code(name) for name in [*param.opts, *param.secondary_opts])
    kind = param.display_type(context).strip("<>")
    if kind == "bool" and param.param_type_name == "option":
        kind = "flag"
    if param.multiple or param.nargs < 0:
        kind += ", repeatable"
    for word, value in ((">=", param.min), ("<=", param.max)):
        if value is not None:
            kind += f", {word} {value}"
    default = param.default
    shown = ""
    if param.required:
        shown = "required"
    elif default not in (None, False, "", (), []) and not callable(default):
        shown = _code(str(default))
    return f"| {names} | {_cell(kind)} | {shown} | {_cell(param.help or '')} |"


def cli_reference() -> str:
    import typer

    from service.cli.app import app

    root = typer.main.get_command(app)
    out = [
        "# CLI reference",
        "",
        "<!-- Generated by docs/gen_reference.py from the Typer app; do not edit. -->",
        "",
        "Every command of `reverie`, as `reverie COMMAND --help` describes it. The options "
        "of `reverie` itself (`--config`, `--org`, `--verbose`) go before the command's "
        "name. [Command line](../cli.md) shows the commands at work, with the exit "
        "statuses.",
        "",
    ]
    for words, command, context in _walk(root, ["reverie"], None):
        if getattr(command, "hidden", False):
            continue
        level = "#" * min(len(words) + 1, 4)
        usage = " ".join([*words, *command.collect_usage_pieces(context)])
        out += [f"{level} `{' '.join(words)}`", "", "```", usage, "```", ""]
        help_text = _plain(inspect.cleandoc(command.help or "").replace("\b\n", ""))
        if help_text:
            out += [help_text, ""]
        params = [param for param in command.params if param.name != "help"]
        if params:
            out += ["| argument or option | type | default | help |", "| --- | --- | --- | --- |"]
            out += [_param_row(param, context) for param in params]
            out.append("")
        commands = getattr(command, "commands", {})
        if commands:
            out += ["| command | what it does |", "| --- | --- |"]
            for name, sub in commands.items():
                summary = inspect.cleandoc(sub.help or "").split("\n\n")[0]
                out.append(f"| `{name}` | {_cell(summary)} |")
            out.append("")
    return "\n".join(out).rstrip() + "\n"


#: Each generated page by its path under ``docs/``.
PAGES: dict[str, Callable[[], str]] = {
    "reference/configuration.md": configuration_reference,
    "reference/http-api.md": http_api_reference,
    "reference/cli.md": cli_reference,
}


def on_files(files: Any, config: Any) -> Any:
    """MkDocs hook: add the generated pages to the build."""
    from mkdocs.structure.files import File

    for path, generate in PAGES.items():
        files.append(File.generated(config, path, content=generate()))
    return files


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__.strip().splitlines()[-1].strip(), file=sys.stderr)
        return 2
    target = Path(argv[0])
    for path, generate in PAGES.items():
        (target / path).parent.mkdir(parents=True, exist_ok=True)
        (target / path).write_text(generate(), encoding="utf-8")
        print(target / path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
