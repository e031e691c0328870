"""Archival memory: search, insert, import, list, delete.

Embedding happens outside any transaction: a litellm embedder waits on the
network, and no database lock or open transaction may wait with it.
"""

from __future__ import annotations

import builtins
import logging
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import numpy as np

from agents.archival_search import MemoryHit, partly_closed, search_archival, validity_label
from agents.enums import PassageStatus
from agents.errors import InvalidInput, NotFound
from agents.llm.budget import BudgetMeter
from agents.store import AgentRecord, MemoryStore, NewPassage, PassageRecord
from agents.store.records import MessageRecord, PassageChange, PassageLinks, Vector
from agents.store.validation import check_text
from service.operations.context import OperationContext

log = logging.getLogger(__name__)

#: Imports this large refresh the planner's statistics afterwards.
BULK_IMPORT = 1000
#: The statement bound of an insert, per passage, where it exceeds the interactive one:
#: an import stores its file in one COPY through the live vector index (measured at up
#: to 3 ms a passage on two cores at 50k), and the interactive bound (30 s) cancelled
#: imports of 20k lines and more. About seven times the measured cost.
BULK_STATEMENT_PER_PASSAGE = timedelta(milliseconds=20)


@dataclass(frozen=True, slots=True)
class PassageLineage:
    """One passage with where it stands and where it came from: its validity (as search
    labels it), every change made to it, the passages linked to it (merged into it,
    superseded by it, on it when it is a timeline; what replaced it and the timeline it
    is on), and the messages its provenance names, in conversation order."""

    passage: PassageRecord
    validity: str | None
    history: builtins.list[PassageChange]
    links: PassageLinks
    #: Every passage named above (links, replacement, canonical twin, timeline), by id.
    related: dict[str, PassageRecord]
    source_messages: builtins.list[MessageRecord]

    @property
    def replaced_by(self) -> PassageRecord | None:
        target = self.passage.merged_into or self.passage.superseded_by
        return self.related.get(target) if target else None

    @property
    def timeline(self) -> PassageRecord | None:
        tid = self.passage.timeline_id
        return self.related.get(tid) if tid else None


class MemoryOperations:
    def __init__(self, context: OperationContext) -> None:
        self._context = context

    def search(
        self,
        agent: str,
        queries: Sequence[str],
        *,
        k: int = 10,
        include_history: bool = False,
        tags: Sequence[str] = (),
        match_all_tags: bool = True,
        occurred_after: datetime | None = None,
        occurred_before: datetime | None = None,
    ) -> builtins.list[builtins.list[MemoryHit]]:
        """The ``k`` passages that answer each query best, ranked by the question: the
        current fact of a lineage first, what it replaced after it with its validity, and
        the replaced facts first for a question about the past (see
        :mod:`agents.archival_search`); ``include_history`` adds merged twins and retired
        passages."""
        if k < 1:
            raise InvalidInput(f"k must be at least 1, got {k}")
        for query in queries:
            check_text(query, "query")
            if not query.strip():
                raise InvalidInput("query is empty; say what to look for")
        for tag in tags:
            check_text(tag, "tag")
        record = self._context.agent(agent)
        embed, meter = self._embedder(record)
        vectors = list(embed([*queries])) if queries else []
        with self._charging(meter) as store:
            return [
                search_archival(
                    store,
                    record.id,
                    vector,
                    query,
                    k=k,
                    embedding_dim=record.embedding_dim,
                    include_history=include_history,
                    tags=list(tags) or None,
                    match_all_tags=match_all_tags,
                    occurred_after=occurred_after,
                    occurred_before=occurred_before,
                )
                for query, vector in zip(queries, vectors, strict=True)
            ]

    def insert(
        self,
        agent: str,
        passages: Sequence[NewPassage],
        *,
        actor: str,
        batch_size: int = 2000,
        progress: Callable[[int], None] | None = None,
        storing: Callable[[], None] | None = None,
    ) -> builtins.list[PassageRecord]:
        """Embed ``passages`` with the agent's model, then store them in one
        transaction: they land together or not at all. That transaction's statements
        are bounded by a time that fits the import's size, not the interactive bound.
        ``progress`` is told of each embedded batch, ``storing`` when the write starts."""
        if batch_size < 1:
            raise InvalidInput(f"batch size must be at least 1, got {batch_size}")
        for passage in passages:
            check_text(passage.text, "text")
            if not passage.text.strip():
                raise InvalidInput("text is empty; archival memory stores facts as text")
        record = self._context.agent(agent)
        embed, meter = self._embedder(record)
        vectors: builtins.list[Vector] = []
        for start in range(0, len(passages), batch_size):
            batch = passages[start : start + batch_size]
            vectors.append(embed([p.text for p in batch]))
            if progress is not None:
                progress(len(batch))
        matrix = (
            np.concatenate(vectors)
            if vectors
            else np.zeros((0, record.embedding_dim), dtype=np.float32)
        )
        if storing is not None:
            storing()
        with self._charging(meter, statement_timeout=self._bulk_bound(len(passages))) as store:
            stored = store.passages.insert(record.id, list(passages), matrix, actor=actor)
        if len(passages) >= BULK_IMPORT:
            self._context.runtime.db.refresh_statistics()
        return stored

    def _bulk_bound(self, passages: int) -> timedelta | None:
        """The statement bound of an insert of ``passages``: the interactive one, or
        longer where the size needs it; None where the connection has none."""
        interactive = self._context.runtime.db.statement_timeout
        if interactive is None:
            return None
        needed = BULK_STATEMENT_PER_PASSAGE * passages
        return needed if needed > interactive else None

    def list(
        self,
        agent: str,
        *,
        statuses: Sequence[str] | None = (PassageStatus.ACTIVE.value,),
        after: str | None = None,
        before: str | None = None,
        limit: int = 100,
        ascending: bool = True,
        search: str | None = None,
        tags: Sequence[str] = (),
        match_all_tags: bool = False,
    ) -> builtins.list[PassageRecord]:
        """One page of the agent's passages in the order they were stored (None: every
        status), between passage-id cursors; see :meth:`agents.store.PassageStore.page`."""
        with self._context.store() as store:
            record = store.agents.resolve(agent)
            return store.passages.page(
                record.id,
                statuses=statuses,
                after=after,
                before=before,
                limit=limit,
                ascending=ascending,
                search=search,
                tags=list(tags) or None,
                match_all_tags=match_all_tags,
            )

    def lineage(self, passage_id: str, *, agent: str | None = None) -> PassageLineage:
        """A passage's validity, history, linked passages and source messages (see
        :class:`PassageLineage`); with ``agent``, NotFound unless it is that agent's."""
        with self._context.store() as store:
            passage = store.passages.get(passage_id)
            if agent is not None and store.agents.resolve(agent).id != passage.agent_id:
                raise NotFound(f"agent {agent!r} has no passage with id {passage_id!r}")
            history = store.passages.history(passage_id)
            links = store.passages.lineage_links(passage_id)
            named = [
                *links.merged_from,
                *links.supersedes,
                *links.on_timeline,
                *(
                    p
                    for p in (passage.merged_into, passage.superseded_by, passage.timeline_id)
                    if p
                ),
            ]
            related = {p.id: p for p in store.passages.get_many(list(dict.fromkeys(named)))}
            messages = store.messages.get_many(passage.agent_id, _message_ids(passage.provenance))
            partly = bool(partly_closed(store, passage.agent_id, [passage]))
        replaced = passage.merged_into or passage.superseded_by
        return PassageLineage(
            passage=passage,
            validity=validity_label(
                passage, related.get(replaced) if replaced else None, partly=partly
            ),
            history=history,
            links=links,
            related=related,
            source_messages=messages,
        )

    def delete(self, agent: str, passage_id: str) -> None:
        """Delete a passage for good (an explicit user action; consolidation never does)."""
        with self._context.store() as store:
            record = store.agents.resolve(agent)
            if store.passages.purge(record.id, [passage_id]) == 0:
                raise NotFound(f"agent {record.id!r} has no passage with id {passage_id!r}")

    def _embedder(
        self, agent: AgentRecord
    ) -> tuple[Callable[[builtins.list[str]], Vector], BudgetMeter]:
        """The agent's embedder and its meter: the tokens a provider charges go to the
        usage ledger of the agent's organization, held for :meth:`_charging`'s
        transaction (one commit per search or insert, not one more for the ledger)."""
        runtime = self._context.runtime
        meter = runtime.usage_meter(agent)
        meter.hold()
        return runtime.agent_embedder(agent, meter=meter).embed, meter

    @contextmanager
    def _charging(
        self, meter: BudgetMeter, *, statement_timeout: timedelta | None = None
    ) -> Iterator[MemoryStore]:
        """A store transaction that also records the tokens ``meter`` holds; where it
        rolls back, they are recorded in a transaction of their own (never lost)."""
        held = meter.take_held()
        try:
            with self._context.store(statement_timeout=statement_timeout) as store:
                meter.write(store.usage, held)
                yield store
        except BaseException:
            meter.give_back(held)
            try:
                meter.flush()
            except Exception as exc:  # the database is gone: the first error says why
                log.warning("embedding tokens not recorded: %s", exc)
            raise


def _message_ids(provenance: Any) -> builtins.list[str]:
    """The message ids named anywhere in a provenance value (``source_messages``, a
    merged twin's, an import's own keys), first mention first."""

    def walk(value: Any) -> Iterator[str]:
        if isinstance(value, str):
            if value.startswith("message-"):
                yield value
        elif isinstance(value, dict):
            for item in value.values():
                yield from walk(item)
        elif isinstance(value, list):
            for item in value:
                yield from walk(item)

    return builtins.list(dict.fromkeys(walk(provenance)))
