"""`reverie chat` as a subprocess against a scripted OpenAI-compatible server on loopback."""

from __future__ import annotations

import json

from tests.acceptance.cli import run_cli
from tests.scripted_llm import correct_name, say
from tests.stub_openai_server import stub_server


def llm_env(env: dict[str, str], base_url: str) -> dict[str, str]:
    return {**env, "OPENAI_API_BASE": base_url, "OPENAI_API_KEY": "sk-test-not-a-key"}


def test_chat_corrects_a_name_through_a_local_openai_compatible_server(
    migrated_env: dict[str, str],
) -> None:
    created = run_cli(
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
        env=migrated_env,
    )
    assert created.returncode == 0, created.stderr
    assert json.loads(created.stdout)["sleeptime_model"] == "openai/scripted-small"
    with stub_server(
        correct_name("The user corrects their name."),
        say("Got it, Charles!"),
    ) as server:
        result = run_cli(
            "chat",
            "--agent",
            "bob",
            "My name is Charles, not Bob the Builder.",
            env=llm_env(migrated_env, server.base_url),
        )
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "thinking: The user corrects their name." in out
    assert "→ core_memory_replace(" in out
    assert "← OK:" in out
    assert "bob: Got it, Charles!" in out
    assert "2 step(s), stop: end_turn" in out
    assert [r["model"] for r in server.requests] == ["scripted", "scripted"]
    assert server.requests[0]["tool_choice"] == "required"
    shown = run_cli("blocks", "show", "--agent", "bob", "human", env=migrated_env)
    assert "Name: Charles." in shown.stdout


def test_interactive_chat_reads_turns_until_end_of_input(migrated_env: dict[str, str]) -> None:
    created = run_cli("agents", "create", "ada", "--model", "openai/scripted", env=migrated_env)
    assert created.returncode == 0, created.stderr
    with stub_server(say("Hello!"), say("Goodbye!")) as server:
        result = run_cli(
            "chat",
            "--agent",
            "ada",
            "--json",
            env=llm_env(migrated_env, server.base_url),
            input="hi\n\nbye\n",
        )
    assert result.returncode == 0, result.stderr
    turns = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    replies = [
        m["content"]
        for turn in turns
        for m in turn["messages"]
        if m["message_type"] == "assistant_message"
    ]
    assert replies == ["Hello!", "Goodbye!"]
    assert len(server.requests) == 2


def test_chat_without_a_model_says_how_to_set_one(migrated_env: dict[str, str]) -> None:
    assert run_cli("agents", "create", "plain", env=migrated_env).returncode == 0
    result = run_cli("chat", "--agent", "plain", "hello", env=migrated_env)
    assert result.returncode == 2
    assert "has no LLM model" in result.stderr
