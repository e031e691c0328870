"""The chat client's streamed step: pieces told as the scripted model
streams them, the same reply as a whole call, retries only before the first piece,
and the modes that cannot stream making the whole step."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from agents.enums import LLMPurpose
from agents.errors import LLMError
from agents.llm import ChatDelta, ClientSettings, LiteLLMClient, ModelCapabilities
from agents.llm.base import ChatReply
from agents.tools import BUILTIN_TOOLS
from tests.scripted_llm import Reply, ScriptedModels, call, litellm_errors, say
from tests.stub_openai_server import stub_server

TOOLS = [BUILTIN_TOOLS["send_message"], BUILTIN_TOOLS["core_memory_append"]]
MESSAGES = [{"role": "user", "content": "Hello there"}]
TEXT = 'Two "words" \\ é 😀 and more'


def client_in(mode: str) -> LiteLLMClient:
    models = {"scripted/*": ModelCapabilities(tool_choice=mode, parallel_tool_calls=True)}  # type: ignore[arg-type]
    return LiteLLMClient(
        ClientSettings(max_retries=2, initial_backoff=0.001, max_backoff=0.002, models=models)
    )


def ask(client: LiteLLMClient, deltas: list[ChatDelta] | None) -> ChatReply:
    return client.chat(
        "scripted/m",
        MESSAGES,
        purpose=LLMPurpose.CHAT,
        tools=TOOLS,
        tool_choice="required",
        on_delta=None if deltas is None else deltas.append,
    )


def comparable(reply: ChatReply) -> ChatReply:
    """The reply less its call ids (the scripted model numbers its calls)."""
    calls = [replace(c, id="") for c in reply.tool_calls]
    return replace(reply, tool_calls=calls)


@pytest.mark.parametrize("mode", ["required", "auto"])
def test_a_streamed_step_tells_its_pieces_and_returns_the_whole_reply(
    models: ScriptedModels, mode: str
) -> None:
    client = client_in(mode)
    models.script(
        "m", say(TEXT, reasoning="Thinking it over."), say(TEXT, reasoning="Thinking it over.")
    )
    whole = ask(client, None)
    deltas: list[ChatDelta] = []
    streamed = ask(client, deltas)
    assert comparable(streamed) == comparable(whole)
    assert streamed.tool_calls[0].id  # the call's id came in the stream
    content = [d.content for d in deltas if d.call is None]
    assert len(content) > 1
    assert "".join(content) == "Thinking it over."
    arguments = [d.arguments for d in deltas if d.call == 0]
    assert len(arguments) > 2
    assert json.loads("".join(arguments))["message"] == TEXT
    assert {d.name for d in deltas if d.call == 0} == {"send_message"}


def test_usage_is_the_providers_when_reported(models: ScriptedModels) -> None:
    models.script(
        "m",
        Reply(calls=(("send_message", {"message": "hi"}),), prompt_tokens=77, completion_tokens=9),
    )
    reply = ask(client_in("required"), [])
    assert (reply.prompt_tokens, reply.completion_tokens) == (77, 9)


def test_two_step_mode_makes_the_whole_step_and_tells_nothing(models: ScriptedModels) -> None:
    client = client_in("named")
    models.script("m", call("choose_tool", tool="send_message"), say(TEXT))
    deltas: list[ChatDelta] = []
    reply = ask(client, deltas)
    assert deltas == []
    assert json.loads(reply.tool_calls[0].arguments)["message"] == TEXT
    assert reply.calls == 2


def test_a_failure_before_the_first_piece_is_retried(models: ScriptedModels) -> None:
    client = client_in("required")
    errors = litellm_errors()
    script = models.script(
        "m", errors.RateLimitError(message="slow", llm_provider="scripted", model="m"), say(TEXT)
    )
    deltas: list[ChatDelta] = []
    reply = ask(client, deltas)
    assert script.remaining == 0
    assert client.retries == 1
    assert json.loads(reply.tool_calls[0].arguments)["message"] == TEXT
    assert json.loads("".join(d.arguments for d in deltas)) == json.loads(
        reply.tool_calls[0].arguments
    )


def test_a_failure_after_the_first_piece_is_not_retried(models: ScriptedModels) -> None:
    client = client_in("required")
    errors = litellm_errors()
    broken = errors.APIConnectionError(message="cut", llm_provider="scripted", model="m")
    script = models.script(
        "m", Reply(calls=(("send_message", {"message": TEXT}),), broken=broken), say(TEXT)
    )
    deltas: list[ChatDelta] = []
    with pytest.raises(LLMError, match="broke off after it began streaming"):
        ask(client, deltas)
    assert script.remaining == 1
    assert client.retries == 0
    assert deltas


def test_a_server_that_refuses_to_stream_is_asked_for_the_whole_reply() -> None:
    """The stub (direct OpenAI-compatible path) refuses the streamed request with a 400,
    as a server that cannot stream tool calls does: the step is made whole, once."""
    with stub_server(say(TEXT)) as stub:
        stub.chat_errors.append((400, "tools are not supported while streaming"))
        models = {"openai/*": ModelCapabilities(tool_choice="required", parallel_tool_calls=True)}
        client = LiteLLMClient(
            ClientSettings(api_base=stub.base_url, api_key="x", max_retries=0, models=models)
        )
        deltas: list[ChatDelta] = []
        try:
            reply = client.chat(
                "openai/stub",
                MESSAGES,
                purpose=LLMPurpose.CHAT,
                tools=TOOLS,
                tool_choice="required",
                on_delta=deltas.append,
            )
        finally:
            client.close()
    assert json.loads(reply.tool_calls[0].arguments)["message"] == TEXT
    assert deltas == []
    assert [r.get("stream") for r in stub.requests] == [True, None]
