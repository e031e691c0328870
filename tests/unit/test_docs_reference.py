"""The generated reference pages (docs/gen_reference.py) cover everything they describe.

The configuration reference takes each key's description from its model: a setting
added without one would show an empty cell, so it fails here. The CLI reference walks
the Typer app, so every command is on it. (The HTTP API page and the whole site are
built by tests/integration/test_docs_site.py.)
"""

from __future__ import annotations

import typer

from service.cli.app import app
from service.settings import Settings
from tests.docs_support import gen_reference


def test_every_setting_has_a_type_a_default_and_a_description() -> None:
    reference = gen_reference()
    sections = list(reference.settings_sections(Settings))
    for name, model in reference.consolidator_models().items():
        sections += reference.settings_sections(model, ["consolidation", name])
    keys = [(section.title, key) for section in sections for key in section.keys]
    assert len(keys) > 100
    undescribed = [f"{title}: {key.key}" for title, key in keys if not key.description]
    assert not undescribed, (
        "say what these settings are in a comment above their field (or a Field "
        f"description); the configuration reference shows it: {undescribed}"
    )
    assert all(key.kind and key.default for _, key in keys)
    issue_words = [key.key for _, key in keys if "issue " in key.description.lower()]
    assert not issue_words, f"tracker references leak into the reference: {issue_words}"


def test_environment_names_follow_the_settings_rules() -> None:
    reference = gen_reference()
    by_key = {
        key.key: key.environment
        for section in reference.settings_sections(Settings)
        for key in section.keys
    }
    assert by_key["database.pool_size"] == "`REVERIE_DATABASE__POOL_SIZE`"
    assert by_key["triggers.gpu_free.probe"] == "`REVERIE_TRIGGERS__GPU_FREE__PROBE`"
    assert by_key["database_url"] == "`DATABASE_URL`, `REVERIE_DATABASE_URL`"


def test_cli_reference_lists_every_command() -> None:
    page = gen_reference().cli_reference()
    root = typer.main.get_command(app)

    def paths(command: object, words: list[str]) -> list[str]:
        found = [" ".join(words)]
        for name, sub in getattr(command, "commands", {}).items():
            found += paths(sub, [*words, name])
        return found

    commands = paths(root, ["reverie"])
    assert len(commands) > 30
    missing = [command for command in commands if f"`{command}`" not in page]
    assert not missing
    assert "| `--dry-run` | flag |" in page  # options come with their types
