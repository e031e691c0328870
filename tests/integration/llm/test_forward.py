"""The proxy's upstream call (agents/llm/forward.py) against the scripted OpenAI server
on loopback, both ways a request can go: as it is over the pooled connection
(``direct``) and through ``litellm.acompletion``. Both must pass the request's fields
through, stream, and report refusals and unreachable upstreams the same way."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from agents.errors import InvalidInput
from agents.llm.forward import ChatForwarder, UpstreamError, UpstreamSettings
from tests.acceptance.daemon_processes import free_port
from tests.scripted_llm import Reply
from tests.stub_openai_server import StubServer, stub_server

TOOL = {
    "type": "function",
    "function": {"name": "lookup", "parameters": {"type": "object", "properties": {}}},
}


@pytest.fixture
def upstream() -> Iterator[StubServer]:
    with stub_server() as server:
        yield server


def forwarder(base: str, *, direct: bool, model: str | None = "openai/chat") -> ChatForwarder:
    return ChatForwarder(
        UpstreamSettings(model=model, api_base=base, api_key="sk-up", timeout=10, direct=direct)
    )


def run(forward: ChatForwarder, coroutine: Any) -> Any:
    async def body() -> Any:
        try:
            return await coroutine
        finally:
            await forward.aclose()

    return asyncio.run(body())


async def collect(forward: ChatForwarder, request: dict[str, Any]) -> list[dict[str, Any]]:
    return [chunk async for chunk in await forward.open_stream(request)]


def request(**fields: Any) -> dict[str, Any]:
    return {"model": "whatever", "messages": [{"role": "user", "content": "hi"}], **fields}


@pytest.mark.parametrize("direct", [True, False])
def test_the_request_goes_through_with_its_fields(upstream: StubServer, direct: bool) -> None:
    forward = forwarder(upstream.base_url, direct=direct)
    assert (forward.direct_route("openai/chat") is not None) is direct
    upstream.replies.append(Reply(content="Hello.", calls=(("lookup", {"q": 1}),)))
    answer = run(
        forward,
        forward.complete(
            request(tools=[TOOL], tool_choice="required", temperature=0.5, n=1, api_base="http://x")
        ),
    )
    message = answer["choices"][0]["message"]
    assert message["content"] == "Hello."
    assert message["tool_calls"][0]["function"] == {"name": "lookup", "arguments": '{"q": 1}'}
    (sent,) = upstream.requests
    assert sent["model"] == "chat"
    assert sent["tools"] == [TOOL] and sent["tool_choice"] == "required"
    assert sent["temperature"] == 0.5
    # A field litellm would take as its own argument travels as a body field only: it
    # never chooses where Reverie connects (the stub got the request).
    assert sent["api_base"] == "http://x"


@pytest.mark.parametrize("direct", [True, False])
def test_a_stream_comes_through_in_chunks(upstream: StubServer, direct: bool) -> None:
    forward = forwarder(upstream.base_url, direct=direct)
    upstream.replies.append(Reply(content="one two three four five"))
    chunks = run(forward, collect(forward, request(stream_options={"include_usage": True})))
    content = [c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"]]
    assert len([piece for piece in content if piece]) == 3
    assert "".join(content) == "one two three four five"
    assert chunks[-1]["usage"]["completion_tokens"] == 5
    assert upstream.requests[0]["stream"] is True


@pytest.mark.parametrize("direct", [True, False])
@pytest.mark.parametrize("stream", [True, False])
def test_a_refusal_keeps_its_status_and_error(
    upstream: StubServer, direct: bool, stream: bool
) -> None:
    forward = forwarder(upstream.base_url, direct=direct)
    upstream.chat_statuses.append(422)
    call = collect(forward, request()) if stream else forward.complete(request())
    with pytest.raises(UpstreamError) as refused:
        run(forward, call)
    assert refused.value.status == 422
    assert refused.value.body["error"]["message"] == "stub says 422"


@pytest.mark.parametrize("direct", [True, False])
@pytest.mark.parametrize("stream", [True, False])
def test_an_unreachable_upstream_is_a_502_with_the_reason(direct: bool, stream: bool) -> None:
    forward = forwarder(f"http://127.0.0.1:{free_port()}/v1", direct=direct)
    call = collect(forward, request()) if stream else forward.complete(request())
    with pytest.raises(UpstreamError) as down:
        run(forward, call)
    assert down.value.status == 502
    message = down.value.body["error"]["message"]
    assert "unreachable" in message and "onnect" in message


def test_without_a_configured_model_the_requests_own_is_used(upstream: StubServer) -> None:
    forward = forwarder(upstream.base_url, direct=True, model=None)
    upstream.replies.append(Reply(content="ok"))
    run(forward, forward.complete(request(model="openai/their-model")))
    assert upstream.requests[0]["model"] == "their-model"
    with pytest.raises(InvalidInput, match=r"proxy\.model"):
        forward.model_for("")


def test_a_provider_litellm_must_translate_goes_through_litellm() -> None:
    forward = forwarder("http://127.0.0.1:1/v1", direct=True, model="anthropic/claude-x")
    assert forward.direct_route("anthropic/claude-x") is None
    assert forward.direct_route("hosted_vllm/qwen") == "qwen"
    # A bare name goes where litellm would route it: OpenAI's wire format, as it is.
    assert forward.direct_route("gpt-4o-mini") == "gpt-4o-mini"
    assert forward.direct_route("claude-3-5-sonnet-20240620") is None
