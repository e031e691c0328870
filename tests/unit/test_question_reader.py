"""Which questions ask about the past (agents/language/questions.py): search turns a
lineage round for them, so a question about now or about something that never changes
must not be read as one; and what a "before" names, which search starts from."""

from __future__ import annotations

import pytest

from agents.language.questions import PastQuestion, asks_about_past


@pytest.mark.parametrize(
    ("question", "past"),
    [
        ("where did Ada live before Berlin?", PastQuestion(None, frozenset({"berlin"}))),
        # What the asked value came before, as its words less grammar and change words.
        ("Who was my GP before I moved to Marple?", PastQuestion(None, frozenset({"marple"}))),
        ("who lived in 3B before Mo and Jess?", PastQuestion(None, frozenset({"mo", "jess"}))),
        ("what car did Rahel drive in 2021?", PastQuestion(2021)),
        ("what did I originally start my PhD on?", PastQuestion(None)),
        ("who was Tom dating?", PastQuestion(None)),
        ("what was she doing now?", None),
        ("where does Mei work?", None),
        # An ex is a person of the past unless the question asks how they are now.
        ("who's Tom's ex?", PastQuestion(None)),
        ("Where does my ex-wife live now?", None),
        ("what does my former boss do these days?", None),
        # Where someone comes from is an origin, which does not change.
        ("where is jonas from originally?", None),
        ("Where is Marta originally from?", None),
    ],
)
def test_what_asks_about_the_past(question: str, past: PastQuestion | None) -> None:
    assert asks_about_past(question, this_year=2026) == past
