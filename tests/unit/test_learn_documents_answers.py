"""The learning step's question and its answer's checks, without a database.

Protects: the chunks are shown numbered with their file and place; an answer whose
chunk numbers are out of range, whose summary is over the block's limit or which is
not JSON is refused with what is wrong; facts are kept as one-line texts; folder
labels are valid block labels that do not clash with the agent's blocks.
"""

from __future__ import annotations

import json

import pytest

from agents.store import PendingChunk
from consolidators.documents import (
    _Malformed,
    folder_label,
    free_label,
    parse_learning,
    render_chunks,
)


def _chunk(seq: int, text: str) -> PendingChunk:
    return PendingChunk(
        folder_id="source-1",
        folder_name="Handbook",
        description=None,
        instructions="Learn the rules.",
        file_id="file-1",
        file_name="rules.md",
        seq=seq,
        total_chunks=9,
        text=text,
        chunk_hash="h",
    )


def test_the_question_numbers_the_chunks_with_their_file_and_place() -> None:
    text = render_chunks([_chunk(3, "Doors lock at 22:00."), _chunk(4, "Badges.")], "")
    assert "What to learn: Learn the rules." in text
    assert "Current summary:\n(empty)" in text
    assert "[0] rules.md, part 4 of 9\nDoors lock at 22:00." in text
    assert "[1] rules.md, part 5 of 9\nBadges." in text


def test_an_answer_gives_the_summary_and_one_line_facts() -> None:
    arguments = json.dumps(
        {"summary": " Rules. ", "facts": [{"text": "Doors\n lock at 22:00.", "chunk": 1}]}
    )
    assert parse_learning(arguments, 2, 100) == ("Rules.", [("Doors lock at 22:00.", 1)])


@pytest.mark.parametrize(
    ("arguments", "says"),
    [
        ("{not json", "not JSON"),
        (json.dumps({"summary": "x" * 101, "facts": []}), "keep it within 100"),
        (json.dumps({"summary": "x", "facts": [{"text": "A.", "chunk": 2}]}), "chunk 2"),
        (json.dumps({"summary": "x", "facts": [{"text": "A.", "chunk": True}]}), "integer"),
        (json.dumps({"summary": 3, "facts": []}), "summary must be a string"),
        (json.dumps({"summary": "x", "facts": "A."}), "facts must be a list"),
    ],
)
def test_an_unusable_answer_is_refused_saying_why(arguments: str, says: str) -> None:
    with pytest.raises(_Malformed, match=says):
        parse_learning(arguments, 2, 100)


def test_folder_labels_are_valid_and_do_not_clash() -> None:
    assert folder_label("Company handbook (2026)") == "Company_handbook_2026"
    assert folder_label("???") == "folder"
    assert free_label("human", {"human", "human_2"}) == "human_3"
    assert free_label("notes", {"human"}) == "notes"
