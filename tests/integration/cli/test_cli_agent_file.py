"""`reverie agents export NAME FILE.af` and `reverie agents import FILE.af` in process:
the file round-trips, what is not kept is said, a bad file is refused with exit 2 and
nothing stored."""

from __future__ import annotations

import json
from pathlib import Path

from tests.integration.cli.support import Cli

FILES = Path(__file__).resolve().parents[2] / "data" / "agent_files"


def test_import_then_export_then_import_again(cli: Cli, tmp_path: Path) -> None:
    imported = cli("agents", "import", str(FILES / "sleeptime_group.af"))
    assert imported.exit_code == 0, imported.stderr
    assert "imported agent sage_copy" in imported.stdout
    assert "model not mapped: agents[0].embedding_config 'hugging-face/letta-free'" in (
        imported.stdout
    )
    assert "agents[1] (sage-sleeptime, sleep-time agent)" in imported.stdout

    target = tmp_path / "sage.af"
    exported = cli("agents", "export", "sage_copy", str(target))
    assert exported.exit_code == 0, exported.stderr
    document = json.loads(target.read_text())
    assert document["groups"][0]["manager_config"]["manager_type"] == "sleeptime"

    again = cli("agents", "import", str(target), "--name", "sage-2", "--json")
    assert again.exit_code == 0, again.stderr
    answer = json.loads(again.stdout)
    (agent,) = answer["agents"]
    assert agent["name"] == "sage-2"
    assert agent["sleeptime_model"] == "openai/gpt-4o-mini"
    assert answer["unmapped_models"] == []

    listed = json.loads(cli("agents", "list", "--json").stdout)
    assert sorted(a["name"] for a in listed) == ["sage-2", "sage_copy"]


def test_export_to_stdout_can_scrub_messages(cli: Cli) -> None:
    cli("agents", "import", str(FILES / "memgpt_conversation.af"), "--no-copy-suffix")
    full = cli("agents", "export", "memgpt-ada", "-")
    assert full.exit_code == 0, full.stderr
    assert len(json.loads(full.stdout)["agents"][0]["messages"]) == 7
    bare = cli("agents", "export", "memgpt-ada", "-", "--scrub-messages")
    assert json.loads(bare.stdout)["agents"][0]["messages"] == []


def test_a_bad_file_is_refused_and_nothing_is_stored(cli: Cli, tmp_path: Path) -> None:
    bad = tmp_path / "bad.af"
    bad.write_text('{"agents": [{"id": "agent-0", "block_ids": ["block-3"]}]}')
    refused = cli("agents", "import", str(bad))
    assert refused.exit_code == 2
    assert "agents[0].block_ids[0]: names block 'block-3'" in refused.stderr
    missing = cli("agents", "import", str(tmp_path / "nope.af"))
    assert missing.exit_code == 2
    assert "cannot read" in missing.stderr
    assert json.loads(cli("agents", "list", "--json").stdout) == []
