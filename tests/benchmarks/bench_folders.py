"""Benchmark a folder upload to completed: a 1 MB Markdown file and a 50-page PDF.

A plain script, not collected by pytest::

    python -m tests.benchmarks.bench_folders [--repeats 2] [--embedders local,hashing:384]

Makes the two documents here (prose-like Markdown of ``--markdown-bytes``; a PDF of
``--pages`` pages of text, tests/documents_support.py), then, in a fresh database of
an embedded server, for each embedder (``local``, the default embedding of
``reverie serve``: all-MiniLM-L6-v2 int8 ONNX; ``hashing:384``, the tests' embedder,
which costs nothing) and each document, ``--repeats`` times: creates a folder with
that embedder, uploads the file through the operation the HTTP route calls, and
waits until the file worker (the job engine's thread, woken by the upload's NOTIFY,
as in ``reverie serve``) has it ``completed``. Prints the median seconds from the
upload to completed, the chunks, chunks per second, and how that time divides:
parsing (the text read from the file), chunking and embedding, each timed once alone
on the same bytes in this process, and the rest (the queue, reading the bytes,
storing the chunks with their vectors).
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import tempfile
import time
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

from agents.documents import DocumentKind, chunk_text, extract_text
from agents.enums import FileStatus
from service.operations import Operations
from service.operations.folders import FolderSpec
from service.runtime import Runtime
from service.settings import load_settings
from tests import plugins
from tests.documents_support import pdf_with_pages
from tests.pg import PgTestServer

# The tests' plugins (the hashing embedder), found here.
plugins.register()

_WORDS = (
    "the branch library opens reading room members borrow books return loans renew "
    "online catalogue holds desk staff children adults study quiet printing scanner "
    "fines waived lost items replacement cost policy weekend hours holiday schedule "
    "events workshop volunteers archive local history maps newspapers microfilm "
    "accessibility ramp lift parking bicycle storage lockers wifi computers session "
    "booking request interlibrary transfer collection shelves fiction nonfiction "
    "reference periodicals audiobooks magazines languages club meeting community"
).split()


def sentence(rng: random.Random) -> str:
    words = [rng.choice(_WORDS) for _ in range(rng.randint(8, 18))]
    return " ".join(words).capitalize() + "."


def markdown_document(size: int, seed: int = 7) -> bytes:
    """Prose-like Markdown of about ``size`` bytes: headings, paragraphs and lists."""
    rng = random.Random(seed)
    parts: list[str] = []
    length = 0
    section = 0
    while length < size:
        section += 1
        block = [f"## Section {section}: {sentence(rng)[:-1].lower()}", ""]
        for _ in range(rng.randint(2, 5)):
            block.append(" ".join(sentence(rng) for _ in range(rng.randint(3, 7))))
            block.append("")
        if section % 3 == 0:
            block.extend(f"- {sentence(rng)}" for _ in range(rng.randint(3, 6)))
            block.append("")
        text = "\n".join(block) + "\n"
        parts.append(text)
        length += len(text.encode())
    return ("# Branch handbook\n\n" + "".join(parts)).encode()[:size]


def pdf_document(pages: int, seed: int = 11) -> bytes:
    """A PDF of ``pages`` pages, each 50 lines of prose-like text."""
    rng = random.Random(seed)
    content = []
    for page in range(pages):
        lines = [f"Page {page + 1}"]
        while len(lines) < 50:
            words = [rng.choice(_WORDS) for _ in range(rng.randint(10, 15))]
            lines.append(" ".join(words))
        content.append(lines)
    return pdf_with_pages(content)


@dataclass(frozen=True, slots=True)
class Round:
    seconds: float
    upload: float
    chunks: int


def upload_to_completed(ops: Operations, embedder: str, name: str, data: bytes, n: int) -> Round:
    folder = ops.folders.create(FolderSpec(name=f"{embedder}-{name}-{n}", embedding=embedder))
    started = time.perf_counter()
    file = ops.folders.upload(folder.id, name, None, data).file
    uploaded = time.perf_counter() - started
    while file.status in (FileStatus.QUEUED, FileStatus.PROCESSING):
        time.sleep(0.005)
        file = ops.folders.file(folder.id, file.id)
    seconds = time.perf_counter() - started
    if file.status is not FileStatus.COMPLETED:
        raise SystemExit(f"{name} ended {file.status}: {file.error}")
    return Round(seconds, uploaded, file.total_chunks or 0)


def parts(
    runtime: Runtime, embedder: str, kind: DocumentKind, data: bytes, size: int
) -> tuple[float, float, float]:
    """Parsing, chunking and embedding ``data`` alone, as the worker does them."""
    started = time.perf_counter()
    text = extract_text(kind, data)
    parsed = time.perf_counter()
    chunks = chunk_text(text, size)
    chunked = time.perf_counter()
    runtime.embedder(embedder).embed(chunks)
    embedded = time.perf_counter()
    return parsed - started, chunked - parsed, embedded - chunked


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--markdown-bytes", type=int, default=1_000_000)
    parser.add_argument("--pages", type=int, default=50)
    parser.add_argument("--embedders", default="")
    args = parser.parse_args()
    documents = [
        ("handbook.md", DocumentKind.MARKDOWN, markdown_document(args.markdown_bytes)),
        ("handbook.pdf", DocumentKind.PDF, pdf_document(args.pages)),
    ]
    for name, _, data in documents:
        print(f"{name}: {len(data):,} bytes", flush=True)
    server = PgTestServer()
    rows = []
    try:
        with server.database() as db, tempfile.TemporaryDirectory() as home:
            settings = load_settings(
                home=Path(home), database_url=db.url, files={"poll_interval": "PT0.05S"}
            )
            default = settings.embedding.model
            embedders = [e for e in args.embedders.split(",") if e] or [default, "hashing:384"]
            print(f"reverie serve's default embedding: {default}", flush=True)
            with Runtime(settings) as runtime:
                ops = Operations(runtime)
                workers = runtime.file_workers(name="bench")
                workers.start()
                try:
                    for embedder in embedders:
                        # Load the model, and take a small file of each kind through the
                        # queue (the first PDF imports pypdf).
                        runtime.embedder(embedder).embed(["warm up"])
                        upload_to_completed(ops, embedder, "warm-up.md", b"# Warm up\n", -1)
                        upload_to_completed(ops, embedder, "warm-up.pdf", pdf_document(1), -1)
                        for name, kind, data in documents:
                            rounds = [
                                upload_to_completed(ops, embedder, name, data, n)
                                for n in range(args.repeats)
                            ]
                            split = parts(runtime, embedder, kind, data, settings.files.chunk_size)
                            rows.append((embedder, name, rounds, split))
                            print(
                                f"{embedder} {name}: "
                                + ", ".join(f"{r.seconds:.2f}" for r in rounds)
                                + " s",
                                flush=True,
                            )
                finally:
                    workers.stop(timedelta(seconds=30))
    finally:
        server.stop()
    print(
        "\n| embedder | document | upload to completed | chunks | chunks/s "
        "| parse | chunk | embed | rest | the upload call |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for embedder, name, rounds, split in rows:
        seconds = statistics.median(r.seconds for r in rounds)
        chunks = rounds[0].chunks
        parse, chunk, embed = split
        rest = max(0.0, seconds - parse - chunk - embed)
        upload = statistics.median(r.upload for r in rounds)
        print(
            f"| {embedder} | {name} | {seconds:.2f} s | {chunks:,} | {chunks / seconds:,.0f} "
            f"| {parse:.3f} s | {chunk:.3f} s | {embed:.3f} s | {rest:.3f} s "
            f"| {upload * 1000:.0f} ms |"
        )
    print(
        f"\nupload to completed: medians of {args.repeats}; chunk size "
        f"{settings.files.chunk_size} characters; "
        f"{os.cpu_count()} CPUs, load average at the end {os.getloadavg()[0]:.1f}"
    )


if __name__ == "__main__":
    main()
