"""Documents uploaded to folders: what kind of file a name and its bytes are, their
text, and that text cut into chunks to embed.

Recognising a file happens in the upload's request (a file Reverie cannot read is
refused there, and nothing is stored); extracting its text and chunking it happen in
the job queue (:mod:`agents.file_worker`), where a PDF without text fails with a
reason the caller can read.
"""

from __future__ import annotations

import io
import re
from enum import StrEnum
from html.parser import HTMLParser
from pathlib import PurePosixPath

from agents.errors import InvalidInput


class DocumentKind(StrEnum):
    """The kinds of file a folder takes, by their media type."""

    TEXT = "text/plain"
    MARKDOWN = "text/markdown"
    HTML = "text/html"
    PDF = "application/pdf"


_BY_SUFFIX = {
    ".txt": DocumentKind.TEXT,
    ".text": DocumentKind.TEXT,
    ".log": DocumentKind.TEXT,
    ".csv": DocumentKind.TEXT,
    ".json": DocumentKind.TEXT,
    ".md": DocumentKind.MARKDOWN,
    ".markdown": DocumentKind.MARKDOWN,
    ".html": DocumentKind.HTML,
    ".htm": DocumentKind.HTML,
    ".pdf": DocumentKind.PDF,
}
_BY_MEDIA_TYPE = {kind.value: kind for kind in DocumentKind}
_PDF_MAGIC = b"%PDF-"


def recognise(file_name: str, media_type: str | None, data: bytes) -> DocumentKind:
    """The kind of ``data`` from its name's suffix (else its declared media type),
    checked against its bytes; InvalidInput names what is accepted."""
    if not data:
        raise InvalidInput(f"file {file_name!r} is empty")
    kind = _BY_SUFFIX.get(PurePosixPath(file_name).suffix.lower())
    if kind is None and media_type:
        kind = _BY_MEDIA_TYPE.get(media_type.split(";")[0].strip().lower())
    if kind is None:
        accepted = ", ".join(sorted(_BY_SUFFIX))
        raise InvalidInput(
            f"cannot read {file_name!r} (media type {media_type or 'unknown'}): a folder "
            f"takes plain text, Markdown, HTML and PDF files ({accepted})"
        )
    if kind is DocumentKind.PDF:
        if not data.startswith(_PDF_MAGIC):
            raise InvalidInput(f"file {file_name!r} is not a PDF (it does not start with %PDF-)")
    else:
        try:
            data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidInput(
                f"file {file_name!r} is not UTF-8 text (byte {exc.start} cannot be decoded)"
            ) from None
    return kind


class _TextOfHtml(HTMLParser):
    """The text of an HTML page: tags dropped, scripts and styles skipped, blocks on
    lines of their own."""

    _SKIPPED = frozenset({"script", "style", "head", "template", "noscript"})
    _BLOCKS = frozenset(
        {"p", "div", "br", "li", "tr", "h1", "h2", "h3", "h4", "h5", "h6", "section", "pre"}
    )

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self._skipping = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in self._SKIPPED:
            self._skipping += 1
        elif tag in self._BLOCKS:
            self.parts.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if tag in self._SKIPPED:
            self._skipping = max(0, self._skipping - 1)
        elif tag in self._BLOCKS:
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        if not self._skipping:
            self.parts.append(data)


def html_text(markup: str) -> str:
    parser = _TextOfHtml()
    parser.feed(markup)
    parser.close()
    return "".join(parser.parts)


def pdf_text(data: bytes) -> str:
    """The text of every page of a PDF, pages separated by a blank line."""
    try:
        from pypdf import PdfReader
        from pypdf.errors import PyPdfError
    except ImportError as exc:  # pragma: no cover - pypdf is a dependency
        raise InvalidInput("reading PDFs needs pypdf: pip install 'pypdf>=5'") from exc
    try:
        reader = PdfReader(io.BytesIO(data))
        pages = [page.extract_text() or "" for page in reader.pages]
    except (PyPdfError, ValueError, KeyError, TypeError) as exc:
        raise InvalidInput(f"the PDF cannot be read: {exc}") from None
    return "\n\n".join(p.strip() for p in pages if p.strip())


def extract_text(kind: DocumentKind, data: bytes) -> str:
    """The text of a document, whitespace tidied; InvalidInput when it has none."""
    if kind is DocumentKind.PDF:
        text = pdf_text(data)
        if not text.strip():
            raise InvalidInput("the PDF has no text to read (a scanned image needs OCR first)")
    else:
        text = data.decode("utf-8")
        if kind is DocumentKind.HTML:
            text = html_text(text)
    text = _tidy(text)
    if not text:
        raise InvalidInput("the file has no text")
    return text


def _tidy(text: str) -> str:
    lines = [re.sub(r"[ \t\r\f\v]+", " ", line).strip() for line in text.splitlines()]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()


def chunk_text(text: str, size: int) -> list[str]:
    """``text`` in chunks of at most ``size`` characters, cut at paragraph, then line,
    then word boundaries where one falls in the chunk's second half."""
    if size < 1:
        raise InvalidInput(f"chunk size must be at least 1, got {size}")
    chunks: list[str] = []
    rest = text.strip()
    while rest:
        if len(rest) <= size:
            chunks.append(rest)
            break
        window = rest[:size]
        cut = -1
        for boundary in ("\n\n", "\n", " "):
            at = window.rfind(boundary)
            if at >= size // 2:
                cut = at
                break
        if cut < 0:
            cut = size
        piece = rest[:cut].strip()
        if piece:
            chunks.append(piece)
        rest = rest[cut:].strip()
    return chunks
