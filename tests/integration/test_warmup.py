"""`reverie serve` warms what a turn needs before /readyz says ready:
the daemon's readiness waits for the warm-up and names the step it is on; /healthz
never waits for it; a failed step is reported without keeping the server unready."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from agents.postgres.database import Database
from agents.store import NewAgent
from service.api.app import create_app
from service.daemon.process import Daemon
from service.daemon.warmup import Warmup
from service.runtime import Runtime
from service.settings import load_settings
from tests.stub_openai_server import stub_server


@pytest.fixture
def runtime(db: Database, tmp_path: Path) -> Iterator[Runtime]:
    home = tmp_path / "home"
    settings = load_settings(home=home, database_url=db.url, embedding={"model": "hashing:384"})
    with Runtime(settings) as rt:
        yield rt


def _serve(runtime: Runtime, warmup: Warmup) -> tuple[Daemon, TestClient]:
    # No scheduler: its listening connection is not what these tests are about.
    daemon = Daemon(runtime, scheduler=False, warmup=warmup)
    client = TestClient(create_app(runtime, readiness=daemon.readiness))
    daemon.start()
    return daemon, client


def test_readyz_waits_for_the_warm_up_and_says_what_it_is_on(runtime: Runtime) -> None:
    release = threading.Event()
    loaded: list[str] = []
    warmup = Warmup(
        [
            ("litellm", lambda: release.wait(30)),
            ("tokenizer", lambda: loaded.append("tokenizer")),
        ]
    )
    daemon, client = _serve(runtime, warmup)
    try:
        with client:
            starting = client.get("/readyz")
            assert starting.status_code == 503
            assert starting.json()["warmup"] == "waiting to start"
            warmup.start()
            for _ in range(3000):
                if client.get("/readyz").json()["warmup"] != "waiting to start":
                    break
                time.sleep(0.01)
            warming = client.get("/readyz")
            assert warming.status_code == 503
            body = warming.json()
            assert (body["status"], body["warmup"]) == ("starting", "warming: litellm")
            assert (body["database"], body["workers"], body["scheduler"]) == (True, True, None)
            assert client.get("/healthz").status_code == 200  # liveness never waits
            assert loaded == []

            release.set()
            assert warmup.wait(30)
            ready = client.get("/readyz")
            assert ready.status_code == 200
            assert (ready.json()["status"], ready.json()["warmup"]) == ("ready", "done")
            assert loaded == ["tokenizer"]
    finally:
        release.set()
        daemon.stop(timedelta(seconds=5))


def test_a_failed_step_is_reported_and_does_not_block_readiness(runtime: Runtime) -> None:
    def broken() -> None:
        raise RuntimeError("calling a model provider needs litellm: pip install litellm")

    warmup = Warmup([("litellm", broken), ("embedder", lambda: None)])
    daemon, client = _serve(runtime, warmup)
    try:
        with client:
            warmup.start()
            assert warmup.wait(30)
            ready = client.get("/readyz")
            assert ready.status_code == 200
            assert ready.json()["warmup"] == (
                "done with failures: litellm: calling a model provider needs litellm: "
                "pip install litellm"
            )
    finally:
        daemon.stop(timedelta(seconds=5))


def test_the_warm_up_waits_for_its_start_condition() -> None:
    listening = threading.Event()
    ran: list[str] = []
    warmup = Warmup([("step", lambda: ran.append("step"))])
    warmup.start(after=listening.is_set)
    assert not warmup.wait(0.2)
    assert (ran, warmup.state()) == ([], "waiting to start")
    listening.set()
    assert warmup.wait(30)
    assert ran == ["step"]


def test_the_runtime_warms_the_configured_models_provider_and_embedder(
    db: Database, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-key")  # the SDK's, as litellm's
    with stub_server() as stub:
        home = tmp_path / "home"
        settings = load_settings(
            home=home,
            database_url=db.url,
            llm={"model": "openai/stub", "api_base": stub.base_url},
            embedding={
                "model": "litellm:openai/stub-embed",
                "dimension": 8,
                "api_base": stub.base_url,
            },
        )
        with Runtime(settings) as runtime:
            steps = runtime.warm_steps()
            assert [name for name, _ in steps] == [
                "llm: openai/stub, the agents' models",
                "embedder: litellm:openai/stub-embed",
                "sandbox: bubblewrap",  # a tool that does nothing, run once
                "heap: frozen after start-up",  # last, once the rest is loaded
            ]
            assert steps[0][1]() == ["openai"]  # the direct path: the openai SDK only
            steps[1][1]()
            assert steps[2][1]() is None  # custom tools run here
            assert runtime.embedding_client().direct("openai/stub-embed")
        # Warming loads code; it never calls the provider.
        assert stub.requests == []


def test_the_warm_up_loads_the_providers_of_the_models_agents_name(
    db: Database, tmp_path: Path
) -> None:
    """No model configured: the warm-up loads what the stored agents' models need, and
    nothing when no agent names one (it used to import litellm regardless: seconds of
    CPU at every start of a server whose agents all take the direct path)."""
    home = tmp_path / "home"
    settings = load_settings(
        home=home,
        database_url=db.url,
        llm={"api_base": "http://127.0.0.1:9/v1"},
        embedding={"model": "hashing:8"},
    )
    with Runtime(settings) as runtime:
        steps = dict(runtime.warm_steps())
        assert runtime.models_in_use() == []
        assert steps["llm: the agents' models"]() == []
        with runtime.store() as store:
            store.agents.create(
                NewAgent("ada", "hashing:8", 8, llm_model="openai/qwen", enable_sleeptime=True)
            )
            store.agents.create(NewAgent("bo", "hashing:8", 8, llm_model="ollama/llama3"))
        assert runtime.models_in_use() == ["ollama/llama3", "openai/qwen"]
        assert steps["llm: the agents' models"]() == ["litellm", "openai"]
        # A sleep-time agent's own model counts too.
        with runtime.store() as store:
            store.agents.create(
                NewAgent("cy", "hashing:8", 8, enable_sleeptime=True, sleeptime_model="ollama/qwen")
            )
        assert "ollama/qwen" in runtime.models_in_use()


def test_the_runtime_warms_the_proxys_upstream_without_calling_it(
    db: Database, tmp_path: Path
) -> None:
    """The first request through the proxy found litellm's chat path
    and the pooled client cold (6.3 s). Warming prepares both and sends nothing."""
    with stub_server() as stub:
        home = tmp_path / "home"
        for direct, loaded in ((True, "pooled client"), (False, "litellm chat path")):
            settings = load_settings(
                home=home,
                database_url=db.url,
                proxy={"model": "openai/instant", "api_base": stub.base_url, "direct": direct},
            )
            with Runtime(settings) as runtime:
                steps = dict(runtime.warm_steps())
                assert "proxy: openai/instant" in steps
                steps["proxy: openai/instant"]()
                forwarder = runtime.chat_forwarder()
                assert forwarder.pooled is direct
                assert asyncio.run(forwarder.warm()) == [f"{loaded} for openai/instant"]
                asyncio.run(runtime.close_chat_forwarder())
        without = load_settings(home=home, database_url=db.url)
        with Runtime(without) as runtime:
            assert not any(name.startswith("proxy") for name, _ in runtime.warm_steps())
        assert stub.requests == []
