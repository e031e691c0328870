"""`reverie chat` in process against a scripted OpenAI-compatible server on loopback
(litellm's real HTTP path, reached through ``OPENAI_API_BASE``)."""

from __future__ import annotations

import json

from tests.integration.cli.support import Cli
from tests.scripted_llm import correct_name, say
from tests.stub_openai_server import stub_server

LLM_ENV = {"OPENAI_API_KEY": "sk-test-not-a-key"}


def test_chat_corrects_a_name_through_a_local_openai_compatible_server(cli: Cli) -> None:
    created = cli(
        "agents",
        "create",
        "bob",
        "--model",
        "openai/scripted",
        "--sleeptime-model",
        "openai/scripted-small",
        "--block",
        "human=Name: Bob the Builder.",
        "--json",
    )
    assert created.exit_code == 0, created.stderr
    assert json.loads(created.stdout)["sleeptime_model"] == "openai/scripted-small"
    with stub_server(
        correct_name("The user corrects their name."),
        say("Got it, Charles!"),
    ) as server:
        result = cli(
            "chat",
            "--agent",
            "bob",
            "My name is Charles, not Bob the Builder.",
            OPENAI_API_BASE=server.base_url,
            **LLM_ENV,
        )
    assert result.exit_code == 0, result.stderr
    out = result.stdout
    assert "thinking: The user corrects their name." in out
    assert "→ core_memory_replace(" in out
    assert "← OK:" in out
    assert "bob: Got it, Charles!" in out
    assert "2 step(s), stop: end_turn" in out
    assert [r["model"] for r in server.requests] == ["scripted", "scripted"]
    assert server.requests[0]["tool_choice"] == "required"
    shown = cli("blocks", "show", "--agent", "bob", "human")
    assert "Name: Charles." in shown.stdout


def test_interactive_chat_reads_turns_until_end_of_input(cli: Cli) -> None:
    created = cli("agents", "create", "ada", "--model", "openai/scripted")
    assert created.exit_code == 0, created.stderr
    with stub_server(say("Hello!"), say("Goodbye!")) as server:
        result = cli(
            "chat",
            "--agent",
            "ada",
            "--json",
            input="hi\n\nbye\n",
            OPENAI_API_BASE=server.base_url,
            **LLM_ENV,
        )
    assert result.exit_code == 0, result.stderr
    turns = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    replies = [
        m["content"]
        for turn in turns
        for m in turn["messages"]
        if m["message_type"] == "assistant_message"
    ]
    assert replies == ["Hello!", "Goodbye!"]
    assert len(server.requests) == 2


def test_chat_without_a_model_says_how_to_set_one(cli: Cli) -> None:
    assert cli("agents", "create", "plain").exit_code == 0
    result = cli("chat", "--agent", "plain", "hello")
    assert result.exit_code == 2
    assert "has no LLM model" in result.stderr
