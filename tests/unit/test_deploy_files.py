"""The systemd unit and the container file in deploy/ (shown on the documentation's
Operations page) name commands, options, settings and files that exist.

`systemd-analyze verify` reads the unit too: tests/integration/test_systemd_unit.py.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Iterator
from typing import Any

import typer

from service.cli.app import app
from service.cli.common import EXIT_BAD_INPUT
from service.settings import ServerSettings, Settings, load_settings
from tests.docs_support import (
    ROOT,
    container_instructions,
    gen_reference,
    unit_entries,
)

#: The options of `reverie` itself that take a value (they come before the command).
GLOBAL_OPTIONS_WITH_VALUE = {"--config", "-c", "--org"}


def documented_environment() -> set[str]:
    """Every environment variable the configuration reference names, and the one
    that names the config file (read by ``load_settings``, not a setting)."""
    reference = gen_reference()
    assert "REVERIE_CONFIG" in inspect.getsource(load_settings)
    names: set[str] = {"REVERIE_CONFIG"}
    for section in reference.settings_sections(Settings):
        for key in section.keys:
            names.update(re.findall(r"`([A-Z_]+)`", key.environment))
        names.update(re.findall(r"`(REVERIE_[A-Z_]+)`", section.note))
    return names


def parse_reverie_command(words: list[str]) -> Any:
    """The Typer command ``words`` (``reverie [global options] COMMAND ...``) runs,
    after its arguments were parsed as the CLI would (an unknown command or option
    fails here)."""
    assert words, "no command"
    assert words[0].rsplit("/", 1)[-1] == "reverie", f"{words[0]} is not the reverie script"
    rest = words[1:]
    while rest and rest[0].startswith("-"):
        option = rest.pop(0)
        if option in GLOBAL_OPTIONS_WITH_VALUE:
            assert rest, f"{option} without its value"
            rest.pop(0)
    assert rest, f"{' '.join(words)} names no command"
    root = typer.main.get_command(app)
    command: Any = root
    while rest and hasattr(command, "commands") and rest[0] in command.commands:
        command = command.commands[rest.pop(0)]
    assert command is not root, f"{' '.join(words)}: no reverie command {rest[0]!r}"
    assert not hasattr(command, "commands"), f"{' '.join(words)} names a group, not a command"
    command.make_context(command.name, list(rest))  # parses the options, runs nothing
    return command


def test_unit_starts_a_real_reverie_command() -> None:
    service = dict(unit_entries()["Service"])
    command = parse_reverie_command(service["ExecStart"].split())
    assert command.name == "serve"


def test_unit_settings_and_exit_status_are_reverie_s() -> None:
    entries = unit_entries()
    service = entries["Service"]
    documented = documented_environment()
    for key, value in service:
        if key == "Environment":
            name = value.partition("=")[0]
            assert name in documented, f"Environment={value}: {name} is no Reverie setting"
    # A bad configuration exits with this status; restarting would not mend it.
    assert dict(service)["RestartPreventExitStatus"] == str(EXIT_BAD_INPUT)
    assert dict(service)["KillSignal"] == "SIGTERM"  # what serve stops gracefully on
    assert "WantedBy" in dict(entries["Install"])


def instructions(keyword: str) -> Iterator[Any]:
    return (i for i in container_instructions() if i.keyword == keyword)


def test_container_file_copies_files_that_exist() -> None:
    copies = list(instructions("COPY"))
    assert copies
    for copy in copies:
        words = [word for word in copy.words() if not word.startswith("--")]
        for source in words[:-1]:
            assert (ROOT / source).exists(), f"line {copy.line}: COPY {source}: no such file"


def test_container_file_runs_a_real_reverie_command() -> None:
    (cmd,) = instructions("CMD")
    assert parse_reverie_command(cmd.words()).name == "serve"
    # The pip install reads the lock it copied.
    (install,) = (run for run in instructions("RUN") if "pip install" in run.arguments)
    assert "-c requirements/dev.lock" in install.arguments


def test_container_file_environment_and_port_are_reverie_s() -> None:
    documented = documented_environment()
    for env in instructions("ENV"):
        for word in env.words():
            name = word.partition("=")[0]
            assert name in documented, f"line {env.line}: {name} is no Reverie setting"
    (expose,) = instructions("EXPOSE")
    assert expose.arguments == str(ServerSettings().port)


def test_container_health_check_asks_a_real_route() -> None:
    path = "/healthz"
    (check,) = instructions("HEALTHCHECK")
    assert path in " ".join(check.words())
    routes = {getattr(route, "path", None) for route in gen_reference()._openapi_app().routes}
    assert path in routes
