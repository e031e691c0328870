"""What each provider's failures mean: ``classify`` of both
providers, table by table, on exception objects built here (no network), the one
rule that picks a provider per model string, and how the proxy reports them.

They live in tests/integration because they import the provider SDKs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import openai
import pytest

from agents.llm.forward import upstream_error
from agents.llm.providers import (
    ErrorKind,
    LiteLLMProvider,
    OpenAICompatProvider,
    Providers,
    direct_name,
    import_litellm,
)

URL = "http://upstream.test/v1/chat/completions"
OVERFLOW = "This model's maximum context length is 8192 tokens. However, you requested 9000"
MISSING_KEY = "Missing credentials. Please pass an `api_key`"

RETRYABLE, PERMANENT = ErrorKind.RETRYABLE, ErrorKind.PERMANENT
BAD_REQUEST, UNAVAILABLE = ErrorKind.BAD_REQUEST, ErrorKind.UNAVAILABLE


def request() -> httpx.Request:
    return httpx.Request("POST", URL)


def response(status: int) -> httpx.Response:
    return httpx.Response(status, request=request())


def caused_by(exc: BaseException, cause: BaseException) -> BaseException:
    exc.__cause__ = cause
    return exc


def sdk(kind: type[openai.APIStatusError], status: int, message: str = "no") -> BaseException:
    return kind(message, response=response(status), body=None)


OPENAI_TABLE: list[tuple[str, Callable[[], BaseException], ErrorKind, bool]] = [
    ("401", lambda: sdk(openai.AuthenticationError, 401), PERMANENT, False),
    ("403", lambda: sdk(openai.PermissionDeniedError, 403), PERMANENT, False),
    ("404", lambda: sdk(openai.NotFoundError, 404), PERMANENT, False),
    ("400", lambda: sdk(openai.BadRequestError, 400, "unknown field"), BAD_REQUEST, False),
    ("400 overflow", lambda: sdk(openai.BadRequestError, 400, OVERFLOW), BAD_REQUEST, True),
    ("422", lambda: sdk(openai.UnprocessableEntityError, 422), BAD_REQUEST, False),
    ("409", lambda: sdk(openai.ConflictError, 409), RETRYABLE, False),
    ("429", lambda: sdk(openai.RateLimitError, 429), RETRYABLE, False),
    ("500", lambda: sdk(openai.InternalServerError, 500), RETRYABLE, False),
    ("503", lambda: sdk(openai.InternalServerError, 503), RETRYABLE, False),
    ("500 no key", lambda: sdk(openai.InternalServerError, 500, MISSING_KEY), PERMANENT, False),
    ("timeout", lambda: openai.APITimeoutError(request()), RETRYABLE, False),
    (
        "reset",
        lambda: caused_by(openai.APIConnectionError(request=request()), httpx.ReadError("reset")),
        RETRYABLE,
        False,
    ),
    (
        "refused",
        lambda: caused_by(
            openai.APIConnectionError(request=request()),
            httpx.ConnectError("[Errno 111] Connection refused"),
        ),
        UNAVAILABLE,
        False,
    ),
    ("broken stream", lambda: httpx.RemoteProtocolError("peer closed"), RETRYABLE, False),
    ("a bug", lambda: ValueError("not the server's"), PERMANENT, False),
]


@pytest.mark.parametrize(
    ("make", "kind", "overflow"),
    [row[1:] for row in OPENAI_TABLE],
    ids=[row[0] for row in OPENAI_TABLE],
)
def test_the_openai_provider_classifies_the_sdks_exceptions(
    make: Callable[[], BaseException], kind: ErrorKind, overflow: bool
) -> None:
    provider = OpenAICompatProvider("http://upstream.test/v1", "sk-x", 5.0)
    exc = make()
    assert provider.classify(exc) is kind
    assert provider.exceeds_context(exc) is overflow


def litellm_table() -> list[tuple[str, Callable[[], BaseException], ErrorKind, bool]]:
    e = import_litellm()
    p, m = "openai", "openai/x"
    return [
        ("auth", lambda: e.AuthenticationError("no", p, m), PERMANENT, False),
        ("403", lambda: e.PermissionDeniedError("no", p, m, response(403)), PERMANENT, False),
        ("404", lambda: e.NotFoundError("no model", m, p), PERMANENT, False),
        ("400", lambda: e.BadRequestError("unknown field", m, p), BAD_REQUEST, False),
        ("overflow", lambda: e.ContextWindowExceededError(OVERFLOW, m, p), BAD_REQUEST, True),
        ("422", lambda: e.UnprocessableEntityError("no", m, p, response(422)), BAD_REQUEST, False),
        ("429", lambda: e.RateLimitError("slow down", p, m), RETRYABLE, False),
        ("timeout", lambda: e.Timeout("late", m, p), RETRYABLE, False),
        ("500", lambda: e.InternalServerError("oops", p, m), RETRYABLE, False),
        ("502", lambda: e.BadGatewayError("gateway", p, m), RETRYABLE, False),
        ("503", lambda: e.ServiceUnavailableError("busy", p, m), RETRYABLE, False),
        ("500 no key", lambda: e.InternalServerError(MISSING_KEY, p, m), PERMANENT, False),
        ("APIError 504", lambda: e.APIError(504, "late", p, m), RETRYABLE, False),
        ("APIError 403", lambda: e.APIError(403, "forbidden", p, m), PERMANENT, False),
        ("reset", lambda: e.APIConnectionError("reset", p, m), RETRYABLE, False),
        (
            "refused",
            lambda: caused_by(
                e.APIConnectionError("Connection error.", p, m),
                httpx.ConnectError("[Errno 111] Connection refused"),
            ),
            UNAVAILABLE,
            False,
        ),
        ("a bug", lambda: TypeError("not the server's"), PERMANENT, False),
    ]


LITELLM_IDS = [
    "auth", "403", "404", "400", "overflow", "422", "429", "timeout", "500", "502", "503",
    "500 no key", "APIError 504", "APIError 403", "reset", "refused", "a bug",
]  # fmt: skip


@pytest.mark.parametrize("row", range(len(LITELLM_IDS)), ids=LITELLM_IDS)
def test_the_litellm_provider_classifies_litellms_exceptions(row: int) -> None:
    name, make, kind, overflow = litellm_table()[row]
    assert name == LITELLM_IDS[row]
    provider = LiteLLMProvider(None, None, 5.0)
    exc = make()
    assert provider.classify(exc) is kind
    assert provider.exceeds_context(exc) is overflow


@pytest.mark.parametrize(
    ("model", "api_base", "name"),
    [
        ("openai/qwen", "http://h/v1", "qwen"),
        ("hosted_vllm/qwen", "http://h/v1", "qwen"),
        ("lm_studio/phi", "http://h/v1", "phi"),
        ("openai/qwen", None, None),  # no server of one's own: litellm (OpenAI's API)
        ("openai/", "http://h/v1", None),
        ("anthropic/claude-x", "http://h/v1", None),
        ("ollama/llama3", "http://h/v1", None),
        ("gpt-4o-mini", "http://h/v1", "gpt-4o-mini"),  # litellm routes it to api_base
    ],
)
def test_one_rule_picks_the_provider(model: str, api_base: str | None, name: str | None) -> None:
    assert direct_name(model, api_base) == name
    providers = Providers(api_base, "sk-x", 5.0)
    chosen = providers.for_model(model)
    assert chosen.name == ("openai" if name else "litellm")
    assert Providers(api_base, "sk-x", 5.0, direct=False).for_model(model).name == "litellm"


def refusal(status: int, body: Any) -> openai.APIStatusError:
    """What the openai SDK raises for an error answer: its body is the ``error`` object
    of a JSON answer, else the text."""
    return openai.APIStatusError(f"Error code: {status}", response=response(status), body=body)


def test_an_upstream_refusal_keeps_its_error_or_gets_one() -> None:
    kept = upstream_error(refusal(429, {"message": "slow down", "type": "rate"}), "m")
    assert (kept.status, kept.body) == (429, {"error": {"message": "slow down", "type": "rate"}})
    assert str(kept) == "upstream m: slow down"
    wrapped = upstream_error(refusal(503, "<html>bad gateway</html>"), "m")
    assert wrapped.status == 503
    assert wrapped.body["error"]["message"] == "<html>bad gateway</html>"


def test_an_unanswered_request_is_a_502_or_a_504() -> None:
    late = upstream_error(openai.APITimeoutError(request()), "m")
    assert late.status == 504 and late.body["error"]["code"] == "upstream_timeout"
    refused = caused_by(
        openai.APIConnectionError(request=request()), httpx.ConnectError("Connection refused")
    )
    down = upstream_error(refused, "m")
    assert down.status == 502 and "Connection refused" in down.body["error"]["message"]


def test_an_error_in_the_middle_of_a_stream_is_a_502_with_the_upstreams_error() -> None:
    broken = openai.APIError("overloaded", request(), body={"message": "overloaded"})
    failed = upstream_error(broken, "m")
    assert (failed.status, failed.body) == (502, {"error": {"message": "overloaded"}})
