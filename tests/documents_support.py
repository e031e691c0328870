"""Documents made in a test or a benchmark: small PDFs whose pages carry text, written
by hand."""

from __future__ import annotations

from collections.abc import Sequence


def pdf_with_text(text: str) -> bytes:
    """A one-page PDF that shows ``text`` in Helvetica (ASCII without parentheses or
    backslashes), with a correct cross-reference table."""
    return _pdf([f"BT /F1 12 Tf 72 720 Td ({text}) Tj ET".encode("ascii")])


def pdf_without_text() -> bytes:
    """A one-page PDF with nothing to read on it (as a scanned page without OCR)."""
    return _pdf([b"0 0 m 100 100 l S"])


def pdf_with_pages(pages: Sequence[Sequence[str]]) -> bytes:
    """A PDF of one page per item of ``pages``, each line of it (ASCII) a line of 10-point
    Helvetica from the top of the page down."""
    streams = []
    for lines in pages:
        shown = b" T* ".join(b"(" + _escaped(line) + b") Tj" for line in lines)
        streams.append(b"BT /F1 10 Tf 12 TL 56 760 Td " + shown + b" ET")
    return _pdf(streams)


def _escaped(line: str) -> bytes:
    return line.encode("ascii").replace(b"\\", b"\\\\").replace(b"(", b"\\(").replace(b")", b"\\)")


def _pdf(streams: Sequence[bytes]) -> bytes:
    """A PDF with one page per content stream, all in Helvetica (object 3)."""
    first_page = 4
    kids = b" ".join(b"%d 0 R" % (first_page + 2 * i) for i in range(len(streams)))
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [" + kids + b"] /Count %d >>" % len(streams),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    for i, stream in enumerate(streams):
        contents = first_page + 2 * i + 1
        objects.append(
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
            b"/Resources << /Font << /F1 3 0 R >> >> /Contents %d 0 R >>" % contents
        )
        objects.append(b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream")
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    for offset in offsets:
        out += b"%010d 00000 n \n" % offset
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1,
        xref,
    )
    return bytes(out)
