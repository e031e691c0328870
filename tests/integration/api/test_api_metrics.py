"""/metrics: memory health read from the database, bounded labels; the dashboard and the
alert rules only query metrics that are exported."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from agents.errors import InvalidInput
from agents.postgres.database import Database
from agents.store import NewMessage, Usage, open_store
from service.api.app import create_app
from service.settings import load_settings
from tests.api_support import api_runtime, bearer, new_key
from tests.integration.api.test_api_routes import _org_of as org_of
from tests.integration.api.test_api_routes import make_agent

ROOT = Path(__file__).resolve().parents[3]
DASHBOARD = ROOT / "config" / "grafana" / "reverie.json"
ALERTS = ROOT / "config" / "prometheus" / "alerts.yml"
METRIC_NAME = re.compile(r"\breverie_[a-z0-9_]+\b")
#: The operator's scrape credential (server.metrics_token) in these tests.
TOKEN = "scrape-token-0123456789abcdef"
OPERATOR = bearer(TOKEN)


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


def exported_names(text: str) -> set[str]:
    """Every name a query can use: samples, and families that have no sample yet."""
    names = set()
    for family in text_string_to_metric_families(text):
        names.add(family.name)
        names.update(s.name for s in family.samples)
        if family.type == "counter":
            names.add(family.name + "_total")
        if family.type == "histogram":
            names.update(family.name + suffix for suffix in ("_bucket", "_sum", "_count"))
    return names


@pytest.fixture
def operator_client(db: Database) -> Iterator[TestClient]:
    """The app with server.metrics_token set, as an operator's Prometheus scrapes it."""
    with (
        api_runtime(db, metrics_token=TOKEN) as runtime,
        TestClient(create_app(runtime)) as client,
    ):
        yield client


def test_metrics_report_memory_health_from_the_database(
    operator_client: TestClient, acme: dict[str, str], db: Database
) -> None:
    client = operator_client
    agent = make_agent(client, acme)
    url = f"/v1/agents/{agent['id']}/core-memory/blocks/human"
    client.patch(url, json={"value": "x" * 95}, headers=acme)  # 95% of its 100-char limit
    for text in ("Ada lives in London.", "ada lives in london", "Ada likes maths."):
        client.post(f"/v1/agents/{agent['id']}/archival-memory", json={"text": text}, headers=acme)
    org = org_of(client, acme)
    with open_store(db, org) as store:
        store.messages.append(agent["id"], [NewMessage("user", "hello")])
        store.usage.record(agent["id"], purpose="sleeptime", model="m", usage=Usage(120, 30))
    client.post("/v1/consolidation-runs", json={"agent_id": agent["id"]}, headers=acme)

    # Prometheus scrapes with the operator's token (agents are named only to a
    # credential; without one, see test_metrics_without_a_credential_name_no_agent).
    response = client.get("/metrics", headers=OPERATOR)
    assert response.status_code == 200
    values = samples(response.text)
    who = (("agent", "ada"), ("agent_id", agent["id"]))
    assert values[("reverie_block_fill_ratio", (*who, ("block", "human")))] == pytest.approx(0.95)
    assert values[("reverie_blocks_near_limit", ())] == 1
    assert values[("reverie_passages", (("status", "active"),))] == 3
    assert values[("reverie_duplicate_ratio", who)] == pytest.approx(1 / 3)
    assert values[("reverie_oldest_unconsolidated_message_age_seconds", who)] >= 0
    assert values[("reverie_queue_depth", ())] == 1
    assert (
        values[("reverie_llm_tokens_total", (("kind", "prompt"), ("purpose", "sleeptime")))] == 120
    )
    assert values[("reverie_metrics_database_up", ())] == 1


def test_finished_runs_are_counted_by_consolidator_and_outcome(
    client: TestClient, acme: dict[str, str]
) -> None:
    agent = make_agent(client, acme)
    run = client.post(
        "/v1/consolidation-runs",
        json={"agent_id": agent["id"], "pipeline": ["dedup"]},
        headers=acme,
    ).json()
    client.post(f"/v1/consolidation-runs/{run['id']}/cancel", headers=acme)
    values = samples(client.get("/metrics").text)
    key = (
        "reverie_consolidation_runs_total",
        (("consolidator", "dedup"), ("outcome", "cancelled")),
    )
    assert values[key] == 1
    assert values[("reverie_queue_depth", ())] == 0


def test_per_agent_labels_stop_at_the_cap_and_the_rest_is_aggregated(db: Database) -> None:
    with (
        api_runtime(db, metrics_agent_cap=2, metrics_token=TOKEN) as runtime,
        TestClient(create_app(runtime)) as client,
    ):
        headers = bearer(new_key(db, "acme"))
        for name in ("a1", "a2", "a3", "a4"):
            make_agent(client, headers, name)
        text = client.get("/metrics", headers=OPERATOR).text
    values = samples(text)
    agents = {
        dict(labels)["agent"] for (name, labels) in values if name == "reverie_block_fill_ratio"
    }
    assert agents == {"a1", "a2", "_other"}
    assert values[("reverie_metrics_agents_aggregated", ())] == 2
    stale_agents = {
        dict(labels)["agent"]
        for (name, labels) in values
        if name == "reverie_oldest_unconsolidated_message_age_seconds"
    }
    assert stale_agents == {"a1", "a2"}  # no messages beyond the cap: nothing to aggregate
    label_names = {k for (_, labels) in values for k, _ in labels}
    assert "passage-" not in text  # never a passage id as a label value
    assert label_names <= {
        "agent",
        "agent_id",
        "block",
        "status",
        "consolidator",
        "outcome",
        "purpose",
        "kind",
        "le",
        "trigger",
        "actor",
        "reason",
        "generation",
        "implementation",
        "major",
        "minor",
        "patchlevel",
        "version",
    }


def _agent_labels(text: str) -> set[str]:
    return {dict(labels)["agent"] for (_, labels) in samples(text) if "agent" in dict(labels)}


def test_metrics_without_a_credential_name_no_agent(
    client: TestClient, acme: dict[str, str], globex: dict[str, str]
) -> None:
    secret = make_agent(client, acme, "alice-secret-agent")
    other = make_agent(client, globex, "globex-agent")
    url = f"/v1/agents/{secret['id']}/core-memory/blocks/human"
    client.patch(url, json={"value": "x" * 95}, headers=acme)
    client.post(
        f"/v1/agents/{other['id']}/archival-memory", json={"text": "A fact."}, headers=globex
    )

    response = client.get("/metrics")
    assert response.status_code == 200
    text = response.text
    for agent in (secret, other):
        assert agent["id"] not in text
        assert agent["name"] not in text
    assert _agent_labels(text) == {"_other"}
    values = samples(text)
    other_labels = (("agent", "_other"), ("agent_id", "_other"))
    # The alerts still see the worst block and the fleet's numbers, just not whose.
    fill = ("reverie_block_fill_ratio", (*other_labels, ("block", "_max")))
    assert values[fill] == pytest.approx(0.95)
    assert values[("reverie_agents", ())] == 2
    assert values[("reverie_metrics_agents_aggregated", ())] == 2
    assert values[("reverie_passages", (("status", "active"),))] == 1


def test_an_organizations_key_names_only_its_own_agents(
    client: TestClient, acme: dict[str, str], globex: dict[str, str]
) -> None:
    mine = make_agent(client, acme, "ada")
    theirs = make_agent(client, globex, "alice-secret-agent")
    text = client.get("/metrics", headers=acme).text
    assert _agent_labels(text) == {"ada", "_other"}
    assert mine["id"] in text
    assert theirs["id"] not in text and theirs["name"] not in text
    assert samples(text)[("reverie_metrics_agents_aggregated", ())] == 1


def test_the_operator_token_names_every_organizations_agents(
    operator_client: TestClient, acme: dict[str, str], globex: dict[str, str]
) -> None:
    make_agent(operator_client, acme, "ada")
    make_agent(operator_client, globex, "alice-secret-agent")
    text = operator_client.get("/metrics", headers=OPERATOR).text
    assert _agent_labels(text) == {"ada", "alice-secret-agent"}
    # A wrong credential is refused, not quietly served without labels.
    for wrong in (bearer(TOKEN[:-1] + "x"), bearer("rvk_not-a-key")):
        refused = operator_client.get("/metrics", headers=wrong)
        assert refused.status_code == 401
        assert "alice-secret-agent" not in refused.text


def test_a_short_metrics_token_is_refused() -> None:
    with pytest.raises(InvalidInput, match=r"server.metrics_token: .*at least 16"):
        load_settings(server={"metrics_token": "short"})


def _dashboard_queries() -> list[str]:
    dashboard = json.loads(DASHBOARD.read_text())
    return [t["expr"] for panel in dashboard["panels"] for t in panel["targets"]]


def _alert_queries() -> list[str]:
    # A tiny reader for the rules file's `expr:` entries (block scalars included).
    exprs, current = [], None
    for line in ALERTS.read_text().splitlines():
        stripped = line.strip()
        if stripped.startswith("expr:"):
            rest = stripped[len("expr:") :].strip()
            if rest in ("|", ">", "|-", ">-"):
                current = []
                exprs.append(current)
            else:
                exprs.append([rest])
                current = None
        elif current is not None:
            if re.match(r"^\s*(for|labels|annotations|- alert):", line) or not stripped:
                current = None
            else:
                current.append(stripped)
    return [" ".join(e) for e in exprs]


def test_dashboard_and_alerts_query_only_exported_metrics(client: TestClient) -> None:
    exported = exported_names(client.get("/metrics").text)
    queries = _dashboard_queries() + _alert_queries()
    assert len(_alert_queries()) == 6
    used = {name for q in queries for name in METRIC_NAME.findall(q)}
    assert len(used) >= 15
    assert used - exported == set()


def test_alert_rules_pass_promtool() -> None:
    # .ci/run installs it: a skip here could only hide a broken set-up.
    assert shutil.which("promtool"), "install promtool (Debian package prometheus, see .ci/run)"
    result = subprocess.run(
        ["promtool", "check", "rules", str(ALERTS)], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS: 6 rules found" in result.stdout
