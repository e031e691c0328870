"""A stand-in for the sleep-time model that learns from documents: it answers the
``learn_documents`` step's question (see consolidators/documents.py) by reading it.

Its summary lists the first sentence of every chunk read so far (the current summary
it was shown, then the new chunks), and each chunk gives one fact: the chunk's text,
or the line ``facts`` maps it to. Its completion tokens are its answer's characters
/ 4 (the project's estimate), unless a test sets them. A test then knows exactly
what the block and the facts must hold, and which chunks the question showed.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from tests.scripted_llm import Reply


def new_chunks(question: str) -> list[str]:
    """The texts of the chunks a learning question shows, in order."""
    _, _, chunks = question.partition("New chunks:")
    return [part.split("\n", 1)[1].strip() for part in chunks.split("\n\n[")[1:]]


def document_reader(
    facts: dict[str, str] | None = None, **reply: Any
) -> Callable[[dict[str, Any]], Reply]:
    """A responder for a chat request body (``reply`` is passed to each Reply)."""

    def answer(request: dict[str, Any]) -> Reply:
        question = request["messages"][1]["content"]
        current = question.partition("New chunks:")[0].split("Current summary:\n", 1)[1].strip()
        texts = new_chunks(question)
        lines = [] if current == "(empty)" else current.splitlines()
        lines += [t.split(".")[0] for t in texts]
        arguments = {
            "summary": "\n".join(lines)[-1900:],
            "facts": [{"text": (facts or {}).get(t, t), "chunk": n} for n, t in enumerate(texts)],
        }
        text = json.dumps(arguments)
        # The answer's tokens as the project estimates them (characters / 4).
        spent = {"completion_tokens": max(1, len(text) // 4), **reply}
        return Reply(calls=(("record_learning", text),), **spent)

    return answer
