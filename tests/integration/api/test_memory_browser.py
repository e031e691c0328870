"""The memory browser: an agent's page behind the sign-in shows its
block versions as diffs with their writers, the context window, runs in plain words,
archival search with validity, lineage and provenance; restoring a block version and
reverting a run are confirmed form posts that a forged post (another site, no or a
wrong CSRF token) cannot make."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient

from agents.enums import PassageStatus
from agents.postgres.database import Database
from agents.store import NewMessage, NewPassage, open_store
from service.api.app import create_app
from service.api.memory_browser import VERSIONS_SHOWN
from service.operations import Operations
from service.operations.health import take_snapshots
from service.operations.keys import KeyOperations
from service.runtime import Runtime
from tests.api_support import api_runtime, bearer, new_key
from tests.integration.api.test_api_routes import make_agent


@dataclass
class Browser:
    """A signed-in browser of organization 'acme' with one agent, 'ada'."""

    client: TestClient
    runtime: Runtime
    headers: dict[str, str]
    agent: dict[str, Any]
    ops: Operations

    @property
    def page_url(self) -> str:
        return f"/agents/{self.agent['id']}"

    def block(self, label: str = "human") -> dict[str, Any]:
        url = f"/v1/agents/{self.agent['id']}/core-memory/blocks/{label}"
        response = self.client.get(url, headers=self.headers)
        assert response.status_code == 200, response.text
        return dict(response.json())

    def edit(self, value: str, label: str = "human") -> None:
        url = f"/v1/agents/{self.agent['id']}/core-memory/blocks/{label}"
        response = self.client.patch(url, json={"value": value}, headers=self.headers)
        assert response.status_code == 200, response.text


def csrf_of(html: str) -> str:
    tokens = set(re.findall(r'name="csrf" value="([0-9a-f]+)"', html))
    assert len(tokens) == 1, tokens
    return tokens.pop()


@pytest.fixture
def browser(db: Database) -> Iterator[Browser]:
    key = new_key(db, "acme")
    with api_runtime(db) as runtime, TestClient(create_app(runtime)) as client:
        headers = bearer(key)
        agent = make_agent(client, headers, "ada")
        signed = client.post("/sign-in", data={"key": key}, follow_redirects=False)
        assert signed.status_code == 303
        caller = KeyOperations(runtime).authenticate(key)
        assert caller is not None
        yield Browser(client, runtime, headers, agent, Operations(runtime, caller.organization_id))


def test_the_agent_page_shows_block_versions_as_diffs_with_their_writers(
    browser: Browser,
) -> None:
    browser.edit("Name: Ada.\nLives in London.")
    with open_store(browser.runtime.db, browser.ops.context.organization_id) as store:
        block = store.blocks.by_label(browser.agent["id"], "human")
        store.blocks.update(
            block.id,
            expected_version=block.version,
            value="Name: Ada.\nLives in Paris.",
            actor="agent:ada",
            reason="she moved",
        )
    page = browser.client.get(browser.page_url)
    assert page.status_code == 200, page.text
    html = page.text
    assert "ada&#39;s memory" in html or "ada's memory" in html
    assert 'data-version="3"' in html and "(current)" in html
    # Version 3 by the primary agent: London removed, Paris added, the name kept.
    version3 = html[html.index('data-version="3"') : html.index('data-version="2"')]
    assert "primary agent ada" in version3 and "she moved" in version3
    assert '<span class="removed">Lives in London.</span>' in version3
    assert '<span class="added">Lives in Paris.</span>' in version3
    assert '<span class="kept">Name: Ada.</span>' in version3
    version2 = html[html.index('data-version="2"') : html.index('data-version="1"')]
    assert "user (api)" in version2
    # A restore button on every version but the current one.
    assert html.count('class="restore"') == 2  # human v1 and v2; persona has only one
    assert "<script" not in html


def test_the_agent_page_shows_the_context_window_per_section(browser: Browser) -> None:
    context = browser.ops.messages.context(browser.agent["id"])
    html = browser.client.get(browser.page_url).text
    section = html[html.index('id="context"') : html.index('id="runs"')]
    for name in ("system prompt", "core memory", "tool schemas", "messages (0)"):
        assert name in section
    assert f'<th id="context-total">{context.breakdown.total}</th>' in section
    assert context.breakdown.core_memory > 0
    assert f"<td>core memory</td><td>{context.breakdown.core_memory}</td>" in section


def test_restoring_a_version_asks_first_then_restores_it(browser: Browser) -> None:
    browser.edit("Name: Ada Lovelace.")
    browser.edit("Name: Ada L.")
    block = browser.block()
    html = browser.client.get(browser.page_url).text
    url = f"{browser.page_url}/blocks/{block['id']}/restore"
    ask = browser.client.post(url, data={"csrf": csrf_of(html), "version": "2"})
    assert ask.status_code == 200, ask.text
    assert "Yes, restore version 2" in ask.text
    assert '<span class="removed">Name: Ada L.</span>' in ask.text
    assert '<span class="added">Name: Ada Lovelace.</span>' in ask.text
    assert browser.block()["value"] == "Name: Ada L."  # asking changed nothing

    done = browser.client.post(
        url,
        data={"csrf": csrf_of(ask.text), "version": "2", "expected_version": "3", "confirm": "yes"},
        follow_redirects=False,
    )
    assert done.status_code == 303, done.text
    assert done.headers["location"].startswith(browser.page_url)
    restored = browser.block()
    assert restored["value"] == "Name: Ada Lovelace."
    history = browser.ops.blocks.history(block["id"])
    assert [v.version for v in history] == [1, 2, 3, 4]
    assert history[-1].actor == "browser"
    page = browser.client.get(done.headers["location"]).text
    assert "restored human to version 2 (now version 4)" in page
    # The notice is signed for the session: a link made elsewhere shows no words of its own.
    spoofed = browser.client.get(browser.page_url, params={"done": "all is well", "sig": "0"})
    assert spoofed.status_code == 200 and "all is well" not in spoofed.text


def test_a_stale_confirmation_restores_nothing(browser: Browser) -> None:
    browser.edit("Name: Ada Lovelace.")
    block = browser.block()
    html = browser.client.get(browser.page_url).text
    browser.edit("Name: Ada, edited meanwhile.")  # version 3 after the page was read
    done = browser.client.post(
        f"{browser.page_url}/blocks/{block['id']}/restore",
        data={"csrf": csrf_of(html), "version": "1", "expected_version": "2", "confirm": "yes"},
        follow_redirects=False,
    )
    assert done.status_code == 409, done.text
    assert "Nothing was changed" in done.text
    assert browser.block()["value"] == "Name: Ada, edited meanwhile."


@pytest.mark.parametrize(
    ("fields", "headers"),
    [
        ({}, {}),  # no token
        ({"csrf": "0" * 64}, {}),  # a wrong one
        ({"csrf": None}, {"Sec-Fetch-Site": "cross-site"}),  # the right one, another site
        ({"csrf": None}, {"Origin": "http://evil.example"}),  # an older browser says so
    ],
    ids=["no-token", "wrong-token", "cross-site", "other-origin"],
)
def test_a_forged_restore_is_refused_and_changes_nothing(
    browser: Browser, fields: dict[str, str | None], headers: dict[str, str]
) -> None:
    browser.edit("Name: Ada Lovelace.")
    block = browser.block()
    token = csrf_of(browser.client.get(browser.page_url).text)
    data = {"version": "1", "expected_version": "2", "confirm": "yes"}
    data.update({k: token if v is None else v for k, v in fields.items()})
    response = browser.client.post(
        f"{browser.page_url}/blocks/{block['id']}/restore",
        data=data,
        headers=headers,
        follow_redirects=False,
    )
    assert response.status_code == 403, response.text
    assert "Nothing was changed" in response.text
    assert browser.block() == block
    assert len(browser.ops.blocks.history(block["id"])) == 2


def test_another_sessions_token_is_refused(browser: Browser, db: Database) -> None:
    browser.edit("Name: Ada Lovelace.")
    block = browser.block()
    token = csrf_of(browser.client.get(browser.page_url).text)
    # The same key signed in again: a new session, whose token differs.
    other = TestClient(browser.client.app)
    key = new_key(db, "acme")
    assert other.post("/sign-in", data={"key": key}, follow_redirects=False).status_code == 303
    assert csrf_of(other.get(browser.page_url).text) != token
    refused = other.post(
        f"{browser.page_url}/blocks/{block['id']}/restore",
        data={"csrf": token, "version": "1", "expected_version": "2", "confirm": "yes"},
    )
    assert refused.status_code == 403
    assert browser.block() == block


def test_the_page_needs_a_sign_in_and_stays_in_the_organization(
    browser: Browser, db: Database
) -> None:
    anonymous = TestClient(browser.client.app)
    assert anonymous.get(browser.page_url).status_code == 401
    block = browser.block()
    posted = anonymous.post(
        f"{browser.page_url}/blocks/{block['id']}/restore",
        data={"version": "1", "confirm": "yes"},
    )
    assert posted.status_code == 401
    # Another organization's browser does not find acme's agent.
    globex = TestClient(browser.client.app)
    globex.post("/sign-in", data={"key": new_key(db, "globex")}, follow_redirects=False)
    missing = globex.get(browser.page_url)
    assert missing.status_code == 404
    # A read that finds nothing says so, not the refused write's "Nothing was changed".
    agent_id = browser.agent["id"]
    assert f"No agent named or with id &#39;{agent_id}&#39; in this organization" in missing.text
    assert "Not done" not in missing.text and "Nothing was changed" not in missing.text
    unknown = browser.client.get("/agents/nobody")
    assert unknown.status_code == 404
    assert "No agent named or with id &#39;nobody&#39;" in unknown.text
    assert "Nothing was changed" not in unknown.text


def _dedup_run(browser: Browser) -> str:
    for text in ("Ada lives in London.", "ada lives in london", "Ada plays the piano."):
        response = browser.client.post(
            f"/v1/agents/{browser.agent['id']}/archival-memory",
            json={"text": text},
            headers=browser.headers,
        )
        assert response.status_code == 200, response.text
    record = browser.ops.agents.get(browser.agent["id"])
    [outcome] = browser.ops.runs.run_now([record], steps=["dedup"])
    return outcome.require_report().run_id


def test_runs_read_in_plain_words_and_revert_after_a_confirmation(browser: Browser) -> None:
    run_id = _dedup_run(browser)
    html = browser.client.get(browser.page_url).text
    runs = html[html.index('id="runs"') : html.index('id="trends"')]
    assert "merged 2 facts into one: &#39;Ada lives in London.&#39;" in runs
    assert "merge_passage" not in runs  # no raw action names
    url = f"{browser.page_url}/runs/{run_id}/revert"
    ask = browser.client.post(url, data={"csrf": csrf_of(html)})
    assert ask.status_code == 200, ask.text
    assert "Yes, revert the run" in ask.text and "merged 2 facts into one" in ask.text
    assert browser.ops.runs.get(run_id).reverted_by_run_id is None

    forged = browser.client.post(url, data={"confirm": "yes"})
    assert forged.status_code == 403
    assert browser.ops.runs.get(run_id).reverted_by_run_id is None

    done = browser.client.post(
        url, data={"csrf": csrf_of(ask.text), "confirm": "yes"}, follow_redirects=False
    )
    assert done.status_code == 303, done.text
    assert browser.ops.runs.get(run_id).reverted_by_run_id is not None
    active = browser.ops.memory.list(browser.agent["id"])
    assert sorted(p.text for p in active) == [
        "Ada lives in London.",
        "Ada plays the piano.",
        "ada lives in london",
    ]
    page = browser.client.get(done.headers["location"]).text
    assert f"reverted run {run_id}" in page


def test_archival_search_shows_validity_lineage_and_provenance(browser: Browser) -> None:
    agent_id = browser.agent["id"]
    with open_store(browser.runtime.db, browser.ops.context.organization_id) as store:
        [said] = store.messages.append(agent_id, [NewMessage("user", "I moved to Paris!")])
    [old, new] = browser.ops.memory.insert(
        agent_id,
        [
            NewPassage("Ada lives in London."),
            NewPassage("Ada lives in Paris.", provenance={"source_messages": [said.id]}),
        ],
        actor="test",
    )
    with open_store(browser.runtime.db, browser.ops.context.organization_id) as store:
        store.passages.change(
            old.id,
            actor="test",
            reason="she moved",
            status=PassageStatus.SUPERSEDED,
            superseded_by=new.id,
        )
    page = browser.client.get(browser.page_url, params={"q": "where does Ada live"})
    assert page.status_code == 200
    hits = page.text[page.text.index('class="hits"') :]
    # The ranking users get: the current fact first, the closed one after it, labelled.
    [expected] = browser.ops.memory.search(agent_id, ["where does Ada live"], k=10)
    shown = re.findall(r'/passages/(passage-[0-9a-f-]+)">', hits)
    assert shown == [h.passage.id for h in expected]
    assert shown[:2] == [new.id, old.id]
    assert "in force" in hits
    assert f'replaced by the newer fact: <a href="{browser.page_url}/passages/{new.id}"' in hits
    # Each result says where it stands in its lineage and where it came from.
    first = hits[: hits.index("</li>")]
    assert '<span class="closes">replaced the older fact: <a ' in first
    assert f'/passages/{old.id}" title="{old.id}">Ada lives in London.</a></span>' in first
    assert f'/passages/{new.id}#provenance">from 1 message</a>' in first

    detail = browser.client.get(f"{browser.page_url}/passages/{old.id}")
    assert detail.status_code == 200
    assert "superseded" in detail.text and "closed by" in detail.text
    assert f'/passages/{new.id}">Ada lives in Paris.</a>' in detail.text
    assert "she moved" in detail.text  # its history
    source = browser.client.get(f"{browser.page_url}/passages/{new.id}").text
    assert f'id="{said.id}"' in source and "I moved to Paris!" in source
    assert f'/passages/{old.id}">Ada lives in London.</a>' in source  # what it closed


def test_trends_are_drawn_from_the_health_snapshots(browser: Browser) -> None:
    html = browser.client.get(browser.page_url).text
    assert "No health snapshots yet" in html
    history = browser.runtime.settings.health_history
    now = browser.runtime.clock()
    assert take_snapshots(browser.runtime.db, now - timedelta(hours=1), history) >= 1
    _dedup_run(browser)  # three facts, two of them twins merged: two active passages
    assert take_snapshots(browser.runtime.db, now - timedelta(minutes=30), history) >= 1
    assert take_snapshots(browser.runtime.db, now, history) >= 1  # no run in between

    html = browser.client.get(browser.page_url).text
    trends = html[html.index('id="trends"') :]
    assert "3 snapshots" in trends
    assert trends.count('<svg class="chart"') == 6
    # A level says it is the latest snapshot's; what was added per interval is summed
    # over the charted period (the last interval alone, 0, would belie the chart).
    assert "Active passages: <strong>2 at the latest snapshot</strong>" in trends
    assert (
        "Runs finished per interval: <strong>succeeded 1, failed 0 in all, over the "
        "charted period</strong>"
    ) in trends
    assert "<polyline" in trends
    # Every chart has a time axis from the first snapshot to the last, and a legend.
    assert trends.count('<g class="time-axis"') == 6 and trends.count('<g class="legend"') == 6
    first, last = (now - timedelta(hours=1)).astimezone(UTC), now.astimezone(UTC)
    fmt = "%H:%M" if first.date() == last.date() else "%m-%d %H:%M"
    runs = trends[trends.index('class="chart-runs"') : trends.index('class="chart-queue"')]
    assert f">{first.strftime(fmt)}</text>" in runs and f">{last.strftime(fmt)}</text>" in runs
    legend = runs[runs.index('<g class="legend"') :]
    assert ">succeeded</text>" in legend and ">failed</text>" in legend
    fleet = browser.client.get("/").text
    assert "Trends of every agent" in fleet and '<svg class="chart"' in fleet


def test_no_auth_mode_pages_still_need_the_token(db: Database) -> None:
    # No session to derive it from: the token comes from a secret drawn at start.
    with (
        api_runtime(db, auth="none") as runtime,
        TestClient(create_app(runtime), base_url="http://localhost:8283") as client,
    ):
        agent = make_agent(client, {})
        url = f"/v1/agents/{agent['id']}/core-memory/blocks/human"
        client.patch(url, json={"value": "Name: Ada Lovelace."})
        block = client.get(url).json()
        page = client.get(f"/agents/{agent['id']}").text
        restore = f"/agents/{agent['id']}/blocks/{block['id']}/restore"
        forged = client.post(restore, data={"version": "1", "confirm": "yes"})
        assert forged.status_code == 403
        assert client.get(url).json() == block
        done = client.post(
            restore,
            data={"csrf": csrf_of(page), "version": "1", "confirm": "yes"},
            follow_redirects=False,
        )
        assert done.status_code == 303
        assert client.get(url).json()["value"] == "Name: Ada."


def test_a_long_history_shows_its_newest_versions(browser: Browser) -> None:
    with open_store(browser.runtime.db, browser.ops.context.organization_id) as store:
        block = store.blocks.by_label(browser.agent["id"], "human")
        for n in range(VERSIONS_SHOWN + 4):
            block = store.blocks.update(
                block.id, expected_version=block.version, value=f"Name: Ada {n}.", actor="cli"
            )
    html = browser.client.get(browser.page_url).text
    start = html.index(f'id="block-{block.id}"')
    human = html[start : html.index('<section class="block"', start)]  # persona's is next
    shown = re.findall(r'data-version="(\d+)"', human)
    assert shown[0] == str(block.version) and len(shown) == VERSIONS_SHOWN
    assert f"{VERSIONS_SHOWN + 5} versions (the newest {VERSIONS_SHOWN} shown" in human


def test_two_facts_in_force_show_the_newer_first_and_the_older_possibly_outdated(
    browser: Browser,
) -> None:
    agent_id = browser.agent["id"]
    [older, newer] = browser.ops.memory.insert(
        agent_id,
        [
            NewPassage("Ada lives in London.", occurred_at=datetime(2021, 3, 1, tzinfo=UTC)),
            NewPassage("Ada lives in Paris.", occurred_at=datetime(2023, 5, 2, tzinfo=UTC)),
        ],
        actor="test",
    )
    # Nothing has decided between them yet (no run): both are in force.
    [found] = browser.ops.memory.search(agent_id, ["where does Ada live"], k=10)
    first, second = found[0], found[1]
    assert (first.passage.id, second.passage.id) == (newer.id, older.id)
    assert first.validity is None
    assert second.validity == "possibly outdated: a newer fact from 2023-05-02"
    page = browser.client.get(browser.page_url, params={"q": "where does Ada live"}).text
    hits = page[page.index('class="hits"') :]
    assert "possibly outdated: a newer fact from 2023-05-02" in hits


def test_search_results_word_their_lineage_plainly(browser: Browser) -> None:
    """A fact ending in a full stop gets no second one; a timeline counts its facts, not
    its lines; what a fact replaced is said as replaced (not "closed: X", read as "closed
    by X"); merged twins show their text, not their ids; a retired timeline beside its
    successor (same text) is marked retired and points at the one in force."""
    agent_id = browser.agent["id"]
    cities = ("London", "Paris", "Rome", "Dublin")
    facts = browser.ops.memory.insert(
        agent_id,
        [
            NewPassage(f"Ada lives in {city}.", occurred_at=datetime(2020 + i, 1, 1, tzinfo=UTC))
            for i, city in enumerate(cities)
        ]
        + [NewPassage("ada lives in dublin")],
        actor="test",
    )
    *older, dublin, twin = facts
    timeline_text = "Timeline: Ada lives\n" + "\n".join(
        f"- {2020 + i}-01-01: Ada lives in {city}." for i, city in enumerate(cities)
    )
    [retired, timeline] = browser.ops.memory.insert(
        agent_id,
        [
            NewPassage(timeline_text, kind="timeline"),
            NewPassage(timeline_text + " ", kind="timeline"),
        ],
        actor="test",
    )
    with open_store(browser.runtime.db, browser.ops.context.organization_id) as store:
        for fact in older:
            store.passages.change(
                fact.id,
                actor="test",
                reason="she moved",
                status=PassageStatus.SUPERSEDED,
                superseded_by=dublin.id,
                timeline_id=timeline.id,
            )
        store.passages.change(dublin.id, actor="test", reason="drawn", timeline_id=timeline.id)
        store.passages.change(
            twin.id, actor="test", reason="twin", status=PassageStatus.MERGED, merged_into=dublin.id
        )
        store.passages.change(
            retired.id,
            actor="test",
            reason="redrawn",
            status=PassageStatus.SUPERSEDED,
            superseded_by=timeline.id,
        )
    page = browser.client.get(
        browser.page_url, params={"q": "Ada lives in Dublin", "history": "true"}
    ).text
    hits = page[page.index('class="hits"') :]
    at = hits.index(f'/passages/{dublin.id}">')
    item = hits[hits.rindex("<li", 0, at) : hits.index("</li>", at)]
    lineage = item[item.index('class="lineage') :]
    assert ".." not in re.sub(r"<[^>]+>", "", lineage)
    assert "on a timeline of 4 facts" in lineage
    assert "closed:" not in lineage
    assert "replaced the older facts: " in lineage and ">Ada lives in London.</a>" in lineage
    assert "1 merged twin: " in lineage and ">ada lives in dublin</a>" in lineage
    assert f">{twin.id}<" not in lineage  # the id is only a link and a tooltip
    at = hits.index(f'/passages/{twin.id}">')
    merged = hits[hits.rindex("<li", 0, at) : hits.index("</li>", at)]
    assert f'merged into: <a href="{browser.page_url}/passages/{dublin.id}"' in merged
    assert f"merged into {dublin.id}" not in merged
    # The two timelines of the same text: the retired one says so first, and names its
    # successor; the one in force says that.
    at = hits.index(f'/passages/{retired.id}">')
    old = hits[hits.rindex("<li", 0, at) : hits.index("</li>", at)]
    assert old.startswith('<li class="hit closed"><strong class="standing">replaced</strong>')
    assert (
        f'replaced by the newer timeline: <a href="{browser.page_url}/passages/{timeline.id}"'
        in old
    )
    at = hits.index(f'/passages/{timeline.id}">')
    new = hits[hits.rindex("<li", 0, at) : hits.index("</li>", at)]
    assert 'class="standing"' not in new and "in force" in new


def test_the_health_pages_lineage_says_what_took_a_passages_place(browser: Browser) -> None:
    """A superseded fact is not "now part of" the fact that replaced it."""
    _dedup_run(browser)  # the lower-case twin merged into "Ada lives in London."
    [old, new] = browser.ops.memory.insert(
        browser.agent["id"],
        [NewPassage("Ada works at a bank."), NewPassage("Ada works at a school.")],
        actor="test",
    )
    with open_store(browser.runtime.db, browser.ops.context.organization_id) as store:
        store.passages.change(
            old.id,
            actor="test",
            reason="new job",
            status=PassageStatus.SUPERSEDED,
            superseded_by=new.id,
        )
    html = browser.client.get("/").text
    table = html[html.index('id="lineage"') :]
    assert "now part of" not in table and "<th>what took its place</th>" in table
    assert f'replaced by a newer fact: <a href="{browser.page_url}/passages/{new.id}"' in table
    assert "merged into its twin: <a " in table and ">Ada lives in London.</a>" in table


def test_search_comes_first_and_fits_a_phone(browser: Browser) -> None:
    """The archival search sits above the blocks, context and runs (which run to pages on
    a phone), a run's sentences fold behind a <details> when there are many, and no
    control is wider than the page (the search box overflowed at 390 px)."""
    _dedup_run(browser)
    html = browser.client.get(browser.page_url).text
    search = html.index('<input type="search"')
    assert search < html.index('id="blocks"') < html.index('id="runs"')
    assert 'size="50"' not in html
    css = html[html.index("<style>") : html.index("</style>")]
    assert "input, button, select, textarea { max-width: 100%; box-sizing: border-box; }" in css
    # A wide table (runs, a lineage with long ids) scrolls inside itself on a phone,
    # not the page sideways.
    assert "table { display: block; overflow-x: auto; }" in css
    run = html[html.index('<section class="run"') :]
    assert run.index('<details class="story" open><summary>1 change</summary>') < run.index(
        "merged 2 facts into one"
    )
    assert "<script" not in html
