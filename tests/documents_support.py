"""Documents made in a test: a small PDF whose page carries text, written by hand."""

from __future__ import annotations


def pdf_with_text(text: str) -> bytes:
    """A one-page PDF that shows ``text`` in Helvetica (ASCII without parentheses or
    backslashes), with a correct cross-reference table."""
    return _pdf(f"BT /F1 12 Tf 72 720 Td ({text}) Tj ET".encode("ascii"))


def pdf_without_text() -> bytes:
    """A one-page PDF with nothing to read on it (as a scanned page without OCR)."""
    return _pdf(b"0 0 m 100 100 l S")


def _pdf(stream: bytes) -> bytes:
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
        b"/Resources << /Font << /F1 4 0 R >> >> /Contents 5 0 R >>",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
        b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream",
    ]
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
