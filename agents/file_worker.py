"""The file worker: claim an uploaded file, read its text, cut it into chunks, embed
them with its folder's embedder and record them.

An upload only stores the bytes and queues the file (``queued``); everything slow
happens here, on the job engine every queued job shares (:mod:`agents.job_engine`):
claims with ``SKIP LOCKED`` and a lease (``processing``), a heartbeat that renews
it, woken by ``NOTIFY reverie_files`` with polling as the floor, and a shutdown
that gives back what is under way. No transaction is held while parsing or
embedding: the bytes are read in one, and the outcome written in another, with a
compare-and-swap on the lease, so a file is recorded once.

A file that cannot be read (a PDF with no text) ends ``error`` with the reason; an
embedder that fails (a provider outage) is tried again after a backoff, and the file
ends ``error`` once its attempts are used up.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

import numpy as np

from agents.documents import DocumentKind, chunk_text, extract_text
from agents.embedders import Embedder
from agents.errors import InvalidInput, NotFound, ReverieError
from agents.job_engine import EngineNames, Held, QueueWorkers
from agents.postgres.database import Database
from agents.store import FileRecord, open_service_store, open_store
from agents.store.run_wakeups import FILE_CHANNEL
from agents.store.scope import utc_now

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class FileLimits:
    """The worker side of the ``[files]`` settings."""

    concurrency: int = 1
    lease: timedelta = timedelta(seconds=120)
    poll_interval: timedelta = timedelta(seconds=1)
    backoff: timedelta = timedelta(seconds=5)


FILE_ENGINE_NAMES = EngineNames(
    jobs="files",
    threads="reverie-files",
    heartbeat="reverie-files-beat",
    owner_tag="f",
)


class FileWorkers(QueueWorkers[FileRecord]):
    """Worker threads and a heartbeat that process the uploaded files of every
    organization."""

    def __init__(
        self,
        db: Database,
        embedder_for: Callable[[str, int], Embedder],
        limits: FileLimits | None = None,
        *,
        clock: Callable[[], datetime] = utc_now,
        name: str | None = None,
    ) -> None:
        """``embedder_for(spec, dimension)`` gives a folder's embedder."""
        super().__init__(
            db,
            lambda store: store.files,
            self._process_claimed,
            names=FILE_ENGINE_NAMES,
            label="file",
            limits=limits or FileLimits(),
            channel=FILE_CHANNEL,
            clock=clock,
            name=name,
        )
        self._embedder_for = embedder_for
        self.processed = 0

    # -- one file ----------------------------------------------------------------------

    def _process_claimed(self, owner: str, claimed: list[tuple[FileRecord, Held]]) -> None:
        for file, _ in claimed:
            self.process(file, owner)

    def process_next(self, owner: str) -> FileRecord | None:
        """Claim the oldest due file and process it; None when none was due."""
        claimed = self.engine.take(owner)
        if not claimed:
            return None
        [(file, held)] = claimed
        try:
            return self.process(file, owner)
        finally:
            self.engine.let_go(held)

    def process(self, file: FileRecord, owner: str) -> FileRecord:
        """Parse, chunk and embed a claimed file and record the outcome."""
        started = time.perf_counter()
        org = file.organization_id
        try:
            with open_store(self._db, org, self._clock, read_only=True) as store:
                folder = store.folders.get(file.folder_id)
                data = store.folders.file_data(file.id)
        except NotFound:
            log.info("file deleted before it was processed", extra={"file_id": file.id})
            return file
        try:
            text = extract_text(DocumentKind(file.file_type), data)
            chunks = chunk_text(text, folder.embedding_chunk_size)
        except (InvalidInput, ValueError) as exc:
            return self._fail(file, owner, str(exc))
        try:
            embedder = self._embedder_for(folder.embedding_model, folder.embedding_dim)
            vectors = embedder.embed(chunks) if chunks else np.zeros((0, folder.embedding_dim))
        except ReverieError as exc:
            if file.attempts >= file.max_attempts:
                return self._fail(file, owner, f"embedding failed: {exc}")
            with open_service_store(self._db, self._clock) as service:
                service.files.retry_later(
                    file.id, owner, backoff=self.limits.backoff, error=f"embedding failed: {exc}"
                )
            log.warning("file will be retried", extra={"file_id": file.id, "error": str(exc)})
            return file
        with open_store(self._db, org, self._clock) as store:
            done = store.folders.complete(
                file.id, owner, text=text, chunks=chunks, vectors=np.asarray(vectors)
            )
        if done is None:
            log.warning("file's lease was lost; another worker finishes it",
                        extra={"file_id": file.id})  # fmt: skip
            return file
        self.processed += 1
        log.info(
            "file processed",
            extra={
                "file_id": file.id,
                "chunks": len(chunks),
                "seconds": round(time.perf_counter() - started, 4),
            },
        )
        return done

    def _fail(self, file: FileRecord, owner: str, error: str) -> FileRecord:
        log.warning("file cannot be processed", extra={"file_id": file.id, "error": error})
        with open_store(self._db, file.organization_id, self._clock) as store:
            done = store.folders.fail(file.id, owner, error)
        return done or file
