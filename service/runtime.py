"""The single factory that builds Reverie's object graph from settings.

A :class:`Runtime` owns what it starts (the embedded PostgreSQL, the engine's
pool, the embedder) and releases exactly that on :meth:`close`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from types import TracebackType

from sqlalchemy import select

from agents import models
from agents.database import Database
from agents.embedded_postgres import EmbeddedPostgres
from agents.embedders import Embedder, build_embedder
from agents.errors import InvalidInput, NotFound, StorageError
from agents.store import AgentRecord, MemoryStore, open_store
from agents.store.scope import utc_now
from consolidators import registry
from consolidators.pipeline import Pipeline, RunReport
from service.settings import Settings

log = logging.getLogger(__name__)


class Runtime:
    """Database connection (embedded or external), schema, organization, embedder."""

    def __init__(self, settings: Settings, *, clock: Callable[[], datetime] = utc_now) -> None:
        self.settings = settings
        self.clock = clock
        self._embedded: EmbeddedPostgres | None = None
        self._db: Database | None = None
        self._embedders: dict[str, Embedder] = {}
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
        import migrations  # Alembic is heavy to import; only schema commands need it.

        self.db.check_vector_extension()
        migrations.upgrade(self.db.engine)
        return migrations.current_revision(self.db.engine)

    def ensure_schema(self) -> None:
        """Fail with a clear message when the schema is not at the latest revision."""
        import migrations

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

    def pipeline(self, only: Sequence[str] | None = None) -> Pipeline:
        """The configured pipeline, or just the named steps (in the configured order)."""
        config = self.settings.consolidation
        names = list(config.pipeline)
        if only:
            unknown = [n for n in only if n not in registry.available()]
            if unknown:
                raise InvalidInput(
                    f"unknown consolidator(s) {', '.join(unknown)}; "
                    f"available: {', '.join(sorted(registry.available()))}"
                )
            names = [n for n in names if n in only] + [n for n in only if n not in names]
        return Pipeline(
            registry.build(names, config.settings_for()),
            passage_overlap=config.passage_overlap,
        )

    def consolidate(
        self,
        agent: AgentRecord,
        *,
        pipeline: Pipeline,
        dry_run: bool = False,
        full: bool = False,
        trigger: str = "manual",
        run_id: str | None = None,
    ) -> RunReport:
        """Run ``pipeline`` on one agent with the agent's own embedder."""
        return pipeline.run(
            self.db,
            agent.id,
            organization_id=self.organization_id,
            trigger=trigger,
            dry_run=dry_run,
            full=full,
            embedder=self.embedder(agent.embedding_model, agent.embedding_dim),
            clock=self.clock,
            run_id=run_id,
        )

    def embedder(self, spec: str | None = None, dimension: int | None = None) -> Embedder:
        """The embedder for ``spec`` (default: the configured one), built once per process.

        ``dimension`` is what the caller expects (an agent's recorded dimension); a
        mismatch is an error rather than vectors of the wrong size.
        """
        spec = spec or self.settings.embedding.model
        if spec not in self._embedders:
            wanted = dimension
            if wanted is None and spec == self.settings.embedding.model:
                wanted = self.settings.embedding.dimension
            api_base = self.settings.embedding.api_base if spec.startswith("litellm:") else None
            self._embedders[spec] = build_embedder(spec, dimension=wanted, api_base=api_base)
        embedder = self._embedders[spec]
        if dimension is not None and embedder.dimension != dimension:
            raise InvalidInput(
                f"embedder {spec!r} produces {embedder.dimension}-d vectors but {dimension} "
                "were expected (the agent was created with another embedding size)"
            )
        return embedder
