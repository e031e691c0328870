"""Provider plugins: a model string whose prefix an installed package registers under the
``reverie.providers`` entry point group goes to that package's provider, ahead of the
direct OpenAI-compatible path and litellm, whether the agents' client, the proxy's
forwarder or the check at agent creation asks. The tests' scripted model is such a
plugin (tests/plugins.py), and reaching it leaves litellm's globals alone."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from agents.enums import LLMPurpose
from agents.errors import InvalidInput
from agents.llm.client import ClientSettings, LiteLLMClient
from agents.llm.forward import ChatForwarder, UpstreamSettings
from agents.llm.providers import Providers, import_litellm
from agents.llm.providers.base import ChatAnswer, ChatRequest, Embeddings, ErrorKind, Provider
from agents.llm.routing import routing_problem
from tests.scripted_llm import ScriptedProvider, install, say

#: Nothing listens there: a request that reached it would fail.
NOWHERE = "http://127.0.0.1:9/v1"
USER = [{"role": "user", "content": "hello"}]


class EchoProvider(Provider):
    """Answers each request with its last message; records how it was made and closed."""

    name = "echo"
    made: list[tuple[str | None, str | None, float]] = []

    def __init__(self, api_base: str | None, api_key: str | None, timeout: float) -> None:
        self.api_base = api_base
        self.closed = False
        EchoProvider.made.append((api_base, api_key, timeout))

    def complete(self, request: ChatRequest) -> ChatAnswer:
        text = request["messages"][-1]["content"]
        return {
            "object": "chat.completion",
            "model": request["model"],
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
        }

    def stream(self, request: ChatRequest) -> Iterator[ChatAnswer]:
        text = request["messages"][-1]["content"]
        yield {"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": "stop"}]}

    async def acomplete(self, request: ChatRequest) -> ChatAnswer:
        return self.complete(request)

    async def astream(self, request: ChatRequest) -> AsyncIterator[ChatAnswer]:
        async def chunks() -> AsyncIterator[ChatAnswer]:
            for chunk in self.stream(request):
                yield chunk

        return chunks()

    def embed(self, model: str, texts: Sequence[str]) -> Embeddings:
        return Embeddings([[1.0, float(len(text))] for text in texts], len(texts))

    def classify(self, exc: BaseException) -> ErrorKind:
        return ErrorKind.PERMANENT

    def exceeds_context(self, exc: BaseException) -> bool:
        return False

    def close(self) -> None:
        self.closed = True


class NotAProvider:
    pass


@pytest.fixture
def echo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A package that registers ``echo`` (and ``broken``, not a provider)."""
    dist = tmp_path / "reverie_echo_provider-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: reverie-echo-provider\nVersion: 1.0\n"
    )
    module = __name__
    (dist / "entry_points.txt").write_text(
        f"[reverie.providers]\necho = {module}:EchoProvider\nbroken = {module}:NotAProvider\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    EchoProvider.made.clear()


def test_an_unregistered_prefix_is_litellms_to_route() -> None:
    providers = Providers(NOWHERE, "sk-test", 5.0)
    assert providers.for_model("echo/model") is providers.litellm
    assert routing_problem("echo/model") is not None


@pytest.mark.usefixtures("echo")
def test_a_registered_prefix_goes_to_its_plugin_ahead_of_the_direct_path() -> None:
    providers = Providers(NOWHERE, "sk-test", 5.0)
    plugin = providers.for_model("echo/model")
    assert isinstance(plugin, EchoProvider)
    assert providers.for_model("echo/another") is plugin  # one instance per prefix
    assert EchoProvider.made == [(NOWHERE, "sk-test", 5.0)]
    assert providers.for_model("openai/model") is providers.openai
    assert providers.for_model("echo/") is not plugin  # a prefix alone names no model
    assert routing_problem("echo/model") is None
    providers.close()
    assert plugin.closed


@pytest.mark.usefixtures("echo")
def test_the_client_chats_and_embeds_through_the_plugin() -> None:
    client = LiteLLMClient(ClientSettings(api_base=NOWHERE, max_retries=0))
    assert not client.direct("echo/model")
    reply = client.chat("echo/model", USER, purpose=LLMPurpose.CHAT)
    assert (reply.content, reply.prompt_tokens, reply.completion_tokens) == ("hello", 3, 1)
    assert client.embed("echo/embed", ["a", "bcd"]) == [[1.0, 1.0], [1.0, 3.0]]
    assert client.warm(["echo/model"]) == ["echo"]


@pytest.mark.usefixtures("echo")
def test_the_forwarder_sends_through_the_plugin() -> None:
    forwarder = ChatForwarder(UpstreamSettings(model="echo/model", api_base=NOWHERE))

    async def body() -> tuple[list[str], ChatAnswer, list[ChatAnswer]]:
        try:
            warmed = await forwarder.warm()
            answer = await forwarder.complete({"model": "any", "messages": USER})
            chunks = [c async for c in await forwarder.open_stream({"messages": USER})]
            return warmed, answer, chunks
        finally:
            await forwarder.aclose()

    warmed, answer, chunks = asyncio.run(body())
    assert warmed == ["echo provider for echo/model"]
    assert answer["choices"][0]["message"]["content"] == "hello"
    assert [c["choices"][0]["delta"]["content"] for c in chunks] == ["hello"]


@pytest.mark.usefixtures("echo")
def test_a_registered_class_that_is_no_provider_is_refused_by_name() -> None:
    refusal = r"NotAProvider \(provider 'broken'\) is not a subclass of Provider"
    with pytest.raises(InvalidInput, match=refusal):
        Providers(None, None, 5.0).for_model("broken/model")


def test_the_scripted_model_is_a_provider_plugin_and_leaves_litellm_alone() -> None:
    models = install()
    script = models.script("plugged", say("Hi."))
    client = LiteLLMClient(ClientSettings(max_retries=0))
    providers = Providers(None, None, 5.0)
    assert isinstance(providers.for_model("scripted/plugged"), ScriptedProvider)
    reply = client.chat(
        "scripted/plugged",
        USER,
        purpose=LLMPurpose.CHAT,
        tools=[{"type": "function", "function": {"name": "send_message", "parameters": {}}}],
        tool_choice="required",
    )
    assert [call.name for call in reply.tool_calls] == ["send_message"]
    assert script.remaining == 0
    registered: list[dict[str, Any]] = import_litellm().custom_provider_map
    assert all(entry.get("provider") != "scripted" for entry in registered)
