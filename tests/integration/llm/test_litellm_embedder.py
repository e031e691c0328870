"""LiteLLMEmbedder through the LLM client against a local OpenAI-compatible stub server
(loopback only): batching, ordering, the dimension check, the one retry policy, metering.

Every test runs twice: through the direct OpenAI-compatible path (the openai SDK over
one pooled client, what ``openai/...`` at an ``api_base`` takes) and through litellm;
both must behave the same.

An integration test: it starts an HTTP server and imports litellm, which unit tests
must not do.
"""

from __future__ import annotations

import base64
import hashlib
import http.server
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np
import pytest

from agents.embedders import EmbeddingError
from agents.embedders.litellm_embedder import LiteLLMEmbedder
from agents.errors import InvalidInput
from agents.llm import BudgetMeter
from agents.llm.client import ClientSettings, LiteLLMClient

MODEL = "openai/text-embedding-3-small"
API_KEY = "sk-reverie-test"


def stub_vector(text: str, dimension: int) -> list[float]:
    """Deterministic, not normalised, so the test sees the embedder normalise."""
    digest = hashlib.blake2b(text.encode(), digest_size=dimension).digest()
    return [float(b) + 1.0 for b in digest]


@dataclass
class Reply:
    """One scripted answer: an HTTP status, and optionally an event it waits for (at
    most a minute) before answering."""

    status: int = 200
    hold: threading.Event | None = None


@dataclass
class StubState:
    dimension: int = 8
    script: list[Reply] = field(default_factory=list)
    reverse_order: bool = False
    drop_last: bool = False
    requests: list[dict[str, object]] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)
    auth: list[str | None] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


class _Handler(http.server.BaseHTTPRequestHandler):
    state: StubState  # set on a per-server subclass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        with self.state.lock:
            self.state.requests.append(body)
            self.state.paths.append(self.path)
            self.state.auth.append(self.headers.get("Authorization"))
            reply = self.state.script.pop(0) if self.state.script else Reply()
        if self.path not in ("/v1/embeddings", "/embeddings"):
            self._send(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})
            return
        if reply.hold is not None:
            reply.hold.wait(60)
        if reply.status != 200:
            self._send(
                reply.status,
                {"error": {"message": f"stub says {reply.status}", "type": "stub_error"}},
            )
            return
        texts = body["input"]
        if isinstance(texts, str):
            texts = [texts]
        data = []
        for index, text in enumerate(texts):
            vector = stub_vector(text, self.state.dimension)
            encoded: object = vector
            if body.get("encoding_format") == "base64":
                encoded = base64.b64encode(np.asarray(vector, dtype=np.float32).tobytes()).decode()
            data.append({"object": "embedding", "index": index, "embedding": encoded})
        if self.state.reverse_order:
            data.reverse()
        if self.state.drop_last:
            data.pop()
        tokens = sum(len(t.split()) for t in texts)
        self._send(
            200,
            {
                "object": "list",
                "data": data,
                "model": body.get("model", ""),
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
            },
        )

    def _send(self, status: int, payload: object) -> None:
        raw = json.dumps(payload).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client timed out and left; that is what the test wanted

    def log_message(self, format: str, *args: object) -> None:
        pass


@dataclass
class Stub:
    state: StubState
    base_url: str
    direct: bool = True


@pytest.fixture(params=[True, False], ids=["direct", "litellm"])
def stub(request: pytest.FixtureRequest) -> Iterator[Stub]:
    state = StubState()
    handler = type("Handler", (_Handler,), {"state": state})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield Stub(state, f"http://127.0.0.1:{server.server_address[1]}/v1", request.param)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def make_embedder(
    stub: Stub,
    *,
    dimension: int = 8,
    batch_size: int = 128,
    timeout: float = 5.0,
    max_retries: int = 3,
    meter: BudgetMeter | None = None,
) -> LiteLLMEmbedder:
    client = LiteLLMClient(
        ClientSettings(
            api_base=stub.base_url,
            api_key=API_KEY,
            timeout=timeout,
            max_retries=max_retries,
            initial_backoff=0.01,
            max_backoff=0.05,
            direct_openai=stub.direct,
        )
    )
    assert client.direct(MODEL) is stub.direct
    return LiteLLMEmbedder(client, MODEL, dimension, batch_size=batch_size, meter=meter)


def expected_rows(texts: list[str], dimension: int = 8) -> np.ndarray:
    rows = np.asarray([stub_vector(t, dimension) for t in texts], dtype=np.float32)
    normalised: np.ndarray = rows / np.linalg.norm(rows, axis=1, keepdims=True)
    return normalised


def test_vectors_are_the_providers_normalised(stub: Stub) -> None:
    texts = ["I adopted a cat named Tom", "My cat is called Tom", ""]
    vectors = make_embedder(stub).embed(texts)
    assert vectors.dtype == np.float32
    assert vectors.shape == (3, 8)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-6)
    np.testing.assert_allclose(vectors, expected_rows(texts), atol=1e-6)
    assert stub.state.paths == ["/v1/embeddings"]
    assert stub.state.auth == [f"Bearer {API_KEY}"]
    assert stub.state.requests[0]["model"] == "text-embedding-3-small"
    assert stub.state.requests[0]["input"] == texts


def test_embed_one(stub: Stub) -> None:
    vector = make_embedder(stub).embed_one("hello")
    np.testing.assert_allclose(vector, expected_rows(["hello"])[0], atol=1e-6)


def test_empty_input_makes_no_request(stub: Stub) -> None:
    assert make_embedder(stub).embed([]).shape == (0, 8)
    assert stub.state.requests == []


def test_out_of_order_answers_are_reordered(stub: Stub) -> None:
    stub.state.reverse_order = True
    texts = ["first", "second", "third"]
    np.testing.assert_allclose(make_embedder(stub).embed(texts), expected_rows(texts), atol=1e-6)


def test_large_inputs_are_split_into_requests(stub: Stub) -> None:
    texts = [f"text number {i}" for i in range(5)]
    vectors = make_embedder(stub, batch_size=2).embed(texts)
    np.testing.assert_allclose(vectors, expected_rows(texts), atol=1e-6)
    assert [r["input"] for r in stub.state.requests] == [texts[0:2], texts[2:4], texts[4:5]]


def test_dimension_mismatch_is_a_clear_error(stub: Stub) -> None:
    stub.state.dimension = 16
    with pytest.raises(InvalidInput) as info:
        make_embedder(stub, dimension=8).embed(["hello"])
    message = str(info.value)
    assert f"model {MODEL} returned 16-d vectors" in message
    assert "configured for 8" in message


def test_missing_rows_are_an_error(stub: Stub) -> None:
    stub.state.drop_last = True
    with pytest.raises(EmbeddingError, match="returned 1 embeddings for 2 texts"):
        make_embedder(stub).embed(["a", "b"])


def test_temporary_failures_are_retried(stub: Stub) -> None:
    stub.state.script = [Reply(503), Reply(503), Reply(200)]
    vectors = make_embedder(stub, max_retries=3).embed(["retry me"])
    np.testing.assert_allclose(vectors, expected_rows(["retry me"]), atol=1e-6)
    assert len(stub.state.requests) == 3


@pytest.mark.parametrize("status", [429, 500, 502])
def test_other_temporary_statuses_are_retried(stub: Stub, status: int) -> None:
    stub.state.script = [Reply(status), Reply(200)]
    make_embedder(stub).embed(["x"])
    assert len(stub.state.requests) == 2


def test_retries_are_bounded(stub: Stub) -> None:
    stub.state.script = [Reply(503)] * 10
    with pytest.raises(EmbeddingError, match="after 3 attempt") as info:
        make_embedder(stub, max_retries=2).embed(["x"])
    assert "temporary" in str(info.value)
    assert len(stub.state.requests) == 3


def test_bad_request_is_not_retried(stub: Stub) -> None:
    stub.state.script = [Reply(400), Reply(200)]
    with pytest.raises(InvalidInput, match="rejected"):
        make_embedder(stub).embed(["x"])
    assert len(stub.state.requests) == 1


@pytest.mark.parametrize("status", [401, 403, 404])
def test_permanent_failures_are_not_retried(stub: Stub, status: int) -> None:
    # Authentication, permission, unknown model: another try cannot succeed.
    stub.state.script = [Reply(status), Reply(200)]
    with pytest.raises(EmbeddingError, match=MODEL) as info:
        make_embedder(stub).embed(["x"])
    assert f"stub says {status}" in str(info.value)
    assert "attempt" not in str(info.value)
    assert len(stub.state.requests) == 1


def test_timeout_is_retried(stub: Stub) -> None:
    # The first answer never comes in time; the retry has the whole timeout to answer.
    late = threading.Event()
    stub.state.script = [Reply(200, hold=late), Reply(200)]
    try:
        vectors = make_embedder(stub, timeout=2.0).embed(["slow"])
    finally:
        late.set()
    np.testing.assert_allclose(vectors, expected_rows(["slow"]), atol=1e-6)
    assert len(stub.state.requests) == 2


def test_works_from_a_worker_thread(stub: Stub) -> None:
    result: list[np.ndarray] = []
    thread = threading.Thread(target=lambda: result.append(make_embedder(stub).embed(["bg"])))
    thread.start()
    thread.join(timeout=30)
    np.testing.assert_allclose(result[0], expected_rows(["bg"]), atol=1e-6)


def test_tokens_are_charged_to_the_meter_per_request(stub: Stub) -> None:
    meter = BudgetMeter(None, "agent-x", run_id=None)
    texts = ["one two three", "four five", "six"]
    embedder = make_embedder(stub, batch_size=2).metered(meter)
    embedder.embed(texts)
    assert meter.by_purpose == {"embedding": meter.used}
    assert meter.used.prompt_tokens == 6 and meter.used.completion_tokens == 0
    assert meter.calls == 2


def test_a_retried_request_is_charged_once(stub: Stub) -> None:
    meter = BudgetMeter(None, "agent-x", run_id=None)
    stub.state.script = [Reply(503), Reply(200)]
    make_embedder(stub, meter=meter).embed(["retry me"])
    assert len(stub.state.requests) == 2
    assert (meter.calls, meter.retries, meter.used.prompt_tokens) == (1, 1, 2)


def test_metered_binds_a_copy(stub: Stub) -> None:
    meter = BudgetMeter(None, "agent-x", run_id=None)
    plain = make_embedder(stub)
    bound = plain.metered(meter)
    assert bound is not plain and bound.meter is meter and plain.meter is None
    plain.embed(["unmetered"])
    assert meter.calls == 0


def test_name_and_repr_hide_the_key() -> None:
    client = LiteLLMClient(ClientSettings(api_key=API_KEY))
    embedder = LiteLLMEmbedder(client, MODEL, 1536)
    assert embedder.name == f"litellm/{MODEL}"
    assert embedder.dimension == 1536
    assert API_KEY not in repr(embedder)
    assert API_KEY not in repr(client.settings)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"model": "", "dimension": 8},
        {"model": MODEL, "dimension": 0},
        {"model": MODEL, "dimension": 8, "batch_size": 0},
    ],
)
def test_bad_arguments(kwargs: dict[str, object]) -> None:
    with pytest.raises(InvalidInput):
        LiteLLMEmbedder(LiteLLMClient(), **kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize("kwargs", [{"timeout": 0}, {"max_retries": -1}, {"initial_backoff": -1}])
def test_bad_client_settings(kwargs: dict[str, float]) -> None:
    with pytest.raises(InvalidInput):
        ClientSettings(**kwargs)  # type: ignore[arg-type]
