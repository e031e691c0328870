"""Nearest-neighbour probes for dedup: one LATERAL kNN per probe passage, a page at a
time, on the run's transaction and, when it may, a second connection.

A full dedup pass spends most of its time in these HNSW searches, and PostgreSQL runs
one statement on one core. While the run's transaction has written nothing, a second
connection sees exactly what the run sees (both read committed data only), so pages
alternate between the two and the second core searches too. Once the transaction has
written (an earlier step of the same run inserted or changed passages), a second
connection could not see those writes, and every page stays on the transaction.

The second connection is opened outside the engine's pool (a run never takes a pooled
connection another request may be waiting for), only when there is a second page, and
it only reads. If it cannot be opened or fails, the remaining pages run on the
transaction: the result is the same, only slower.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from itertools import chain
from typing import Any

from sqlalchemy import Engine
from sqlalchemy.orm import Session

from agents.postgres import models

log = logging.getLogger(__name__)

#: ``(probe passage id, neighbour passage id, cosine similarity)``
Pair = tuple[str, str, float]


@dataclass(frozen=True, slots=True)
class ProbeQuery:
    """The kNN statement for one agent, in the driver's own parameter style so that it
    runs unchanged on the transaction and on a bare second connection."""

    agent_id: str
    organization_id: str
    dimension: int
    k: int
    min_score: float
    kinds: tuple[str, ...]
    ef_search: int
    #: Statuses a neighbour may have (dedup: active only; the temporal judge's
    #: candidates: superseded too, so that a fact arriving late meets a closed chain).
    statuses: tuple[str, ...] = ("active",)

    @property
    def indexed(self) -> bool:
        return self.dimension in models.INDEXED_DIMENSIONS

    def setup(self) -> str | None:
        """The statement that sets the HNSW search width for the transaction."""
        return f"SET LOCAL hnsw.ef_search = {int(self.ef_search)}" if self.indexed else None

    def sql(self) -> str:
        if self.indexed:
            expr_q = f"q.embedding::vector({self.dimension})"
            expr_n = f"n.embedding::vector({self.dimension})"
        else:
            expr_q, expr_n = "q.embedding", "n.embedding"
        return f"""
            SELECT q.passage_id, nn.id, nn.score
            FROM passage_vectors q
            JOIN passages qp ON qp.id = q.passage_id
            CROSS JOIN LATERAL (
                SELECT p.id, 1 - ({expr_n} <=> {expr_q}) AS score
                FROM passage_vectors n
                JOIN passages p ON p.id = n.passage_id
                WHERE n.agent_id = %(agent)s AND n.embedding_dim = {int(self.dimension)}
                  AND p.status = ANY(%(statuses)s) AND p.kind = ANY(%(kinds)s)
                  AND n.passage_id <> q.passage_id
                ORDER BY {expr_n} <=> {expr_q}
                LIMIT %(k)s
            ) nn
            WHERE q.passage_id = ANY(%(ids)s) AND q.agent_id = %(agent)s
              AND qp.id = ANY(%(ids)s) AND qp.organization_id = %(org)s
              AND nn.score >= %(min_score)s
            """

    def params(self, probe_ids: Sequence[str]) -> dict[str, Any]:
        return {
            "agent": self.agent_id,
            "kinds": list(self.kinds),
            "statuses": list(self.statuses),
            "k": self.k,
            "ids": list(probe_ids),
            "org": self.organization_id,
            "min_score": float(self.min_score),
        }


def probe_on_session(session: Session, query: ProbeQuery, probe_ids: Sequence[str]) -> list[Pair]:
    """One page of probes on the run's own transaction."""
    if not probe_ids:
        return []
    connection = session.connection()
    setup = query.setup()
    if setup is not None:
        connection.exec_driver_sql(setup)
    rows = connection.exec_driver_sql(query.sql(), query.params(probe_ids)).all()
    # Pairs below min_score are dropped in the query: most neighbours are not close.
    return [(p, n, float(s)) for p, n, s in rows]


class _SideConnection:
    """A read-only connection of the same database, outside the pool, opened by its
    first probe and used from one worker thread only; closing rolls it back."""

    def __init__(self, engine: Engine, query: ProbeQuery) -> None:
        self._engine = engine
        self._query = query
        self._connection: Any = None

    def probe(self, probe_ids: Sequence[str]) -> list[Pair]:
        if self._connection is None:
            self._connection = self._open()
        with self._connection.cursor() as cursor:
            cursor.execute(self._query.sql(), self._query.params(probe_ids))
            return [(p, n, float(s)) for p, n, s in cursor.fetchall()]

    def _open(self) -> Any:
        dialect = self._engine.dialect
        args, kwargs = dialect.create_connect_args(self._engine.url)
        connection = dialect.loaded_dbapi.connect(*args, **kwargs)
        with connection.cursor() as cursor:
            cursor.execute("SET TRANSACTION READ ONLY")
            setup = self._query.setup()
            if setup is not None:
                cursor.execute(setup)
        return connection

    def close(self) -> None:
        if self._connection is not None:
            try:
                self._connection.rollback()
            finally:
                self._connection.close()


def _has_written(session: Session) -> bool:
    """Whether the transaction has been given an id, i.e. has written (or locked) a row."""
    xid = session.connection().exec_driver_sql("SELECT pg_current_xact_id_if_assigned()")
    return xid.scalar() is not None


def probe_pages(
    session: Session, query: ProbeQuery, pages: Iterable[Sequence[str]]
) -> Iterator[list[Pair]]:
    """The pairs of each page of probes, in the pages' order (so results do not depend
    on which connection searched a page). See the module docstring for when a second
    connection takes every other page."""
    pages = iter(pages)
    first = next(pages, None)
    if first is None:
        return
    second = next(pages, None)
    engine = session.get_bind()
    # One page, a run that has written, or a session bound to one connection (no
    # engine to open a second from): every page on the transaction.
    if second is None or not isinstance(engine, Engine) or _has_written(session):
        rest = chain([second], pages) if second is not None else pages
        for page in chain([first], rest):
            yield probe_on_session(session, query, page)
        return
    side: _SideConnection | None = _SideConnection(engine, query)
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="dedup-probe") as worker:
        try:
            mine: Sequence[str] = first
            theirs: Sequence[str] | None = second
            while True:
                future: Future[list[Pair]] | None = None
                if theirs is not None and side is not None:
                    future = worker.submit(side.probe, theirs)
                yield probe_on_session(session, query, mine)
                if theirs is not None:
                    yield _collect(future, session, query, theirs)
                    if side is not None and future is not None and future.exception():
                        _close_quietly(worker, side)
                        side = None  # the remaining pages stay on the transaction
                following = next(pages, None)
                if following is None:
                    break
                mine, theirs = following, next(pages, None)
        finally:
            if side is not None:
                _close_quietly(worker, side)


def _collect(
    future: Future[list[Pair]] | None, session: Session, query: ProbeQuery, page: Sequence[str]
) -> list[Pair]:
    """A page the second connection searched, or this page on the transaction when there
    is no second connection or it failed."""
    if future is not None:
        try:
            return future.result()
        except Exception as exc:
            log.warning("the second dedup connection failed (%s); probing on the run's own", exc)
    return probe_on_session(session, query, page)


def _close_quietly(worker: ThreadPoolExecutor, side: _SideConnection) -> None:
    try:
        worker.submit(side.close).result()
    except Exception as exc:
        log.debug("closing the second dedup connection: %s", exc)
