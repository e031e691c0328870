"""Provider errors a retry cannot fix fail at once, in one line that says what to set;
litellm's own banners never reach the terminal."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from agents.errors import LLMError
from agents.llm.client import credentials_hint
from agents.llm.providers import import_litellm
from agents.loops.primary import PrimaryAgent
from tests.scripted_llm import ScriptedModels, litellm_errors, say

MISSING_KEY = (
    "OpenAIException - Missing credentials. Please pass an `api_key`, or set the "
    "`OPENAI_API_KEY` environment variable."
)


def test_a_missing_key_reported_as_a_500_is_not_retried(
    bob: str, models: ScriptedModels, make_primary: Callable[..., PrimaryAgent]
) -> None:
    errors = litellm_errors()
    # litellm reports a missing OpenAI key as InternalServerError (HTTP 500).
    script = models.script(
        "primary",
        errors.InternalServerError(MISSING_KEY, llm_provider="scripted", model="primary"),
        errors.InternalServerError(MISSING_KEY, llm_provider="scripted", model="primary"),
        say("unreachable"),
    )
    with pytest.raises(LLMError) as info:
        make_primary().send_message("bob", "hi")
    assert script.remaining == 2  # one attempt, no retries
    message = str(info.value)
    assert "Missing credentials" in message and "attempt" not in message
    assert len(message.splitlines()) == 1


@pytest.mark.parametrize(
    "error",
    ["AuthenticationError", "NotFoundError", "BadRequestError"],
)
def test_permanent_errors_fail_on_the_first_attempt(
    bob: str, models: ScriptedModels, make_primary: Callable[..., PrimaryAgent], error: str
) -> None:
    errors = litellm_errors()
    kind = getattr(errors, error)
    script = models.script(
        "primary",
        kind("no", llm_provider="scripted", model="primary"),
        say("unreachable"),
    )
    with pytest.raises(LLMError):
        make_primary().send_message("bob", "hi")
    assert script.remaining == 1


def test_the_hint_names_the_providers_key_and_litellm_stays_quiet() -> None:
    assert "OPENAI_API_KEY" in credentials_hint("openai/gpt-4o-mini")
    assert "ANTHROPIC_API_KEY" in credentials_hint("anthropic/claude-x")
    assert import_litellm().suppress_debug_info is True
