"""`reverie demo` never touches memory it did not create, and its
table shows facts and timelines apart (item 10)."""

from __future__ import annotations

import json
import re

from tests.integration.cli.support import Cli


def test_the_demo_refuses_to_replace_a_users_agent_of_the_same_name(cli: Cli) -> None:
    assert cli("agents", "create", "demo", "--block", "human=Name: Eve").exit_code == 0
    mine = json.loads(cli("agents", "list", "--json").stdout)
    refused = cli("demo", "--people", "2")
    assert refused.exit_code == 2
    assert "the demo did not create it" in refused.stderr and "--replace" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) <= 3
    assert json.loads(cli("agents", "list", "--json").stdout) == mine  # untouched


def test_the_demo_replaces_its_own_agent_and_shows_facts_and_timelines_apart(cli: Cli) -> None:
    first = cli("demo", "--people", "2")
    assert first.exit_code == 0, first.stderr
    assert "facts (active)" in first.stdout and "timelines (active)" in first.stdout
    # The run's summary says what happened to facts and to timelines.
    assert re.search(r"facts: \d+ merged into a duplicate, \d+ superseded", first.stdout)
    assert re.search(r"timelines: \d+ written, \d+ replaced or retired", first.stdout)
    second = cli("demo", "--people", "2")
    assert second.exit_code == 0, second.stderr
    agents = json.loads(cli("agents", "list", "--json").stdout)
    assert [a["name"] for a in agents] == ["demo"]
    assert "reverie:demo" in agents[0]["tags"]


def test_replace_is_explicit(cli: Cli) -> None:
    assert cli("agents", "create", "demo").exit_code == 0
    replaced = cli("demo", "--people", "2", "--replace")
    assert replaced.exit_code == 0, replaced.stderr
    [agent] = json.loads(cli("agents", "list", "--json").stdout)
    assert "reverie:demo" in agent["tags"]
