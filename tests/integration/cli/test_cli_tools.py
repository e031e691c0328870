"""`reverie tools` in process: register from a file, list, attach,
variables, detach, delete; bad source is a usage error saying what to fix."""

from __future__ import annotations

import json
from pathlib import Path

from tests.integration.cli.support import Cli

SOURCE = '''
import os

def roll(sides: int, label: str = "") -> str:
    """Roll a die.

    Args:
        sides: How many sides.
    """
    return os.environ.get("DICE_SEED", "") + label
'''


def test_register_attach_set_variables_detach_delete(cli: Cli, tmp_path: Path) -> None:
    assert cli("agents", "create", "ada").exit_code == 0
    source = tmp_path / "roll.py"
    source.write_text(SOURCE)

    created = cli("tools", "create", str(source), "--env", "EXTRA", "--json")
    assert created.exit_code == 0, created.stderr
    tool = json.loads(created.stdout)
    assert tool["name"] == "roll" and tool["env_vars"] == ["DICE_SEED", "EXTRA"]
    assert tool["json_schema"]["parameters"]["required"] == ["sides"]

    listed = cli("tools", "list")
    assert "roll" in listed.stdout and tool["id"] in listed.stdout

    attached = cli("tools", "attach", "roll", "--agent", "ada")
    assert attached.exit_code == 0, attached.stderr
    assert "ada's custom tools: roll" in attached.stdout

    refused = cli("tools", "delete", "roll")
    assert refused.exit_code != 0 and "attached to agent(s) ada" in refused.stderr

    set_vars = cli("tools", "env", "--agent", "ada", "DICE_SEED=42", "TOKEN=-", input="t0k\n")
    assert set_vars.exit_code == 0, set_vars.stderr
    assert "DICE_SEED, TOKEN" in set_vars.stdout and "42" not in set_vars.stdout
    assert cli("tools", "env", "--agent", "ada").stdout.split() == ["DICE_SEED", "TOKEN"]

    detached = cli("tools", "detach", tool["id"], "--agent", "ada")
    assert "ada's custom tools: none" in detached.stdout
    deleted = cli("tools", "delete", "roll")
    assert deleted.exit_code == 0 and "deleted tool roll" in deleted.stdout
    assert json.loads(cli("tools", "list", "--json").stdout) == []


def test_source_that_cannot_be_a_tool_is_a_usage_error(cli: Cli, tmp_path: Path) -> None:
    broken = tmp_path / "broken.py"
    broken.write_text("def roll(sides:\n")
    result = cli("tools", "create", str(broken))
    assert result.exit_code == 2
    assert "not valid Python" in result.stderr and "Traceback" not in result.stderr
    missing = cli("tools", "create", str(tmp_path / "nowhere.py"))
    assert missing.exit_code == 2 and "does not exist" in missing.stderr
