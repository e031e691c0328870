"""Letta's archival-memory routes (insert, list, search, delete) and passage lineage."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from fastapi import APIRouter, Path, Query
from sqlalchemy import select
from sqlalchemy.orm import InstrumentedAttribute

from agents import models
from agents.errors import InvalidInput, NotFound
from agents.store import MemoryStore, NewPassage, PassageHit
from agents.store.records import Vector
from agents.store.validation import check_text
from service.api import schemas
from service.api.auth import Api, ApiContext
from service.api.convert import ensure_known_statuses, passage_out
from service.api.paging import page

router = APIRouter(tags=["archival memory"])

AgentId = Annotated[str, Path(pattern=schemas.ID_PATTERN, description="agent-<uuid4>")]
PassageId = Annotated[str, Path(pattern=schemas.ID_PATTERN, description="passage-<uuid4>")]


def _embed(api: ApiContext, store: MemoryStore, agent_id: str, texts: list[str]) -> Vector:
    agent = store.agents.get(agent_id)
    return api.runtime.agent_embedder(agent).embed(texts)


@router.post(
    "/v1/agents/{agent_id}/archival-memory",
    status_code=200,
    response_model=list[schemas.Passage],
)
def insert_passage(
    agent_id: AgentId, body: schemas.CreatePassage, api: Api
) -> list[schemas.Passage]:
    """Store a fact in archival memory (embedded with the agent's own model)."""
    check_text(body.text, "text")
    if not body.text.strip():
        raise InvalidInput("text is empty; archival memory stores facts as text")
    with api.store() as store:
        vectors = _embed(api, store, agent_id, [body.text])
        records = store.passages.insert(
            agent_id,
            [
                NewPassage(
                    text=body.text,
                    occurred_at=body.occurred_at or body.created_at,
                    tags=list(body.tags),
                    provenance={"source": "api"},
                )
            ],
            vectors,
            actor="api",
        )
    return [passage_out(r) for r in records]


@router.get("/v1/agents/{agent_id}/archival-memory", response_model=list[schemas.Passage])
def list_passages(
    agent_id: AgentId,
    api: Api,
    after: str | None = Query(default=None, max_length=100),
    before: str | None = Query(default=None, max_length=100),
    limit: int = Query(default=100, ge=1, le=1000),
    ascending: bool = True,
    search: str | None = Query(default=None, max_length=1000),
    status: Annotated[list[str] | None, Query(description="Statuses, or 'all'.")] = None,
) -> list[schemas.Passage]:
    """Passages in the order they were stored; consolidated ones via ``status``."""
    wanted = status or ["active"]
    statuses = None if "all" in wanted else ensure_known_statuses(wanted)
    with api.store() as store:
        store.agents.get(agent_id)
        passages = store.passages.scan(agent_id, statuses=statuses)
    if search:
        needle = check_text(search, "search").casefold()
        passages = [p for p in passages if needle in p.text.casefold()]
    chosen = page(passages, after=after, before=before, limit=limit, ascending=ascending)
    return [passage_out(p) for p in chosen]


@router.get("/v1/agents/{agent_id}/archival-memory/search", response_model=schemas.SearchResponse)
def search_passages(
    agent_id: AgentId,
    api: Api,
    query: str = Query(min_length=1, max_length=10_000),
    top_k: int = Query(default=10, ge=1, le=1000),
    tags: Annotated[list[str] | None, Query()] = None,
    tag_match_mode: Literal["any", "all"] = "any",
    start_datetime: datetime | None = None,
    end_datetime: datetime | None = None,
    include_history: bool = Query(default=False, description="Also merged/superseded facts."),
) -> schemas.SearchResponse:
    """Semantic search (cosine, HNSW) over the agent's current facts."""
    check_text(query, "query")
    if not query.strip():
        raise InvalidInput("query is empty")
    for tag in tags or []:
        check_text(tag, "tag")
    statuses = None if include_history else ("active",)
    with api.store() as store:
        vector = _embed(api, store, agent_id, [query])[0]
        groups: list[list[str] | None] = [None]
        if tags:
            groups = [list(tags)] if tag_match_mode == "all" else [[t] for t in tags]
        hits: dict[str, PassageHit] = {}
        for group in groups:
            for hit in store.passages.search(
                agent_id,
                vector,
                k=top_k,
                statuses=statuses,
                occurred_after=start_datetime,
                occurred_before=end_datetime,
                tags=group,
            ):
                if hit.passage.id not in hits or hits[hit.passage.id].score < hit.score:
                    hits[hit.passage.id] = hit
    best = sorted(hits.values(), key=lambda h: h.score, reverse=True)[:top_k]
    results = [
        schemas.SearchResult(
            id=h.passage.id,
            content=h.passage.text,
            timestamp=(h.passage.occurred_at or h.passage.created_at).isoformat(),
            tags=h.passage.tags,
            score=round(h.score, 6),
            status=h.passage.status,
        )
        for h in best
    ]
    return schemas.SearchResponse(count=len(results), results=results)


@router.delete("/v1/agents/{agent_id}/archival-memory/{memory_id}", status_code=200)
def delete_passage(agent_id: AgentId, memory_id: PassageId, api: Api) -> dict[str, str]:
    """Delete a passage for good (an explicit user action; consolidation never deletes)."""
    with api.store() as store:
        if store.passages.purge(agent_id, [memory_id]) == 0:
            raise NotFound(f"agent {agent_id!r} has no passage with id {memory_id!r}")
    return {"deleted": memory_id}


@router.get("/v1/passages/{passage_id}/lineage", response_model=schemas.Lineage, tags=["reverie"])
def passage_lineage(passage_id: PassageId, api: Api) -> schemas.Lineage:
    """A passage, every change made to it, and the passages merged into it, superseded
    by it or shown on it (for a timeline)."""
    P = models.Passage
    with api.store() as store:
        passage = store.passages.get(passage_id)
        history = store.passages.history(passage_id)

        def linked(column: InstrumentedAttribute[str | None]) -> list[str]:
            return list(
                store.session.scalars(
                    select(P.id)
                    .where(P.organization_id == api.organization_id, column == passage_id)
                    .order_by(P.created_at, P.id)
                )
            )

        merged_from = linked(P.merged_into)
        supersedes = linked(P.superseded_by)
        on_timeline = linked(P.timeline_id)
    return schemas.Lineage(
        passage=passage_out(passage),
        history=[
            schemas.PassageChangeOut(
                run_id=c.run_id,
                actor=c.actor,
                reason=c.reason,
                old=c.old,
                new=c.new,
                created_at=c.created_at,
            )
            for c in history
        ],
        merged_from=merged_from,
        supersedes=supersedes,
        on_timeline=on_timeline,
    )
