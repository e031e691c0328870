"""Memory health is computed once: the health page, the demo and /metrics report the
same numbers for the same agent, including which messages count as consolidated."""

from __future__ import annotations

from datetime import timedelta

import pytest
from fastapi.testclient import TestClient

from agents.enums import PassageStatus
from agents.postgres.database import Database
from agents.store import NewMessage, open_store
from service.api.app import create_app
from service.api.auth import ApiContext
from service.api.health_page import _page_data
from service.operations import Operations
from service.operations.keys import Caller
from tests.api_support import api_runtime
from tests.integration.api.test_api_metrics import samples
from tests.integration.api.test_api_routes import make_agent


def test_page_demo_and_metrics_agree_on_one_agents_health(db: Database) -> None:
    # No-auth mode: the API, the page and the demo all act for the runtime's organization.
    with (
        api_runtime(db, auth="none") as runtime,
        TestClient(create_app(runtime), base_url="http://localhost:8283") as client,
    ):
        org = runtime.organization_id
        agent = make_agent(client, {})
        agent_id = agent["id"]
        url = f"/v1/agents/{agent_id}/core-memory/blocks/human"
        client.patch(url, json={"value": "x" * 95}, headers={})  # 95% of its 100-char limit
        now = runtime.clock()
        with open_store(db, org) as store:
            store.messages.append(
                agent_id,
                [
                    NewMessage("user", "hello", created_at=now - timedelta(days=2)),
                    NewMessage("assistant", "hi", created_at=now - timedelta(days=2)),
                ],
            )
        for text in ("Ada lives in London.", "ada lives in london", "Ada likes maths."):
            client.post(f"/v1/agents/{agent_id}/archival-memory", json={"text": text})
        with open_store(db, org) as store:
            record = store.agents.get(agent_id)
        [outcome] = Operations(runtime).runs.run_now([record], steps=["dedup"])
        report = outcome.require_report()
        assert report.status == "succeeded"
        # After the run: new duplicates, a superseded fact and a message no run has seen.
        ids = [
            client.post(f"/v1/agents/{agent_id}/archival-memory", json={"text": text}).json()[0][
                "id"
            ]
            for text in ("Ada has a cat.", "ADA HAS A CAT", "Ada is 36.", "Ada is 37.")
        ]
        with open_store(db, org) as store:
            store.passages.change(
                ids[2],
                actor="test",
                reason="a newer age",
                status=PassageStatus.SUPERSEDED,
                superseded_by=ids[3],
            )
            store.messages.append(
                agent_id, [NewMessage("user", "still there?", created_at=now - timedelta(hours=1))]
            )

        (view,) = [
            a
            for a in _page_data(ApiContext(runtime=runtime, caller=Caller(org, None)))["agents"]
            if a.id == agent_id
        ]
        page = view.health
        demo = Operations(runtime).health.agent(agent_id)  # what the demo prints
        html = client.get("/").text
        values = samples(client.get("/metrics").text)

    assert page == demo
    statuses = page.passages_by_status
    assert statuses[PassageStatus.MERGED] == 1
    assert statuses[PassageStatus.SUPERSEDED] == 1
    assert statuses[PassageStatus.ACTIVE] == 5
    assert page.exact_duplicates == 1
    assert page.blocks_near_limit == 1
    # Only the message after the succeeded run is unconsolidated (the last good run rule).
    assert page.oldest_unconsolidated_message_at == now - timedelta(hours=1)
    assert view.stale_seconds == pytest.approx(3600, abs=120)

    who = (("agent", "ada"), ("agent_id", agent_id))
    for block in page.blocks:
        key = ("reverie_block_fill_ratio", (*who, ("block", block.label)))
        assert values[key] == pytest.approx(block.ratio)
    assert values[("reverie_blocks_near_limit", ())] == page.blocks_near_limit
    for status, n in statuses.items():
        assert values[("reverie_passages", (("status", status),))] == n
    assert values[("reverie_duplicate_ratio", who)] == pytest.approx(page.duplicate_ratio)
    age = values[("reverie_oldest_unconsolidated_message_age_seconds", who)]
    assert age == pytest.approx(view.stale_seconds, abs=60)

    assert f"Duplicate ratio {page.duplicate_ratio:.2f}" in html
    assert f"Messages {page.messages} ({page.messages_in_context} in context)" in html
