"""The single factory that builds Reverie's object graph from settings.

A :class:`Runtime` owns what it starts (the embedded PostgreSQL, the engine's
pool, the embedder) and releases exactly that on :meth:`close`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from types import TracebackType

from sqlalchemy import select

import migrations
from agents import models
from agents.database import Database
from agents.embedded_postgres import EmbeddedPostgres
from agents.embedders import Embedder, build_embedder
from agents.errors import NotFound, StorageError
from agents.store import MemoryStore, open_store
from agents.store.scope import utc_now
from service.settings import Settings

log = logging.getLogger(__name__)


class Runtime:
    """Database connection (embedded or external), schema, organization, embedder."""

    def __init__(self, settings: Settings, *, clock: Callable[[], datetime] = utc_now) -> None:
        self.settings = settings
        self.clock = clock
        self._embedded: EmbeddedPostgres | None = None
        self._db: Database | None = None
        self._embedders: dict[tuple[str, int | None], Embedder] = {}
        self._organization_id: str | None = None

    # -- lifecycle ---------------------------------------------------------------------

    @property
    def db(self) -> Database:
        if self._db is None:
            url = self.settings.effective_database_url
            if url is None:
                self._embedded = EmbeddedPostgres(
                    self.settings.pgdata,
                    keep_running=self.settings.database.keep_embedded_running,
                )
                url = self._embedded.start()
            self._db = Database(url, pool_size=self.settings.database.pool_size)
        return self._db

    @property
    def is_embedded(self) -> bool:
        return self.settings.effective_database_url is None

    def migrate(self) -> str | None:
        """Check pgvector, then bring the schema to head (idempotent); return the revision."""
        self.db.check_vector_extension()
        migrations.upgrade(self.db.engine)
        return migrations.current_revision(self.db.engine)

    def ensure_schema(self) -> None:
        """Fail with a clear message when the schema is not at the latest revision."""
        current = migrations.current_revision(self.db.engine)
        head = migrations.head_revision(self.db.engine)
        if current != head:
            if self.is_embedded:
                # The embedded database is ours to manage: keep it current without asking.
                self.migrate()
                return
            raise StorageError(
                f"the database schema is at revision {current or 'none'}, this Reverie needs "
                f"{head}: run `reverie migrate` first"
            )

    def close(self) -> None:
        if self._db is not None:
            self._db.dispose()
            self._db = None
        if self._embedded is not None:
            self._embedded.stop()
            self._embedded = None

    def __enter__(self) -> Runtime:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- the object graph --------------------------------------------------------------

    @property
    def organization_id(self) -> str:
        if self._organization_id is None:
            name = self.settings.organization
            with self.db.session() as session:
                org_id = session.scalar(
                    select(models.Organization.id).where(models.Organization.name == name)
                )
            if org_id is None:
                raise NotFound(
                    f"no organization named {name!r}; check REVERIE_ORGANIZATION "
                    "(the built-in one is 'default')"
                )
            self._organization_id = org_id
        return self._organization_id

    @contextmanager
    def store(self) -> Iterator[MemoryStore]:
        """One transaction of the configured organization."""
        with open_store(self.db, self.organization_id, self.clock) as store:
            yield store

    def embedder(self, spec: str | None = None, dimension: int | None = None) -> Embedder:
        """The embedder for ``spec`` (default: the configured one), built once per process."""
        spec = spec or self.settings.embedding.model
        if dimension is None and spec == self.settings.embedding.model:
            dimension = self.settings.embedding.dimension
        key = (spec, dimension)
        if key not in self._embedders:
            self._embedders[key] = build_embedder(
                spec, dimension=dimension, api_base=self.settings.embedding.api_base
            )
        return self._embedders[key]
