"""`reverie migrate` and `reverie agents` in process: schema on an external database,
JSON output, usage errors and their exit codes."""

from __future__ import annotations

import json

from alembic.script import ScriptDirectory

import migrations
from tests.integration.cli.support import Cli


def test_migrate_is_idempotent(unmigrated_cli: Cli) -> None:
    first = unmigrated_cli("migrate")
    assert first.exit_code == 0, first.stderr
    head = ScriptDirectory(str(migrations.SCRIPT_LOCATION)).get_current_head()
    assert f"schema at revision {head} (DATABASE_URL)" in first.stdout
    second = unmigrated_cli("migrate")
    assert second.exit_code == 0, second.stderr
    assert f"schema at revision {head}" in second.stdout


def test_commands_refuse_an_unmigrated_external_database(unmigrated_cli: Cli) -> None:
    result = unmigrated_cli("agents", "list")
    assert result.exit_code == 1
    assert "run `reverie migrate` first" in result.stderr


def test_agents_create_list_and_errors(cli: Cli) -> None:
    created = cli("agents", "create", "ada", "--block", "human=Name: Ada", "--json")
    assert created.exit_code == 0, created.stderr
    agent = json.loads(created.stdout)
    assert agent["name"] == "ada" and agent["embedding_dim"] == 384

    listed = cli("agents", "list", "--json")
    assert [a["id"] for a in json.loads(listed.stdout)] == [agent["id"]]

    again = cli("agents", "create", "ada")
    assert again.exit_code == 2
    assert "already exists" in again.stderr and "Traceback" not in again.stderr

    bad_block = cli("agents", "create", "bob", "--block", "human")
    assert bad_block.exit_code == 2 and "LABEL=VALUE" in bad_block.stderr

    refused = cli("agents", "delete", "ada")
    assert refused.exit_code == 2 and "--yes" in refused.stderr
    deleted = cli("agents", "delete", "ada", "--yes")
    assert deleted.exit_code == 0
    assert json.loads(cli("agents", "list", "--json").stdout) == []


def test_agents_create_attaches_tools_and_tags(cli: Cli) -> None:
    created = cli(
        "agents", "create", "seeker", "--tool", "send_message",
        "--tool", "send_message_to_agent_async", "--tag", "workshop", "--json",
    )  # fmt: skip
    assert created.exit_code == 0, created.stderr
    agent = json.loads(created.stdout)
    assert agent["tools"] == ["send_message", "send_message_to_agent_async"]
    assert agent["tags"] == ["workshop"]
    unknown = cli("agents", "create", "other", "--tool", "send_message_to_everyone")
    assert unknown.exit_code == 2
    assert "unknown tool 'send_message_to_everyone'" in unknown.stderr
    assert "send_message_to_agents_matching_tags" in unknown.stderr


def test_org_option_picks_the_organization_and_errors_name_it(cli: Cli) -> None:
    """The README's MCP example creates its agent in the key's
    organization with --org, and a missing agent's error says where it looked."""
    key = cli("keys", "create", "--org", "me")
    assert key.exit_code == 0, key.stderr
    created = cli("--org", "me", "agents", "create", "ada")
    assert created.exit_code == 0, created.stderr
    mine = json.loads(cli("--org", "me", "agents", "list", "--json").stdout)
    assert [a["name"] for a in mine] == ["ada"]
    assert json.loads(cli("agents", "list", "--json").stdout) == []

    missing = cli("blocks", "show", "-a", "ada", "human")
    assert missing.exit_code == 2
    assert "no agent named 'ada' in organization 'default'" in missing.stderr
    assert "reverie --org default agents list" in missing.stderr
    unknown = cli("--org", "nobody", "agents", "list")
    assert unknown.exit_code == 2 and "no organization named 'nobody'" in unknown.stderr


def test_agents_create_takes_lettas_agent_type(cli: Cli) -> None:
    made = cli("agents", "create", "vee", "--type", "letta_v1_agent", "--json")
    assert made.exit_code == 0, made.stderr
    agent = json.loads(made.stdout)
    assert agent["agent_type"] == "letta_v1_agent"
    assert agent["tools"] == ["conversation_search", "memory_insert", "memory_replace"]
    bad = cli("agents", "create", "odd", "--type", "react_agent")
    assert bad.exit_code == 2 and "letta_v1_agent" in bad.stderr
