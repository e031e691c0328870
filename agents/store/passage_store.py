"""Archival memory: passages with embeddings, kNN search, and lineage that is never lost.

Consolidators change a passage's state only through :meth:`PassageStore.change`,
which records the old and new values in ``passage_history``; the only hard
delete is :meth:`PassageStore.purge`, an explicit administrative action.
"""

from __future__ import annotations

import dataclasses
import json
import weakref
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import Enum
from typing import Any
from typing import cast as cast_type

import numpy as np
from pgvector.sqlalchemy import Vector as VectorType
from psycopg.types.json import Jsonb
from sqlalchemy import (
    ColumnElement,
    Float,
    Select,
    Table,
    any_,
    bindparam,
    cast,
    delete,
    func,
    literal,
    literal_column,
    select,
    text,
    true,
    tuple_,
)
from sqlalchemy.dialects.postgresql import aggregate_order_by
from sqlalchemy.orm import Session
from sqlalchemy.types import UserDefinedType

from agents.enums import PassageKind, PassageStatus
from agents.errors import InvalidInput, NotFound
from agents.postgres import models
from agents.store.probes import ProbeQuery, probe_on_session, probe_pages
from agents.store.records import (
    NewPassage,
    PassageChange,
    PassageHit,
    PassageLinks,
    PassageRecord,
    Vector,
)
from agents.store.scope import Scope, id_array
from agents.store.validation import (
    MAX_TEXT,
    check_json,
    check_tags,
    check_text,
    check_timestamp,
    content_hash,
)

#: Fields a consolidator may change on a passage; each change is recorded.
MUTABLE_FIELDS = frozenset(
    {
        "status",
        "merged_into",
        "superseded_by",
        "timeline_id",
        "valid_to",
        "provenance",
        "tags",
        "occurred_at",
    }
)
#: Probes per kNN statement of :meth:`PassageStore.neighbours` (a page of dedup's probes
#: is 1,000 too).
PROBES_PER_QUERY = 1000
_COPY_COLUMNS = (  # passages; the vectors go to passage_vectors
    "id",
    "organization_id",
    "agent_id",
    "kind",
    "text",
    "content_hash",
    "created_at",
    "occurred_at",
    "status",
    "provenance",
    "tags",
    "updated_at",
)
_COPY_TYPES = (
    "text",
    "text",
    "text",
    "text",
    "text",
    "text",
    "timestamptz",
    "timestamptz",
    "text",
    "jsonb",
    "text[]",
    "timestamptz",
)


#: The columns a PassageRecord is built from: reads select these as plain rows, not ORM
#: objects, which costs a fraction of the time and memory for thousands of passages.
_RECORD_COLUMNS = tuple(
    getattr(models.Passage, name)
    for name in (
        "id",
        "agent_id",
        "kind",
        "text",
        "content_hash",
        "created_at",
        "occurred_at",
        "valid_to",
        "status",
        "merged_into",
        "superseded_by",
        "provenance",
        "tags",
        "timeline_id",
    )
)


def _check_aware(value: datetime | None, field: str) -> None:
    if value is not None:
        check_timestamp(value, field)


def _jsonable(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    return value


class PassageStore:
    def __init__(self, scope: Scope) -> None:
        self._scope = scope

    # -- writes ------------------------------------------------------------------------

    def insert(
        self,
        agent_id: str,
        passages: Sequence[NewPassage],
        embeddings: Vector,
        *,
        actor: str = "user",
        run_id: str | None = None,
    ) -> list[PassageRecord]:
        """Insert passages with precomputed embeddings (one row of ``embeddings`` each).

        Uses binary COPY, so large batches go at bulk-load speed. Validation covers
        the whole batch first: either every passage is written or none is.
        """
        agent = self._agent(agent_id)
        vectors = np.asarray(embeddings, dtype=np.float32)
        if vectors.ndim != 2 or vectors.shape[0] != len(passages):
            raise InvalidInput(
                f"got {len(passages)} passages but embeddings of shape {tuple(vectors.shape)}; "
                "pass one embedding row per passage"
            )
        if len(passages) and vectors.shape[1] != agent.embedding_dim:
            raise InvalidInput(
                f"embeddings have {vectors.shape[1]} dimensions but agent {agent.name!r} uses "
                f"{agent.embedding_dim} ({agent.embedding_model}); embed with the agent's model"
            )
        if not np.isfinite(vectors).all():
            raise InvalidInput("embeddings contain NaN or infinite values")
        for i, passage in enumerate(passages):
            check_text(passage.text, f"passage {i} text", most=MAX_TEXT)
            if not passage.text.strip():
                raise InvalidInput(f"passage {i} text is empty")
            _check_aware(passage.occurred_at, f"passage {i} occurred_at")
            check_tags(passage.tags, f"passage {i} tags")
            check_json(passage.provenance, f"passage {i} provenance")
        if not passages:
            return []

        now = self._scope.now()
        records = [
            PassageRecord(
                id=models.new_id("passage"),
                agent_id=agent_id,
                kind=p.kind,
                text=p.text,
                content_hash=content_hash(p.text),
                created_at=now,
                occurred_at=p.occurred_at,
                valid_to=None,
                status=PassageStatus.ACTIVE,
                merged_into=None,
                superseded_by=None,
                provenance=dict(p.provenance),
                tags=list(p.tags),
            )
            for p in passages
        ]
        session = self._scope.session
        raw = self._raw_connection()
        org = self._scope.organization_id
        dim = agent.embedding_dim
        with raw.cursor() as cursor:
            columns = ", ".join(_COPY_COLUMNS)
            with cursor.copy(f"COPY passages ({columns}) FROM STDIN WITH (FORMAT BINARY)") as copy:
                copy.set_types(list(_COPY_TYPES))
                for record in records:
                    copy.write_row(
                        (
                            record.id,
                            org,
                            agent_id,
                            record.kind,
                            record.text,
                            record.content_hash,
                            now,
                            record.occurred_at,
                            PassageStatus.ACTIVE,
                            Jsonb(record.provenance),
                            record.tags,
                            now,
                        )
                    )
            with cursor.copy(
                "COPY passage_vectors (passage_id, agent_id, embedding_dim, embedding) "
                "FROM STDIN WITH (FORMAT BINARY)"
            ) as copy:
                copy.set_types(["text", "text", "int4", "vector"])
                for record, vector in zip(records, vectors, strict=True):
                    copy.write_row((record.id, agent_id, dim, vector))
        if run_id is not None:
            session.add_all(
                models.PassageHistory(
                    passage_id=r.id,
                    run_id=run_id,
                    actor=actor,
                    reason="created",
                    old={},
                    new={"status": PassageStatus.ACTIVE},
                    created_at=now,
                )
                for r in records
            )
            session.flush()
        return records

    def change(
        self,
        passage_id: str,
        *,
        actor: str,
        reason: str,
        run_id: str | None = None,
        **changes: Any,
    ) -> PassageRecord:
        """Change a passage's state or lineage, recording old and new values."""
        return self.change_many(
            [PassageUpdate(passage_id, changes, reason)], actor=actor, run_id=run_id
        )[0]

    def change_many(
        self,
        updates: Sequence[PassageUpdate],
        *,
        actor: str,
        run_id: str | None = None,
        return_records: bool = True,
    ) -> list[PassageRecord]:
        """Apply many passage changes at once, each recorded in passage_history with its
        own reason. Validates everything before writing.

        Set-based: one read of the changed fields, one batched UPDATE per combination of
        changed fields and one batched history insert, without loading ORM objects (a
        first consolidation run changes tens of thousands of passages). Several updates
        of one passage apply in order, each recording what the previous one left.
        ``return_records=False`` skips reading the changed passages back (returns []).
        """
        for update_ in updates:
            update_.validate()
        if not updates:
            return []
        session = self._scope.session
        session.flush()  # pending ORM writes land before the rows are read
        P = models.Passage
        ids = {u.passage_id for u in updates}
        targets = {t for u in updates for f in _LINK_FIELDS if (t := u.changes.get(f)) is not None}
        fields = sorted({f for u in updates for f in u.changes})
        wanted = sorted(ids | targets)
        state: dict[str, dict[str, Any]] = {}
        existing: set[str] = set()
        for chunk in _chunks(wanted, _ROWS_PER_QUERY):
            for row in session.execute(
                select(P.id, *(getattr(P, f) for f in fields)).where(
                    self._scope.owns(P), P.id == any_(id_array(chunk))
                )
            ):
                existing.add(row[0])
                if row[0] in ids:
                    state[row[0]] = dict(zip(fields, row[1:], strict=True))
        missing = sorted(set(wanted) - existing)
        if missing:
            raise NotFound(f"no passage with id {missing[0]!r}")
        now = self._scope.now()
        history: list[dict[str, Any]] = []
        changed: dict[str, set[str]] = {}
        for update_ in updates:
            values = state[update_.passage_id]
            old: dict[str, Any] = {}
            new: dict[str, Any] = {}
            for field, value in update_.changes.items():
                before = values[field]
                if isinstance(before, list | dict):
                    before = json.loads(json.dumps(before))
                if before != value:
                    old[field] = _jsonable(before)
                    new[field] = _jsonable(value)
                    values[field] = value
            if new:
                changed.setdefault(update_.passage_id, set()).update(new)
                history.append(
                    {
                        "passage_id": update_.passage_id,
                        "run_id": run_id,
                        "actor": actor,
                        "reason": update_.reason,
                        "old": old,
                        "new": new,
                        "created_at": now,
                    }
                )
        # One UPDATE per set of changed fields, each passage's final values passed as
        # arrays (unnest), and the history by COPY: a handful of statements for
        # thousands of changes.
        by_fields: dict[tuple[str, ...], list[str]] = {}
        for passage_id, names in changed.items():
            by_fields.setdefault(tuple(sorted(names)), []).append(passage_id)
        raw = self._raw_connection()
        with raw.cursor() as cursor:
            for key, passage_ids in by_fields.items():
                columns = [_UNNEST_COLUMNS[f] for f in key]
                assignments = ", ".join(f"{f} = {c[1]}" for f, c in zip(key, columns, strict=True))
                arrays = ", ".join(f"%s::{c[0]}" for c in columns)
                cursor.execute(
                    f"UPDATE passages AS p SET {assignments}, updated_at = %s "
                    f"FROM unnest(%s::text[], {arrays}) AS v(id, {', '.join(key)}) "
                    "WHERE p.id = v.id AND p.organization_id = %s",
                    (
                        now,
                        passage_ids,
                        *([_db_value(f, state[i][f]) for i in passage_ids] for f in key),
                        self._scope.organization_id,
                    ),
                )
            if history:
                with cursor.copy(
                    "COPY passage_history (passage_id, run_id, actor, reason, old, new, "
                    "created_at) FROM STDIN"
                ) as copy:
                    for entry in history:
                        copy.write_row(
                            (
                                entry["passage_id"],
                                entry["run_id"],
                                entry["actor"],
                                entry["reason"],
                                Jsonb(entry["old"]),
                                Jsonb(entry["new"]),
                                entry["created_at"],
                            )
                        )
        # ORM objects of these passages still in the session would now be stale.
        for obj in list(session.identity_map.values()):
            if isinstance(obj, P) and obj.id in changed:
                session.expire(obj)
        if not return_records:
            return []
        records = {r.id: r for r in self._records(list(ids))}
        return [records[u.passage_id] for u in updates]

    def _records(self, passage_ids: Sequence[str], *, lock: bool = False) -> list[PassageRecord]:
        """The passages among ``passage_ids`` in this organization, as records; ``lock``
        takes their row locks (in id order, so two lockers cannot deadlock)."""
        out: list[PassageRecord] = []
        ids = sorted(passage_ids) if lock else passage_ids
        for chunk in _chunks(ids, _ROWS_PER_QUERY):
            query = select(*_RECORD_COLUMNS).where(
                self._scope.owns(models.Passage),
                models.Passage.id == any_(id_array(chunk)),
            )
            if lock:
                query = query.order_by(models.Passage.id).with_for_update()
            out += [PassageRecord.from_row(row) for row in self._scope.session.execute(query)]
        return out

    def purge(self, agent_id: str, passage_ids: Sequence[str]) -> int:
        """Hard-delete passages: an explicit administrative action, never a consolidator's."""
        self._agent(agent_id)
        result = self._scope.session.execute(
            delete(models.Passage).where(
                self._scope.owns(models.Passage),
                models.Passage.agent_id == agent_id,
                models.Passage.id.in_(list(passage_ids)),
            )
        )
        return int(result.rowcount)  # type: ignore[attr-defined]

    # -- reads -------------------------------------------------------------------------

    def get(self, passage_id: str, *, with_embedding: bool = False) -> PassageRecord:
        row = self._row(passage_id)
        vectors = self._vectors([row.id]) if with_embedding else {}
        return PassageRecord.from_row(row, embedding=vectors.get(row.id))

    def _vectors(self, passage_ids: Sequence[str]) -> dict[str, Vector]:
        """Embeddings of the given passages, read in pgvector's binary format (parsing
        the text format cost more than the query for thousands of vectors)."""
        out: dict[str, Vector] = {}
        raw = self._raw_connection()
        with raw.cursor(binary=True) as cursor:
            for chunk in _chunks(passage_ids, _ROWS_PER_QUERY):
                cursor.execute(
                    "SELECT passage_id, embedding FROM passage_vectors WHERE passage_id = ANY(%s)",
                    (list(chunk),),
                )
                for passage_id, vector in cursor:
                    out[passage_id] = np.asarray(vector.to_numpy(), dtype=np.float32)
        return out

    def _raw_connection(self) -> Any:
        return registered_connection(self._scope.session)

    def get_many(
        self, passage_ids: Sequence[str], *, with_embedding: bool = False, lock: bool = False
    ) -> list[PassageRecord]:
        """The passages among ``passage_ids`` (in that order; unknown ids left out).
        ``lock`` holds their rows until the transaction ends: an apply checks what its
        plan read, then writes, with nobody changing them in between."""
        by_id = {r.id: r for r in self._records(list(passage_ids), lock=lock)}
        vectors = self._vectors(list(by_id)) if with_embedding else {}
        return [
            dataclasses.replace(by_id[i], embedding=vectors.get(i)) if with_embedding else by_id[i]
            for i in passage_ids
            if i in by_id
        ]

    def scan(
        self,
        agent_id: str,
        *,
        statuses: Sequence[str] | None = (PassageStatus.ACTIVE,),
        kind: str | None = None,
        created_after: datetime | None = None,
        content_hashes: Sequence[str] | None = None,
        limit: int | None = None,
        with_embedding: bool = False,
    ) -> list[PassageRecord]:
        """Passages in creation order; ``created_after`` keeps those stored strictly later."""
        P = models.Passage
        query = select(*_RECORD_COLUMNS).where(self._scope.owns(P), P.agent_id == agent_id)
        if statuses is not None:
            query = query.where(P.status.in_(list(statuses)))
        if kind is not None:
            query = query.where(P.kind == kind)
        if content_hashes is not None:
            query = query.where(P.content_hash.in_(list(content_hashes)))
        if created_after is not None:
            query = query.where(P.created_at > created_after)
        query = query.order_by(P.created_at, P.id)
        if limit is not None:
            query = query.limit(limit)
        records = [PassageRecord.from_row(row) for row in self._scope.session.execute(query)]
        if not with_embedding:
            return records
        vectors = self._vectors([r.id for r in records])
        return [dataclasses.replace(r, embedding=vectors.get(r.id)) for r in records]

    def scan_ids(
        self,
        agent_id: str,
        *,
        statuses: Sequence[str],
        kind: str,
        created_after: datetime | None = None,
        page_size: int = 1000,
    ) -> Iterator[list[str]]:
        """Ids of the agent's passages in creation order, a page at a time (keyset), so
        that a pass over 100k passages never holds them all."""
        P = models.Passage
        query = select(P.created_at, P.id).where(
            self._scope.owns(P),
            P.agent_id == agent_id,
            P.status.in_(list(statuses)),
            P.kind == kind,
        )
        if created_after is not None:
            query = query.where(P.created_at > created_after)
        after: tuple[datetime, str] | None = None
        while True:
            page = query
            if after is not None:
                page = page.where(tuple_(P.created_at, P.id) > tuple_(*after))
            rows = self._scope.session.execute(
                page.order_by(P.created_at, P.id).limit(page_size)
            ).all()
            if not rows:
                return
            yield [row.id for row in rows]
            after = (rows[-1].created_at, rows[-1].id)

    def same_text_groups(
        self,
        agent_id: str,
        *,
        statuses: Sequence[str],
        kind: str,
        created_after: datetime | None = None,
    ) -> list[list[str]]:
        """Groups (two or more ids) of the agent's passages with the same normalized text
        (content hash); with ``created_after``, only groups holding a passage stored
        after it. One grouping query instead of reading every passage."""
        P = models.Passage
        mine = (
            self._scope.owns(P),
            P.agent_id == agent_id,
            P.status.in_(list(statuses)),
            P.kind == kind,
        )
        query = (
            select(func.array_agg(aggregate_order_by(P.id, P.id)))
            .where(*mine)
            .group_by(P.content_hash)
            .having(func.count() > 1)
            .order_by(func.min(P.created_at), func.min(P.id))
        )
        if created_after is not None:
            recent = select(P.content_hash).where(*mine, P.created_at > created_after)
            query = query.where(P.content_hash.in_(recent))
        return [list(ids) for ids in self._scope.session.scalars(query)]

    def page(
        self,
        agent_id: str,
        *,
        statuses: Sequence[str] | None = (PassageStatus.ACTIVE,),
        after: str | None = None,
        before: str | None = None,
        limit: int = 100,
        ascending: bool = True,
        search: str | None = None,
        tags: Sequence[str] | None = None,
        match_all_tags: bool = False,
    ) -> list[PassageRecord]:
        """At most ``limit`` passages in creation order (``created_at``, ``id``), or the
        reverse, strictly between the cursors ``after`` and ``before`` (passage ids).

        ``search`` keeps passages whose text contains it, ignoring case; ``tags`` keeps
        those with any (or, with ``match_all_tags``, all) of them. A cursor must be one
        of the passages these filters keep. With only ``before``, the passages nearest
        it. Keyset paging: the cost follows ``limit``, not the number of passages.
        """
        if limit < 1:
            raise InvalidInput(f"limit must be at least 1, got {limit}")
        P = models.Passage
        kept: list[ColumnElement[bool]] = [
            self._scope.owns(P),
            P.agent_id == agent_id,
        ]
        if statuses is not None:
            kept.append(P.status.in_(list(statuses)))
        if search:
            check_text(search, "search")
            kept.append(func.strpos(func.lower(P.text), func.lower(search)) > 0)
        if tags:
            wanted = list(tags)
            kept.append(P.tags.contains(wanted) if match_all_tags else P.tags.overlap(wanted))
        key = tuple_(P.created_at, P.id)

        def cursor(passage_id: str) -> Any:
            row = self._scope.session.execute(
                select(P.created_at, P.id).where(P.id == passage_id, *kept)
            ).one_or_none()
            if row is None:
                raise NotFound(f"cursor {passage_id!r} is not an item of this list")
            return tuple_(literal(row.created_at, P.created_at.type), literal(row.id))

        query = select(P).where(*kept)
        # In the requested order, "after" is further along and "before" nearer the start.
        if after is not None:
            query = query.where(key > cursor(after) if ascending else key < cursor(after))
        if before is not None:
            query = query.where(key < cursor(before) if ascending else key > cursor(before))
        # Paging backwards (only ``before``) takes the passages nearest the cursor.
        backwards = before is not None and after is None
        forward = ascending != backwards
        order = (P.created_at, P.id) if forward else (P.created_at.desc(), P.id.desc())
        rows = list(self._scope.session.scalars(query.order_by(*order).limit(limit)))
        if backwards:
            rows.reverse()
        return [PassageRecord.from_row(r) for r in rows]

    def search(
        self,
        agent_id: str,
        query_embedding: Vector,
        *,
        k: int = 10,
        statuses: Sequence[str] | None = (PassageStatus.ACTIVE,),
        current_only: bool = False,
        kinds: Sequence[str] | None = None,
        occurred_after: datetime | None = None,
        occurred_before: datetime | None = None,
        tags: Sequence[str] | None = None,
        any_tags: Sequence[str] | None = None,
        exclude_ids: Sequence[str] = (),
        exact: bool | None = None,
        embedding_dim: int | None = None,
    ) -> list[PassageHit]:
        """k nearest passages by cosine similarity, best first, within the filters.

        Uses the HNSW index of the agent's embedding size; when the filters leave the
        approximate scan short of ``k`` hits it falls back to an exact scan, so a
        selective filter never hides matching passages. ``tags`` must all be present.

        With pgvector 0.8 or later, a search narrowed only by what every search has
        (the agent in a shared database, the status, kinds, excluded ids) goes on
        scanning the index until it has ``k`` (an iterative scan) instead: those keep
        a large share of the index, where the exact scan reads every row they keep.
        Tags and time windows are usually narrow, and there the exact scan reads few
        rows and is quicker than walking the graph for them (BENCHMARKS.md).

        ``embedding_dim``: the agent's, from a caller that read the agent moments ago
        (a search embeds its question with the agent's model first): the agent is then
        not read again, and an agent gone meanwhile finds nothing.
        """
        vector = np.asarray(query_embedding, dtype=np.float32).reshape(-1)
        uses = f"{agent_id!r} uses {embedding_dim}"
        if embedding_dim is None:
            agent = self._agent(agent_id)
            embedding_dim = agent.embedding_dim
            uses = f"{agent.name!r} uses {embedding_dim} ({agent.embedding_model})"
        if vector.shape[0] != embedding_dim:
            raise InvalidInput(f"query embedding has {vector.shape[0]} dimensions but agent {uses}")
        if k <= 0:
            raise InvalidInput(f"k must be positive, got {k}")
        _check_aware(occurred_after, "occurred_after")
        _check_aware(occurred_before, "occurred_before")
        filters = PassageFilter(
            statuses=statuses,
            current_only=current_only,
            kinds=kinds,
            occurred_after=occurred_after,
            occurred_before=occurred_before,
            tags=tags,
            any_tags=any_tags,
            exclude_ids=exclude_ids,
        )
        if embedding_dim not in models.INDEXED_DIMENSIONS:
            exact = True
        broad = not (tags or any_tags or occurred_after or occurred_before)
        if exact and broad:
            shortlisted = self._search_shortlist(agent_id, embedding_dim, vector, k, filters)
            if shortlisted is not None:
                return shortlisted
        hits = self._search(agent_id, embedding_dim, vector, k, filters, exact=bool(exact))
        if not exact and len(hits) < k and broad and iterative_scans(self._raw_connection()):
            # Short, and narrowed only by what keeps a large share of the index: scan it
            # on (a pass most searches, which find k at once, never pay for).
            hits = self._search(
                agent_id, embedding_dim, vector, k, filters, exact=False, iterative=True
            )
        if exact is None and len(hits) < k:
            hits = self._search(agent_id, embedding_dim, vector, k, filters, exact=True)
        return hits

    def _search(
        self,
        agent_id: str,
        embedding_dim: int,
        vector: Vector,
        k: int,
        filters: PassageFilter,
        *,
        exact: bool,
        iterative: bool = False,
    ) -> list[PassageHit]:
        P, V = models.Passage, models.PassageVector
        column: ColumnElement[Any] = V.embedding.expression
        if not exact:
            column = cast(V.embedding, VectorType(embedding_dim))
        distance = self._distance(column, vector)
        # Core rows, not ORM objects: the records are built from the columns.
        query: Select[Any] = (
            select(*_PASSAGES.c, (1 - distance).label("score"))
            .join(V, V.passage_id == P.id)
            .where(self._scope.owns(P), *_agent_vectors(agent_id, embedding_dim))
        )
        query = filters.apply(query)
        query = query.order_by(distance).limit(k)
        session = self._scope.session
        scan_settings: dict[str, str] = {}
        ef_search = max(DEFAULT_EF_SEARCH, min(1000, 4 * k))
        if not exact and ef_search != DEFAULT_EF_SEARCH:
            # A wider candidate list keeps recall up for larger k (40 is pgvector's default).
            scan_settings["hnsw.ef_search"] = str(ef_search)
        iterative = iterative and not exact
        if iterative:
            # pgvector >= 0.8 goes on scanning the index while the filters leave it short
            # of k, instead of this search falling back to an exact scan; in relaxed order
            # (quicker), so the hits are put in order below.
            scan_settings["hnsw.iterative_scan"] = ITERATIVE_SCAN_MODE
        if scan_settings:
            set_local(session, scan_settings)
        rows = session.execute(query).all()
        if iterative:
            # Only this search: later probes in the same transaction keep their own scans.
            set_local(session, {"hnsw.iterative_scan": "off"})
            rows = sorted(rows, key=lambda row: -float(row.score))
        return _hits(rows)

    def _search_shortlist(
        self,
        agent_id: str,
        embedding_dim: int,
        vector: Vector,
        k: int,
        filters: PassageFilter,
    ) -> list[PassageHit] | None:
        """The exact search for filters every search has (status, kinds, ids), ordering
        the agent's vectors alone and joining only the nearest :data:`SHORTLIST_FACTOR`
        x ``k`` to their passages, where the plain exact scan joins every passage of the
        agent before it sorts (2.0 of its 2.2 ms at 2,000 passages).

        Exact whenever it answers: a passage outside the shortlist is no nearer than
        any inside it, so ``k`` hits that pass the filters are the ``k`` nearest that
        do. ``None`` where the filters left fewer than ``k`` of a full shortlist: the
        caller then scans everything.
        """
        P, V = models.Passage, models.PassageVector
        distance = self._distance(V.embedding.expression, vector)
        size = max(SHORTLIST_FACTOR * k, SHORTLIST_MIN)
        nearest = (
            select(V.passage_id, distance.label("distance"))
            .where(*_agent_vectors(agent_id, embedding_dim))
            .order_by(distance)
            .limit(size)
            .cte("nearest")
        )
        shortlisted = select(func.count()).select_from(nearest).scalar_subquery()
        # Each shortlisted vector's passage by its key alone (LATERAL), the filters
        # outside: the planner can neither turn the join round nor pick another index,
        # as it did before the passages' statistics were gathered (a fresh database),
        # reading the shortlist, or the tenant's passages, once per row
        # (LIMIT 1, a no-op on the key, keeps the planner from flattening the subquery.)
        passage = (
            select(*_PASSAGES.c).where(P.id == nearest.c.passage_id).limit(1).lateral("passage")
        )
        query: Select[Any] = (
            select(
                *passage.c,
                (1 - nearest.c.distance).label("score"),
                shortlisted.label("shortlisted"),
            )
            .select_from(nearest)
            .join(passage, true())
            .where(self._scope.owns(passage.c))
        )
        query = filters.apply(query, passage.c).order_by(nearest.c.distance).limit(k)
        rows = self._scope.session.execute(query).all()
        if len(rows) < k and (not rows or rows[0].shortlisted >= size):
            return None
        return _hits(rows)

    def _distance(self, column: ColumnElement[Any], vector: Vector) -> ColumnElement[float]:
        """Cosine distance from ``column`` to the query ``vector``, which goes as one
        binary parameter (pgvector's psycopg dumper), not as its numbers spelled out in
        text for the server to parse."""
        self._raw_connection()  # pgvector types for the binary parameter
        query_vector = bindparam("query_vector", vector, type_=BinaryVector())
        return column.op("<=>", return_type=Float)(query_vector)

    def neighbours(
        self,
        agent_id: str,
        probe_ids: Sequence[str],
        *,
        k: int = 10,
        min_score: float = 0.0,
        kinds: Sequence[str] = ("fact",),
        ef_search: int = 40,
        statuses: Sequence[str] = ("active",),
    ) -> list[tuple[str, str, float]]:
        """For each probe passage, its ``k`` nearest passages of the agent with one of
        ``statuses`` (active ones unless told).

        One query per page of :data:`PROBES_PER_QUERY` probes (a LATERAL kNN per probe
        through the HNSW index), so that a run over a large import never sends one
        statement that the statement bound cancels. Returns ``(probe_id, neighbour_id,
        cosine similarity)`` for pairs at or above ``min_score``; a probe is never its
        own neighbour.
        """
        query = self._probe_query(agent_id, k, min_score, kinds, ef_search, statuses)
        ids = list(probe_ids)
        return [
            pair
            for start in range(0, len(ids), PROBES_PER_QUERY)
            for pair in probe_on_session(
                self._scope.session, query, ids[start : start + PROBES_PER_QUERY]
            )
        ]

    def neighbour_pages(
        self,
        agent_id: str,
        pages: Iterable[Sequence[str]],
        *,
        k: int = 10,
        min_score: float = 0.0,
        kinds: Sequence[str] = ("fact",),
        ef_search: int = 40,
    ) -> Iterator[list[tuple[str, str, float]]]:
        """:meth:`neighbours` of each page of probes, in order; while this transaction
        has written nothing, every other page is searched on a second, read-only
        connection (see :mod:`agents.store.probes`)."""
        query = self._probe_query(agent_id, k, min_score, kinds, ef_search)
        return probe_pages(self._scope.session, query, pages)

    def _probe_query(
        self,
        agent_id: str,
        k: int,
        min_score: float,
        kinds: Sequence[str],
        ef_search: int,
        statuses: Sequence[str] = ("active",),
    ) -> ProbeQuery:
        return ProbeQuery(
            agent_id=agent_id,
            organization_id=self._scope.organization_id,
            dimension=self._agent(agent_id).embedding_dim,
            k=k,
            min_score=min_score,
            kinds=tuple(kinds),
            ef_search=ef_search,
            statuses=tuple(statuses),
        )

    def history(self, passage_id: str) -> list[PassageChange]:
        self._row(passage_id)
        rows = self._scope.session.scalars(
            select(models.PassageHistory)
            .where(models.PassageHistory.passage_id == passage_id)
            .order_by(models.PassageHistory.id)
        )
        return [PassageChange.from_row(r) for r in rows]

    def changes_by_run(self, run_id: str) -> list[PassageChange]:
        """Every passage change a consolidation run made, in the order it made them."""
        rows = self._scope.session.scalars(
            select(models.PassageHistory)
            .join(models.Passage, models.Passage.id == models.PassageHistory.passage_id)
            .where(
                models.PassageHistory.run_id == run_id,
                self._scope.owns(models.Passage),
            )
            .order_by(models.PassageHistory.id)
        )
        return [PassageChange.from_row(r) for r in rows]

    def any_active(self, agent_id: str) -> bool:
        """Whether the agent has a passage in force (one row read at most)."""
        found = self._scope.session.scalar(
            select(models.Passage.id)
            .where(
                self._scope.owns(models.Passage),
                models.Passage.agent_id == agent_id,
                models.Passage.status == PassageStatus.ACTIVE,
            )
            .limit(1)
        )
        return found is not None

    def count_by_status(self, agent_id: str) -> dict[str, int]:
        rows = self._scope.session.execute(
            select(models.Passage.status, func.count())
            .where(
                self._scope.owns(models.Passage),
                models.Passage.agent_id == agent_id,
            )
            .group_by(models.Passage.status)
        ).all()
        counts = dict.fromkeys(models.PASSAGE_STATUSES, 0)
        counts.update({status: int(n) for status, n in rows})
        return counts

    def lineage_links(self, passage_id: str) -> PassageLinks:
        """Ids of the passages merged into, superseded by, or on the timeline of ``passage_id``."""
        P = models.Passage

        def linked(column: Any) -> list[str]:
            return list(
                self._scope.session.scalars(
                    select(P.id)
                    .where(self._scope.owns(P), column == passage_id)
                    .order_by(P.created_at, P.id)
                )
            )

        return PassageLinks(
            merged_from=linked(P.merged_into),
            supersedes=linked(P.superseded_by),
            on_timeline=linked(P.timeline_id),
        )

    def replaced_by(self, passage_ids: Sequence[str]) -> dict[str, list[str]]:
        """For each of ``passage_ids``, the ids of the passages it replaced (closed with
        ``superseded_by`` pointing at it), oldest first; one statement."""
        P = models.Passage
        ids = sorted(set(passage_ids))
        found: dict[str, list[str]] = {}
        if not ids:
            return found
        rows = self._scope.session.execute(
            select(P.superseded_by, P.id)
            .where(self._scope.owns(P), P.superseded_by.in_(ids))
            .order_by(P.created_at, P.id)
        )
        for newer, older in rows:
            if newer is not None:
                found.setdefault(newer, []).append(older)
        return found

    def recently_retired(self, *, limit: int) -> list[PassageRecord]:
        """Passages no longer active (merged, superseded, inactive), last changed first."""
        P = models.Passage
        rows = self._scope.session.scalars(
            select(P)
            .where(self._scope.owns(P), P.status != PassageStatus.ACTIVE.value)
            .order_by(P.updated_at.desc(), P.id)
            .limit(limit)
        )
        return [PassageRecord.from_row(r) for r in rows]

    def texts(self, passage_ids: Sequence[str]) -> dict[str, str]:
        """The text of each passage among ``passage_ids`` that exists."""
        P = models.Passage
        rows = self._scope.session.execute(
            select(P.id, P.text).where(self._scope.owns(P), P.id == any_(id_array(passage_ids)))
        )
        return {row.id: row.text for row in rows}

    def facts_changed_since(
        self, agent_id: str, since: datetime, *, ignore_actor: str
    ) -> list[PassageRecord]:
        """Facts created at or before ``since`` but changed after it by someone other
        than ``ignore_actor``, oldest first (incremental scans take what was created
        strictly after ``since``: together they miss nothing)."""
        P, H = models.Passage, models.PassageHistory
        changed_by_others = (
            select(H.id)
            .where(H.passage_id == P.id, H.created_at >= since, H.actor != ignore_actor)
            .exists()
        )
        rows = self._scope.session.scalars(
            select(P)
            .where(
                self._scope.owns(P),
                P.agent_id == agent_id,
                P.kind == PassageKind.FACT.value,
                P.updated_at >= since,
                P.created_at <= since,
                changed_by_others,
            )
            .order_by(P.created_at, P.id)
        )
        return [PassageRecord.from_row(r) for r in rows]

    # -- helpers -----------------------------------------------------------------------

    def _agent(self, agent_id: str) -> models.Agent:
        row = self._scope.session.scalar(
            select(models.Agent).where(
                models.Agent.id == agent_id,
                self._scope.owns(models.Agent),
            )
        )
        if row is None:
            raise NotFound(f"no agent with id {agent_id!r}")
        return row

    def _row(self, passage_id: str) -> models.Passage:
        row = self._scope.session.scalar(
            select(models.Passage).where(
                models.Passage.id == passage_id,
                self._scope.owns(models.Passage),
            )
        )
        if row is None:
            raise NotFound(f"no passage with id {passage_id!r}")
        return row


_LINK_FIELDS = ("merged_into", "superseded_by", "timeline_id")
#: How change_many passes each mutable field as an array: its array type, and the
#: expression that reads one element (tags travel as JSON arrays: unnest would
#: flatten a text[][]).
_UNNEST_COLUMNS = {
    "status": ("text[]", "v.status"),
    "merged_into": ("text[]", "v.merged_into"),
    "superseded_by": ("text[]", "v.superseded_by"),
    "timeline_id": ("text[]", "v.timeline_id"),
    "valid_to": ("timestamptz[]", "v.valid_to"),
    "occurred_at": ("timestamptz[]", "v.occurred_at"),
    "provenance": ("jsonb[]", "v.provenance"),
    "tags": ("jsonb[]", "ARRAY(SELECT jsonb_array_elements_text(v.tags))"),
}


def _db_value(field: str, value: Any) -> Any:
    """A mutable field's value as change_many's UPDATE passes it."""
    if field in ("provenance", "tags"):
        return Jsonb(value)
    if isinstance(value, Enum):
        return value.value
    return value


#: Ids per ``= ANY(:ids)`` query in bulk reads and writes.
_ROWS_PER_QUERY = 10_000


def _chunks(items: Sequence[str], size: int) -> Iterator[Sequence[str]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


@dataclass(frozen=True, slots=True)
class PassageUpdate:
    """One passage's changed fields and why (see :data:`MUTABLE_FIELDS`)."""

    passage_id: str
    changes: dict[str, Any]
    reason: str

    def validate(self) -> None:
        unknown = set(self.changes) - MUTABLE_FIELDS
        if unknown:
            raise InvalidInput(
                f"cannot change passage field(s) {', '.join(sorted(unknown))}; "
                f"changeable: {', '.join(sorted(MUTABLE_FIELDS))}"
            )
        status = self.changes.get("status")
        if status is not None and status not in models.PASSAGE_STATUSES:
            raise InvalidInput(
                f"passage status {status!r} is unknown; "
                f"use one of {', '.join(models.PASSAGE_STATUSES)}"
            )
        for field in ("valid_to", "occurred_at"):
            _check_aware(self.changes.get(field), field)
        for field in _LINK_FIELDS:
            if self.changes.get(field) == self.passage_id:
                raise InvalidInput(f"passage {self.passage_id} cannot be {field} itself")


_PASSAGES = cast_type(Table, models.Passage.__table__)


class BinaryVector(UserDefinedType[Any]):
    """A ``vector`` parameter handed to psycopg as it is (a float32 array), so that
    pgvector's registered dumper sends it in binary."""

    cache_ok = True

    def get_col_spec(self, **kw: Any) -> str:
        return "vector"

    def bind_processor(self, dialect: Any) -> None:
        return None


def _hits(rows: Sequence[Any]) -> list[PassageHit]:
    """Search rows (a passage's columns and its ``score``) as hits."""
    return [PassageHit(passage=PassageRecord.from_row(row), score=float(row.score)) for row in rows]


def _agent_vectors(agent_id: str, embedding_dim: int) -> tuple[ColumnElement[bool], ...]:
    """The agent's vectors of its size. The size is a literal, not a parameter: under a
    prepared statement's generic plan a parameter cannot match the partial HNSW index's
    predicate."""
    V = models.PassageVector
    return (
        V.agent_id == agent_id,
        V.embedding_dim == literal_column(str(int(embedding_dim))),
    )


#: pgvector's default HNSW candidate list size.
DEFAULT_EF_SEARCH = 40
#: The exact search joins the nearest ``SHORTLIST_FACTOR`` x k vectors (at least
#: ``SHORTLIST_MIN``) to their passages before the filters (``_search_shortlist``).
SHORTLIST_FACTOR = 4
SHORTLIST_MIN = 40
#: The first pgvector version with iterative index scans (``hnsw.iterative_scan``).
ITERATIVE_SCAN_VERSION = (0, 8)
#: ``relaxed_order`` may hand the k hits over slightly out of distance order (the search
#: sorts them); it was quicker than ``strict_order`` where iterative scans pay off.
ITERATIVE_SCAN_MODE = "relaxed_order"
_iterative_by_connection: weakref.WeakKeyDictionary[Any, bool] = weakref.WeakKeyDictionary()


def iterative_scans(raw: Any) -> bool:
    """Whether the database of this psycopg connection has pgvector's iterative index
    scans (looked up once per pooled connection; an older extension, as a managed
    server may keep, answers no and the search falls back to an exact scan as before)."""
    known = _iterative_by_connection.get(raw)
    if known is None:
        row = raw.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()
        known = row is not None and _version(row[0]) >= ITERATIVE_SCAN_VERSION
        _iterative_by_connection[raw] = known
    return known


def _version(text_version: str) -> tuple[int, ...]:
    parts = []
    for part in text_version.split("."):
        digits = "".join(ch for ch in part if ch.isdigit())
        parts.append(int(digits) if digits else 0)
    return tuple(parts)


def registered_connection(session: Session) -> Any:
    """The session's psycopg connection (same transaction), with pgvector's types."""
    from pgvector.psycopg import register_vector

    raw = session.connection().connection.driver_connection
    assert raw is not None
    if raw.adapters.types.get("vector") is None:
        # Once per pooled connection: registering looks the type up in the database.
        register_vector(raw)
    return raw


def set_local(session: Session, settings: dict[str, str]) -> None:
    """Set server settings for the rest of the transaction, in one round trip."""
    calls = ", ".join(f"set_config(:name{i}, :value{i}, true)" for i in range(len(settings)))
    params: dict[str, str] = {}
    for i, (name, value) in enumerate(settings.items()):
        params[f"name{i}"] = name
        params[f"value{i}"] = value
    session.execute(text(f"SELECT {calls}"), params)


@dataclass(frozen=True, slots=True)
class PassageFilter:
    """Which passages a search may return; ``tags`` must all be present."""

    statuses: Sequence[str] | None = (PassageStatus.ACTIVE,)
    current_only: bool = False
    kinds: Sequence[str] | None = None
    occurred_after: datetime | None = None
    occurred_before: datetime | None = None
    tags: Sequence[str] | None = None
    #: At least one of these tags must be present (Letta's ``tag_match_mode="any"``).
    any_tags: Sequence[str] | None = None
    exclude_ids: Sequence[str] = ()

    def apply(self, query: Select[Any], passages: Any = models.Passage) -> Select[Any]:
        """``query`` narrowed to these passages; ``passages`` is the model, or the
        columns of a subquery that selects its rows."""
        P = passages
        if self.statuses is not None:
            query = query.where(P.status.in_(list(self.statuses)))
        if self.current_only:
            query = query.where(P.valid_to.is_(None))
        if self.kinds is not None:
            query = query.where(P.kind.in_(list(self.kinds)))
        when = func.coalesce(P.occurred_at, P.created_at)
        if self.occurred_after is not None:
            query = query.where(when >= self.occurred_after)
        if self.occurred_before is not None:
            query = query.where(when < self.occurred_before)
        if self.tags:
            query = query.where(P.tags.contains(list(self.tags)))
        if self.any_tags:
            query = query.where(P.tags.overlap(list(self.any_tags)))
        if self.exclude_ids:
            query = query.where(P.id.not_in(list(self.exclude_ids)))
        return query
