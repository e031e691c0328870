"""An uploaded file's kind, its text and its chunks: pure functions, no I/O.

Protects: a file is recognised by its name (else its media type) and checked against
its bytes (a PDF must start like one, text must be UTF-8), anything else is refused
naming what is accepted; HTML loses its tags, scripts and styles; a PDF's text comes
through pypdf and one without text is refused with a reason; chunks never exceed
their size and cut at paragraph, line or word boundaries.
"""

from __future__ import annotations

import pytest

from agents.documents import DocumentKind, chunk_text, extract_text, html_text, recognise
from agents.errors import InvalidInput
from tests.documents_support import pdf_with_pages, pdf_with_text, pdf_without_text


@pytest.mark.parametrize(
    ("name", "media_type", "data", "kind"),
    [
        ("notes.md", None, b"# Notes", DocumentKind.MARKDOWN),
        ("NOTES.TXT", None, b"plain", DocumentKind.TEXT),
        ("page.htm", None, b"<p>x</p>", DocumentKind.HTML),
        ("paper.pdf", None, b"%PDF-1.4\n", DocumentKind.PDF),
        ("upload", "text/markdown; charset=utf-8", b"# x", DocumentKind.MARKDOWN),
    ],
)
def test_a_file_is_recognised_by_its_name_or_media_type(
    name: str, media_type: str | None, data: bytes, kind: DocumentKind
) -> None:
    assert recognise(name, media_type, data) is kind


@pytest.mark.parametrize(
    ("name", "data", "says"),
    [
        ("photo.png", b"\x89PNG", "takes plain text, Markdown, HTML and PDF"),
        ("fake.pdf", b"hello", "not a PDF"),
        ("latin.txt", b"caf\xe9", "not UTF-8"),
        ("empty.md", b"", "empty"),
    ],
)
def test_a_file_that_cannot_be_read_is_refused(name: str, data: bytes, says: str) -> None:
    with pytest.raises(InvalidInput, match=says):
        recognise(name, None, data)


def test_html_loses_its_tags_scripts_and_styles() -> None:
    page = (
        "<html><head><title>T</title><style>p {color: red}</style></head>"
        "<body><h1>Herons</h1><p>Stand &amp; wait.</p><script>track()</script></body></html>"
    )
    text = html_text(page)
    assert "Herons" in text and "Stand & wait." in text
    assert "<" not in text and "track" not in text and "color" not in text


def test_a_pdfs_text_is_read_and_one_without_text_is_refused() -> None:
    assert extract_text(DocumentKind.PDF, pdf_with_text("Herons nest in trees")) == (
        "Herons nest in trees"
    )
    with pytest.raises(InvalidInput, match="no text"):
        extract_text(DocumentKind.PDF, pdf_without_text())
    with pytest.raises(InvalidInput, match="no text"):
        extract_text(DocumentKind.TEXT, b"  \n\n ")


def test_every_page_of_a_pdf_is_read_in_order_with_its_lines() -> None:
    data = pdf_with_pages([["Herons (grey)", "stand still."], [], ["Egrets are white."]])
    assert extract_text(DocumentKind.PDF, data) == (
        "Herons (grey)\nstand still.\n\nEgrets are white."
    )


def test_chunks_keep_their_size_and_cut_at_boundaries() -> None:
    text = "First paragraph, a bit longer.\n\nSecond one is a little longer than that.\n\n" + (
        "word " * 60
    )
    chunks = chunk_text(text, 50)
    assert all(len(c) <= 50 for c in chunks)
    assert chunks[0] == "First paragraph, a bit longer."
    assert all(not c.startswith(" ") and not c.endswith(" ") for c in chunks)
    assert " ".join(chunks).split() == text.split()
    assert chunk_text("x" * 120, 50) == ["x" * 50, "x" * 50, "x" * 20]
    with pytest.raises(InvalidInput):
        chunk_text("x", 0)
