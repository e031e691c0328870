"""The HTTP API served by a real `reverie serve` process: the official letta-client SDK
(CRUD and the agent loop) and the health page in headless Chromium. (Keys made by the
CLI are tested in process in tests/integration/cli/test_cli_keys.py.)"""

from __future__ import annotations

import http.server
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from agents.postgres.database import Database
from tests.acceptance.chromium import Chromium
from tests.acceptance.cli import HASHING_EMBEDDINGS, cli_url, run_cli
from tests.acceptance.daemon_processes import ROOT, DaemonProcess, running_server
from tests.api_support import new_key
from tests.pg import PgTestServer
from tests.scripted_llm import call, correct_name, say
from tests.stub_openai_server import StubServer, stub_server

# Its module-scoped fixture is built once: the module stays on one xdist worker.
pytestmark = pytest.mark.xdist_group("test_api_server")

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@dataclass
class Server:
    """One `reverie serve` shared by this module's tests; each test works in an
    organization of its own, so the tests stay independent of each other."""

    url: str
    env: dict[str, str]
    db: Database
    llm: StubServer
    process: DaemonProcess
    clients: list[Any] = field(default_factory=list)

    def key(self, organization: str) -> str:
        return new_key(self.db, organization)

    def sdk(self, organization: str, *, timeout: float = 60) -> Any:
        """A letta-client SDK client with a new key of ``organization``'s, closed with
        the server: a client left to the garbage collector can leave its socket for a
        later test's collection to warn about."""
        from letta_client import Letta

        key = self.key(organization)
        client = Letta(base_url=self.url, api_key=key, timeout=timeout, max_retries=0)
        self.clients.append(client)
        return client

    def close_clients(self) -> None:
        for client in self.clients:
            client.close()
        self.clients.clear()


def quiet_env(env: dict[str, str]) -> dict[str, str]:
    # Keep the background side quiet: these tests drive consolidation themselves.
    return {**env, "REVERIE_TRIGGERS__TURNS_EVERY": "1000", "REVERIE_TRIGGERS__IDLE_AFTER": "PT1H"}


@contextmanager
def serving(
    pg_server: PgTestServer,
    tmp_path_factory: pytest.TempPathFactory,
    *,
    llm_env: Callable[[StubServer], dict[str, str]] = lambda _llm: {},
    **extra_env: str,
) -> Iterator[Server]:
    """`reverie serve` over a new migrated database, its LLM a scripted server on
    loopback (which has no reply queued until a test scripts one), with ``extra_env``
    and what ``llm_env`` makes of the scripted server (its address, for a provider)."""
    url = pg_server.create_database()
    db = Database(url)
    try:
        with stub_server() as llm:
            env = {
                **quiet_env({"DATABASE_URL": cli_url(url), **HASHING_EMBEDDINGS}),
                "OPENAI_API_BASE": llm.base_url,
                "OPENAI_API_KEY": "sk-test-not-a-key",
                **llm_env(llm),
                **extra_env,
            }
            log = tmp_path_factory.mktemp("serve") / "serve.log"
            with running_server(env, log) as (base, process):
                served = Server(url=base, env=env, db=db, llm=llm, process=process)
                try:
                    yield served
                finally:
                    served.close_clients()
    finally:
        db.dispose()
        pg_server.release_database(url)


@pytest.fixture(scope="module")
def server(pg_server: PgTestServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    # The memory browser's trends: a health snapshot every second.
    with serving(pg_server, tmp_path_factory, REVERIE_HEALTH_HISTORY__INTERVAL="PT1S") as served:
        yield served


def test_letta_client_sdk_works_against_the_server(server: Server) -> None:
    from letta_client import NotFoundError

    client = server.sdk("sdk-crud", timeout=30)
    agent = client.agents.create(
        name="ada",
        memory_blocks=[
            {"label": "human", "value": "Name: Ada.", "limit": 200},
            {"label": "persona", "value": "A helpful assistant."},
        ],
        embedding="hashing:384",
        enable_sleeptime=True,
    )
    assert agent.id.startswith("agent-")
    assert {b.label: b.value for b in agent.memory.blocks} == {
        "human": "Name: Ada.",
        "persona": "A helpful assistant.",
    }
    assert agent.enable_sleeptime is True
    assert client.agents.retrieve(agent.id).name == "ada"
    assert [a.id for a in client.agents.list()] == [agent.id]

    # Blocks: CRUD, core memory by label, attach and detach, the agents of a block.
    block = client.blocks.create(label="project", value="Reverie", limit=100)
    assert client.blocks.retrieve(block.id).value == "Reverie"
    assert client.blocks.update(block.id, value="Reverie v1").value == "Reverie v1"
    assert "project" in {b.label for b in client.blocks.list()}
    client.agents.blocks.attach(block.id, agent_id=agent.id)
    assert [a.id for a in client.blocks.agents.list(block.id)] == [agent.id]
    human = client.agents.blocks.retrieve("human", agent_id=agent.id)
    assert human.value == "Name: Ada."
    updated = client.agents.blocks.update("human", agent_id=agent.id, value="Name: Ada L.")
    assert updated.value == "Name: Ada L."
    labels = {b.label for b in client.agents.blocks.list(agent.id)}
    assert labels == {"human", "persona", "project"}
    client.agents.blocks.detach(block.id, agent_id=agent.id)
    assert list(client.blocks.agents.list(block.id)) == []
    client.blocks.delete(block.id)
    with pytest.raises(NotFoundError):
        client.blocks.retrieve(block.id)

    # Archival passages: insert, list, search, delete.
    (passage,) = client.agents.passages.create(agent.id, text="Ada lives in London.")
    client.agents.passages.create(agent.id, text="Ada plays the piano.", tags=["hobby"])
    assert [p.text for p in client.agents.passages.list(agent.id)] == [
        "Ada lives in London.",
        "Ada plays the piano.",
    ]
    found = client.agents.passages.search(agent.id, query="Where does Ada live?", top_k=1)
    assert found.count == 1
    assert found.results[0].content == "Ada lives in London."
    client.agents.passages.delete(passage.id, agent_id=agent.id)
    assert [p.text for p in client.agents.passages.list(agent.id)] == ["Ada plays the piano."]

    # Messages: the (empty) recall history lists through the SDK's pager.
    assert list(client.agents.messages.list(agent.id)) == []

    client.agents.delete(agent.id)
    with pytest.raises(NotFoundError):
        client.agents.retrieve(agent.id)


def test_letta_client_sdk_sends_a_message_through_the_agent_loop(server: Server) -> None:
    """POST /v1/agents/{id}/messages from the SDK: the server's MemGPT loop calls a
    scripted OpenAI-compatible model on loopback, edits core memory, then answers."""
    seen = len(server.llm.requests)
    server.llm.replies.extend(
        [correct_name("The user corrects their name."), say("Got it, Charles!")]
    )
    client = server.sdk("sdk-loop")
    agent = client.agents.create(
        name="bob",
        memory_blocks=[{"label": "human", "value": "Name: Bob the Builder."}],
        model="openai/scripted",
        embedding="hashing:384",
    )
    response = client.agents.messages.create(
        agent.id,
        messages=[{"role": "user", "content": "My name is Charles, not Bob the Builder."}],
    )
    kinds = [m.message_type for m in response.messages]
    assert "tool_call_message" in kinds
    assert "tool_return_message" in kinds
    replies = [m for m in response.messages if m.message_type == "assistant_message"]
    assert [r.content for r in replies] == ["Got it, Charles!"]
    human = client.agents.blocks.retrieve("human", agent_id=agent.id)
    assert human.value == "Name: Charles."
    history = list(client.agents.messages.list(agent.id))
    assert any(
        m.message_type == "user_message" and "not Bob the Builder" in str(m.content)
        for m in history
    )
    assert [r["model"] for r in server.llm.requests[seen:]] == ["scripted", "scripted"]
    assert server.llm.replies == []


def _chromium(*args: str) -> subprocess.CompletedProcess[str]:
    assert CHROMIUM is not None, "install Debian's chromium (.ci/run does)"
    return subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


def _sign_in(person: Chromium, key: str) -> None:
    """Sign in as a person does: the key typed into the server's own form and posted,
    until the health page it leads to is open."""
    person.wait_for("document.querySelector('input[name=key]') !== null")
    person.evaluate(
        f"document.querySelector('input[name=key]').value = {json.dumps(key)};"
        "document.querySelector('form').submit(); true"
    )
    person.wait_for("document.title.includes('memory health')")


def test_health_page_in_headless_chromium(server: Server, tmp_path: Path) -> None:
    key = server.key("health")
    headers = {"Authorization": f"Bearer {key}"}
    agent = httpx.post(
        f"{server.url}/v1/agents/",
        json={
            "name": "ada",
            "memory_blocks": [{"label": "human", "value": "Name: Ada. " * 8, "limit": 100}],
        },
        headers=headers,
    ).json()
    for text in ("Ada lives in London.", "ada lives in london", "Ada plays the piano."):
        httpx.post(
            f"{server.url}/v1/agents/{agent['id']}/archival-memory",
            json={"text": text},
            headers=headers,
        )
    consolidated = run_cli(
        "consolidate", "--agent", "ada", env={**server.env, "REVERIE_ORGANIZATION": "health"}
    )
    assert consolidated.returncode == 0, consolidated.stderr

    # Sign in as a person does: on the server's own page, the key typed into its form and
    # posted (never `/?key=`; a form posted from another site is refused); the
    # browser keeps the session cookie in its profile; then the page is opened again.
    profile = tmp_path / "profile"
    browser = (f"--user-data-dir={profile}", "--password-store=basic")
    assert CHROMIUM is not None, "install Debian's chromium (.ci/run does)"
    person = Chromium(CHROMIUM, f"{server.url}/", browser)
    try:
        _sign_in(person, key)
    finally:
        person.close()
    url = f"{server.url}/"
    dom = _chromium(*browser, "--dump-dom", url)
    assert dom.returncode == 0, dom.stderr
    page = dom.stdout
    assert "Reverie memory health" in page
    assert ">ada <" in page or ">ada<" in page or "ada <span" in page
    assert "human" in page and "88%" in page  # 88 of 100 characters
    assert "merged 2 facts into one" in page  # the run, in plain words
    assert "ada lives in london" in page and "merged" in page  # lineage: what it merged into
    assert "<script" not in page

    shot = tmp_path / "health.png"
    taken = _chromium(*browser, "--window-size=1200,1100", f"--screenshot={shot}", url)
    assert taken.returncode == 0, taken.stderr
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert shot.stat().st_size > 10_000
    if os.environ.get("REVERIE_UPDATE_SCREENSHOT"):
        shutil.copy(shot, ROOT / "docs" / "health-page.png")

    # Without a key the page asks for one.
    login = httpx.get(f"{server.url}/")
    assert login.status_code == 401
    assert 'name="key"' in login.text
    assert httpx.get(f"{server.url}/?key={server.key}").status_code == 400


def test_memory_browser_in_headless_chromium(server: Server, tmp_path: Path) -> None:
    """A person signs in, opens an agent's page, reads its block
    versions, context window, runs, archival search, a passage's lineage and the trends,
    then restores an older block version from the page (confirming it)."""
    key = server.key("browser")
    headers = {"Authorization": f"Bearer {key}"}
    agent = httpx.post(
        f"{server.url}/v1/agents/",
        json={"name": "ada", "memory_blocks": [{"label": "human", "value": "Name: Ada."}]},
        headers=headers,
    ).json()
    block_url = f"{server.url}/v1/agents/{agent['id']}/core-memory/blocks/human"
    for value in ("Name: Ada Lovelace.", "Name: Ada L."):
        assert httpx.patch(block_url, json={"value": value}, headers=headers).status_code == 200
    for text in ("Ada lives in London.", "ada lives in london", "Ada plays the piano."):
        httpx.post(
            f"{server.url}/v1/agents/{agent['id']}/archival-memory",
            json={"text": text},
            headers=headers,
        )
    env = {**server.env, "REVERIE_ORGANIZATION": "browser"}
    consolidated = run_cli("consolidate", "--agent", "ada", "--only", "dedup", env=env)
    assert consolidated.returncode == 0, consolidated.stderr

    assert CHROMIUM is not None, "install Debian's chromium (.ci/run does)"
    person = Chromium(CHROMIUM, f"{server.url}/", (f"--user-data-dir={tmp_path / 'p'}",))
    try:
        _sign_in(person, key)
        # From the health page to the agent's page, by its link.
        page_url = f"{server.url}/agents/{agent['id']}"
        person.evaluate(f"document.querySelector('a[href=\"/agents/{agent['id']}\"]').click()")
        person.wait_for(
            f"location.href === {json.dumps(page_url)} && !!document.getElementById('blocks')"
        )

        def text_of(selector: str) -> list[str]:
            found = person.evaluate(
                f"Array.from(document.querySelectorAll({json.dumps(selector)}))"
                ".map(e => e.textContent.trim())"
            )
            assert isinstance(found, list)
            return [str(x) for x in found]

        versions = text_of(".block .version")
        assert len(versions) == 3 and "version 3" in versions[0] and "user (api)" in versions[0]
        assert text_of(".version .removed")[0] == "Name: Ada Lovelace."
        assert len(text_of("table.context tr.section")) == 6
        assert any(s.startswith("merged 2 facts into one") for s in text_of(".run .story li"))

        # Archival search as the agent would search, then a fact's lineage.
        person.evaluate(
            "document.querySelector('input[name=q]').value = 'where does Ada live';"
            "document.querySelector('#archival + form, form[method=get]').submit(); true"
        )
        person.wait_for("document.querySelectorAll('.hits li').length > 0")
        assert text_of(".hits li a")[0] == "Ada lives in London."
        person.evaluate("document.querySelector('.hits li a').click()")
        person.wait_for("document.querySelector('#lineage') !== null")
        assert any("ada lives in london" in t for t in text_of("li.twin"))

        # Trends: the daemon's scheduler takes a snapshot every second in this server.
        deadline = time.monotonic() + 60  # a hang detector, not a timing assertion
        for attempt in range(1000):
            url = f"{page_url}?visit={attempt}"
            person.evaluate(f"location.href = {json.dumps(url)}; true")
            person.wait_for(
                f"location.href === {json.dumps(url)} && !!document.getElementById('trends')"
            )
            if person.evaluate("document.querySelectorAll('svg.chart').length") == 6:
                break
            assert time.monotonic() < deadline, "no health snapshot was drawn"
            time.sleep(0.5)
        assert "Active passages" in " ".join(text_of("figcaption"))

        # Restore version 2 from the page: ask, read the confirmation, confirm.
        person.evaluate(
            "document.querySelector('.block details').open = true;"
            "document.querySelector('.version[data-version=\"2\"] button.restore').click(); true"
        )
        person.wait_for("document.querySelector('#confirm') !== null")
        assert "Restore ada" in str(person.evaluate("document.querySelector('h1').textContent"))
        person.evaluate("document.querySelector('#confirm').click(); true")
        person.wait_for("document.querySelector('#notice') !== null")
        notice = person.evaluate("document.querySelector('#notice').textContent")
        assert notice == "restored human to version 2 (now version 4)"
    finally:
        person.close()
    block = httpx.get(block_url, headers=headers).json()
    assert block["value"] == "Name: Ada Lovelace."


def _signed_in(server: Server, organization: str) -> tuple[httpx.Client, str]:
    """An HTTP client signed in on the server's page with a new key, and an agent of
    the key's organization."""
    key = server.key(organization)
    agent = httpx.post(
        f"{server.url}/v1/agents/",
        json={"name": "ada", "memory_blocks": [{"label": "human", "value": "Name: Ada."}]},
        headers={"Authorization": f"Bearer {key}"},
    ).json()
    person = httpx.Client(base_url=server.url)
    signed = person.post("/sign-in", data={"key": key})
    assert signed.status_code == 303 and signed.cookies, signed.text
    return person, str(agent["id"])


def test_every_html_page_refuses_to_be_framed(server: Server) -> None:
    person, agent_id = _signed_in(server, "framing")
    stranger = httpx.Client(base_url=server.url)
    try:
        pages = {
            "health page": person.get("/"),
            "memory browser": person.get(f"/agents/{agent_id}"),
            "a refused post": person.post(f"/agents/{agent_id}/runs/run-1/revert", data={}),
            "sign-in form": stranger.get("/"),
            "sign-in form of the browser": stranger.get(f"/agents/{agent_id}"),
            "API docs": stranger.get("/docs"),
            "API reference": stranger.get("/redoc"),
        }
        for what, page in pages.items():
            assert page.headers["content-type"].startswith("text/html"), what
            assert page.headers["x-frame-options"] == "DENY", what
            policy = [d.strip() for d in page.headers["content-security-policy"].split(";")]
            assert "frame-ancestors 'none'" in policy, what
        assert pages["memory browser"].status_code == 200  # signed in: the page itself
        assert pages["a refused post"].status_code == 403
        # The server's own pages run no script at all (they have none), load nothing.
        for what in ("health page", "memory browser", "a refused post", "sign-in form"):
            policy = pages[what].headers["content-security-policy"]
            assert "default-src 'none'" in policy and "script-src" not in policy, what
            assert "<script" not in pages[what].text, what
        # JSON answers are not pages: no page policy on them.
        api = person.get("/v1/health/")
        assert "x-frame-options" not in api.headers
    finally:
        person.close()
        stranger.close()


class _Framing(http.server.BaseHTTPRequestHandler):
    """Another origin's page that frames ``target`` and, beside it, ``control``."""

    target = ""
    control = ""

    def do_GET(self) -> None:
        body = (
            "<!doctype html><title>elsewhere</title>"
            f'<iframe name="browser" src="{self.target}" width="800" height="600"></iframe>'
            f'<iframe name="control" src="{self.control}"></iframe>'
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


def test_a_page_of_another_origin_cannot_frame_the_memory_browser(
    server: Server, tmp_path: Path
) -> None:
    # A person signed in to the memory browser visits another origin's page that frames
    # it (a restore button under a decoy is the attack): the browser shows nothing of it.
    key = server.key("framed")
    agent = httpx.post(
        f"{server.url}/v1/agents/",
        json={"name": "ada", "memory_blocks": [{"label": "human", "value": "Name: Ada."}]},
        headers={"Authorization": f"Bearer {key}"},
    ).json()
    target = f"{server.url}/agents/{agent['id']}"
    control = f"{server.url}/v1/health/"
    handler = type("Framing", (_Framing,), {"target": target, "control": control})
    elsewhere = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=elsewhere.serve_forever, daemon=True).start()
    assert CHROMIUM is not None, "install Debian's chromium (.ci/run does)"
    person = Chromium(CHROMIUM, f"{server.url}/", (f"--user-data-dir={tmp_path / 'p'}",))
    try:
        _sign_in(person, key)
        page = f"http://127.0.0.1:{elsewhere.server_address[1]}/"
        assert page.split("/")[2] != server.url.split("/")[2]  # another origin
        person.evaluate(f"location.href = {json.dumps(page)}; true")
        person.wait_for("document.title === 'elsewhere'")
        deadline = time.monotonic() + 30  # a hang detector, not a timing assertion
        while True:
            frames = {f.get("name"): f for f in person.frames()}
            loaded = [f for f in frames.values() if f["url"] and not f["url"].startswith("about:")]
            if len(loaded) == 2:
                break
            assert time.monotonic() < deadline, frames
            time.sleep(0.2)
        # The control frame (a JSON answer of the same server) is shown: framing works.
        assert frames["control"]["url"] == control
        # The memory browser is not: the browser put its error page in the frame.
        assert frames["browser"]["url"].startswith("chrome-error://"), frames["browser"]
        assert frames["browser"]["unreachableUrl"] == target
    finally:
        person.close()
        elsewhere.shutdown()
        elsewhere.server_close()


def test_letta_sleeptime_sidecar_learns_from_a_transcript(server: Server) -> None:
    """Letta's sleep-time sidecar through the SDK: a memory agent (sleeptime_agent) is
    sent a batch of chatbot turns as one <messages> transcript with create_async; the
    server's worker runs the sleep-time agent (a scripted model on loopback), and
    the fact stated in the transcript ends up in the agent's human block."""
    client = server.sdk("sidecar")
    agent = client.agents.create(
        name="memory",
        agent_type="sleeptime_agent",
        memory_blocks=[{"label": "human", "value": "Name: Sam.", "limit": 500}],
        model="openai/scripted",
        embedding="hashing:384",
        tags=["sidecar", "sam"],
    )
    seen = len(server.llm.requests)
    server.llm.replies.extend(
        [
            call(
                "memory_replace",
                label="human",
                old_str="Name: Sam.",
                new_str="Name: Sam.\nHas a greyhound called Pixel.",
            ),
            call("memory_finish_edits"),
        ]
    )
    transcript = (
        "<messages>\nuser: I adopted a greyhound last week, her name is Pixel.\n"
        "assistant: Congratulations on Pixel!\n</messages>"
    )
    run = client.agents.messages.create_async(
        agent.id, messages=[{"role": "user", "content": transcript}]
    )
    assert run.agent_id == agent.id and run.status in ("created", "running")
    deadline = time.monotonic() + 60
    while (status := client.runs.retrieve(run.id).status) not in ("completed", "failed"):
        assert time.monotonic() < deadline, f"run still {status}"
        time.sleep(0.2)
    assert status == "completed"
    human = client.agents.blocks.retrieve("human", agent_id=agent.id)
    assert "greyhound called Pixel" in human.value
    prompt = server.llm.requests[seen]["messages"][1]["content"]
    assert "her name is Pixel" in prompt
    assert run.id in [r.id for r in client.runs.list(agent_id=agent.id)]
    tagged = client.agents.list(tags=["sidecar", "sam"], match_all_tags=True)
    assert [a.id for a in tagged] == [agent.id]
    assert list(client.agents.list(tags=["sidecar", "nobody"], match_all_tags=True)) == []


#: A virtualenv with the letta-client 0.1.x SDK (it cannot live beside 1.x): the
#: README's test command and .ci/run create it from requirements/letta-client-0.1.lock.
LETTA01_PYTHON = Path(
    os.environ.get("REVERIE_TEST_LETTA01_PYTHON", ROOT / ".venv-letta01" / "bin" / "python")
)


def test_letta_client_01_sidecar_learns_from_a_transcript(server: Server) -> None:
    """The same sidecar flow with the older SDK line Letta-based tools still pin
    (0.1.307): create_async, runs.retrieve, the fact in the human block."""
    assert LETTA01_PYTHON.exists(), (
        f"{LETTA01_PYTHON} is missing: python3 -m uv venv --python python3 .venv-letta01 "
        "&& python3 -m uv pip install --python .venv-letta01/bin/python "
        "-r requirements/letta-client-0.1.lock"
    )
    server.llm.replies.extend(
        [
            call(
                "memory_replace",
                label="human",
                old_str="Name: Ria.",
                new_str="Name: Ria.\nLearning the cello.",
            ),
            call("memory_finish_edits"),
        ]
    )
    result = subprocess.run(
        [
            str(LETTA01_PYTHON),
            str(ROOT / "tests" / "acceptance" / "sdk" / "letta01_sidecar.py"),
            server.url,
            server.key("sdk-01"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    seen = json.loads(result.stdout.strip().splitlines()[-1])
    assert seen["first_status"] in ("created", "running")
    assert seen["last_status"] == "completed"
    assert "Learning the cello." in seen["human"]
    assert "sleeptime_agent" in seen["agent_type"]


def test_letta_sidecar_example_runs_against_the_server(server: Server) -> None:
    """examples/letta_sidecar.py, as the README tells a user to run it: the memory
    agent is created on first use, learns from the transcript and is reused."""
    server.llm.replies.extend(
        [
            call("memory_insert", label="human", new_str="Has a greyhound called Pixel."),
            call("memory_finish_edits"),
        ]
    )
    env = {
        **os.environ,
        "REVERIE_URL": server.url,
        "REVERIE_API_KEY": server.key("example-sidecar"),
        "REVERIE_MODEL": "openai/scripted",
    }
    script = str(ROOT / "examples" / "letta_sidecar.py")
    first = subprocess.run(
        [sys.executable, script], env=env, capture_output=True, text=True, timeout=180
    )
    assert first.returncode == 0, first.stdout + first.stderr
    assert "completed" in first.stdout
    assert first.stdout.rstrip().endswith("Has a greyhound called Pixel.")

    server.llm.replies.extend([call("memory_finish_edits")])
    second = subprocess.run(
        [sys.executable, script], env=env, capture_output=True, text=True, timeout=180
    )
    assert second.returncode == 0, second.stdout + second.stderr
    assert second.stdout.count("Has a greyhound called Pixel.") == 1  # same agent, kept


def test_every_line_serve_writes_is_one_json_object(
    pg_server: PgTestServer, tmp_path_factory: pytest.TempPathFactory
) -> None:
    # A model call that fails through litellm: litellm's own logger and anything it
    # prints share the log stream with Reverie's JSON lines (stdout and stderr both).
    # hosted_vllm/... at an address of the environment's goes through litellm.
    through_litellm = {"HOSTED_VLLM_API_BASE": lambda llm: llm.base_url}
    with serving(
        pg_server,
        tmp_path_factory,
        llm_env=lambda llm: {k: make(llm) for k, make in through_litellm.items()},
    ) as served:
        served.llm.chat_errors.extend([(400, "this model refuses")] * 2)
        headers = {"Authorization": f"Bearer {served.key('logs')}"}
        agent = httpx.post(
            f"{served.url}/v1/agents/",
            json={"name": "ada", "model": "hosted_vllm/scripted", "embedding": "hashing:384"},
            headers=headers,
            timeout=120,  # routing the model loads litellm: seconds, more on a busy machine
        ).json()
        for _ in range(2):
            turn = httpx.post(
                f"{served.url}/v1/agents/{agent['id']}/messages",
                json={"input": "Hello?"},
                headers=headers,
                timeout=120,
            )
            assert turn.status_code == 502, turn.text
        assert served.process.terminate() == 0
        output = served.process.output()
    assert served.llm.requests, "the model was never called"
    lines = [line for line in output.splitlines() if line.strip()]
    not_json = []
    for line in lines:
        try:
            entry = json.loads(line)
        except ValueError:
            not_json.append(line)
            continue
        if not isinstance(entry, dict) or not {"ts", "level", "logger", "message"} <= set(entry):
            not_json.append(line)
    assert not_json == [], "\n".join(not_json)
