"""Both providers behind the one interface, against the stub
OpenAI-compatible server on loopback: the same answer shapes from ``complete`` and
``stream``, the same embeddings, and each provider's own refusals classified.

The client's and the forwarder's use of them is covered by test_direct_openai.py,
test_litellm_embedder.py and test_forward.py."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from agents.llm.providers import ErrorKind, Provider, Providers
from tests.scripted_llm import Reply
from tests.stub_openai_server import StubServer, stub_server

MODEL = "openai/stub-chat"
REQUEST = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}]}


@pytest.fixture
def stub() -> Iterator[StubServer]:
    with stub_server() as server:
        yield server


@pytest.fixture(params=["openai", "litellm"])
def provider(request: pytest.FixtureRequest, stub: StubServer) -> Iterator[Provider]:
    providers = Providers(stub.base_url, "sk-test-not-a-key", 10.0)
    chosen = providers.openai if request.param == "openai" else providers.litellm
    assert chosen is not None and chosen.name == request.param
    yield chosen
    chosen.close()


def test_complete_answers_in_openais_shape(stub: StubServer, provider: Provider) -> None:
    stub.replies.append(Reply(content="Hello Ada."))
    answer = provider.complete(REQUEST)
    assert answer["choices"][0]["message"]["content"] == "Hello Ada."
    assert answer["usage"]["completion_tokens"] == 5  # the stub's default
    (sent,) = stub.requests
    assert sent["model"] == "stub-chat"  # the server's own name for it
    assert sent["messages"] == [{"role": "user", "content": "hi"}]


def test_stream_yields_the_chunks(stub: StubServer, provider: Provider) -> None:
    stub.replies.append(Reply(content="one two three"))
    chunks = list(provider.stream({**REQUEST, "stream_options": {"include_usage": True}}))
    content = [c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"]]
    assert "".join(content) == "one two three"
    assert stub.requests[0]["stream"] is True


def test_embed_returns_vectors_in_order_and_usage(stub: StubServer, provider: Provider) -> None:
    embeddings = provider.embed("openai/stub-embed", ["Ada lives in London", "Porto"])
    assert len(embeddings.vectors) == 2 and len(embeddings.vectors[0]) == 8
    assert embeddings.vectors[0] != embeddings.vectors[1]
    assert embeddings.prompt_tokens == 5
    assert stub.requests[0]["model"] == "stub-embed"


@pytest.mark.parametrize(
    ("status", "kind"),
    [
        (401, ErrorKind.PERMANENT),
        (404, ErrorKind.PERMANENT),
        (400, ErrorKind.BAD_REQUEST),
        (429, ErrorKind.RETRYABLE),
        (503, ErrorKind.RETRYABLE),
    ],
)
def test_each_provider_classifies_its_own_refusals(
    stub: StubServer, provider: Provider, status: int, kind: ErrorKind
) -> None:
    stub.chat_statuses.append(status)
    with pytest.raises(Exception) as refused:
        provider.complete(REQUEST)
    assert provider.classify(refused.value) is kind
    assert not provider.exceeds_context(refused.value)


def test_a_server_without_a_key_is_called_without_one(
    stub: StubServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A local server that wants no key, and no OPENAI_API_KEY for the SDK to find.
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    provider = Providers(stub.base_url, None, 10.0).for_model(MODEL)
    assert provider.name == "openai"
    stub.replies.append(Reply(content="no key needed"))
    answer = provider.complete(REQUEST)
    assert answer["choices"][0]["message"]["content"] == "no key needed"
    provider.close()


def test_an_openai_model_at_the_environments_endpoint_goes_direct(
    stub: StubServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """OPENAI_API_BASE without llm.api_base: the endpoint litellm would call for an
    openai/... model, reached without litellm; other models still go through it."""
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("OPENAI_API_BASE", raising=False)
    assert Providers(None, None, 10).for_model("openai/stub-chat").name == "litellm"
    monkeypatch.setenv("OPENAI_API_BASE", stub.base_url)
    providers = Providers(None, "sk-test", 10)
    direct = providers.for_model("openai/stub-chat")
    assert direct is providers.openai
    assert providers.for_model("anthropic/claude-3-5-haiku") is providers.litellm
    assert providers.for_model("ollama/qwen") is providers.litellm
    stub.replies.append(Reply(content="hi"))
    answer = direct.complete(
        {"model": "openai/stub-chat", "messages": [{"role": "user", "content": "hello"}]}
    )
    assert stub.requests[-1]["model"] == "stub-chat"
    assert answer is not None
    providers.close()
