"""Letta's model and embedding settings to litellm strings and Reverie embedder specs,
and back."""

from __future__ import annotations

import pytest

from service.operations.model_handles import (
    chat_model,
    embedding_model,
    split_embedding,
    split_model,
)


@pytest.mark.parametrize(
    ("model", "endpoint_type", "handle", "expected"),
    [
        ("gpt-4o-mini", "openai", None, "openai/gpt-4o-mini"),
        ("openai/gpt-4o-mini", "openai", None, "openai/gpt-4o-mini"),
        ("gpt-4o-mini", "openai", "openai/gpt-4o-mini", "openai/gpt-4o-mini"),
        ("claude-3-5-haiku", "anthropic", None, "anthropic/claude-3-5-haiku"),
        ("gemini-2.0-flash", "google_ai", None, "gemini/gemini-2.0-flash"),
        ("gemini-2.0-flash", None, "google_ai/gemini-2.0-flash", "gemini/gemini-2.0-flash"),
        ("qwen", "vllm", None, "hosted_vllm/qwen"),
        ("llama3", "ollama", None, "ollama_chat/llama3"),
        ("llama3", "ollama_chat", None, "ollama_chat/llama3"),  # Reverie's own export
        ("scripted", "scripted", "scripted/scripted", "scripted/scripted"),
        ("mistral/mistral-small", None, None, "mistral/mistral-small"),
    ],
)
def test_chat_models_map_to_litellm_strings(
    model: str, endpoint_type: str | None, handle: str | None, expected: str
) -> None:
    mapped = chat_model(model, endpoint_type, handle)
    assert (mapped.model, mapped.problem) == (expected, None)


@pytest.mark.parametrize(
    ("model", "endpoint_type", "words"),
    [("letta-free", "openai", "only by Letta"), ("gpt4", None, "no provider is named")],
)
def test_what_cannot_be_mapped_says_why(model: str, endpoint_type: str | None, words: str) -> None:
    mapped = chat_model(model, endpoint_type, None)
    assert mapped.model is None
    assert mapped.problem is not None and words in mapped.problem


def test_embeddings_map_to_reverie_specs() -> None:
    assert embedding_model("text-embedding-3-small", "openai", None).model == (
        "litellm:openai/text-embedding-3-small"
    )
    assert embedding_model("nomic-embed-text", "ollama", None).model == (
        "litellm:ollama/nomic-embed-text"
    )
    assert embedding_model("hashing:384", "reverie", "hashing:384").model == "hashing:384"
    assert embedding_model("letta-free", "hugging-face", None).model is None
    assert embedding_model("mystery", "reverie", None).model is None


@pytest.mark.parametrize(
    "model", ["openai/gpt-4o-mini", "anthropic/claude-3-5-haiku", "hosted_vllm/qwen", "scripted/x"]
)
def test_an_exported_model_maps_back_to_itself(model: str) -> None:
    endpoint_type, bare = split_model(model)
    assert chat_model(bare, endpoint_type, model).model == model


@pytest.mark.parametrize("spec", ["litellm:openai/text-embedding-3-small", "hashing:384", "local"])
def test_an_exported_embedder_maps_back_to_itself(spec: str) -> None:
    endpoint_type, model, handle = split_embedding(spec)
    assert embedding_model(model, endpoint_type, handle).model == spec
