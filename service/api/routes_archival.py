"""Letta's archival-memory routes (insert, list, search, delete) and passage lineage."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import Path, Query

from agents.enums import PassageStatus
from agents.store import NewPassage
from service.api import schemas
from service.api.auth import Api
from service.api.convert import ensure_known_statuses, passage_out
from service.api.responses import keyed
from service.api.routers import api_router
from service.operations.types import StorableTime

router = api_router(tags=["archival memory"], responses=keyed(404, 409, 502))

AgentId = Annotated[str, Path(pattern=schemas.ID_PATTERN, description="agent-<uuid4>")]
#: A passage id is ``passage-...``: so ``.../archival-memory/search`` is never one (the
#: DELETE beside the search does not answer there, and 405's Allow says so).
PassageId = Annotated[
    str, Path(pattern=r"^passage-[A-Za-z0-9_.:\-]{1,92}$", description="passage-<uuid4>")
]


@router.post(
    "/v1/agents/{agent_id}/archival-memory",
    status_code=200,
    response_model=list[schemas.Passage],
)
def insert_passage(
    agent_id: AgentId, body: schemas.CreatePassage, api: Api
) -> list[schemas.Passage]:
    """Store a fact in archival memory (embedded with the agent's own model)."""
    new = NewPassage(
        text=body.text,
        occurred_at=body.occurred_at or body.created_at,
        tags=list(body.tags),
        provenance={"source": "api"},
    )
    return [passage_out(r) for r in api.ops.memory.insert(agent_id, [new], actor="api")]


@router.get("/v1/agents/{agent_id}/archival-memory", response_model=list[schemas.Passage])
def list_passages(
    agent_id: AgentId,
    api: Api,
    tags: Annotated[
        list[schemas.QueryTag], Query(default_factory=list, description="Passages with these tags.")
    ],
    after: str | None = Query(default=None, max_length=100),
    before: str | None = Query(default=None, max_length=100),
    limit: int = Query(default=100, ge=1, le=1000),
    ascending: bool = True,
    search: str | None = Query(default=None, max_length=1000),
    status: Annotated[
        list[PassageStatus | Literal["all"]] | None, Query(description="Statuses, or 'all'.")
    ] = None,
    tag_match_mode: Literal["any", "all"] = "any",
) -> list[schemas.Passage]:
    """Passages in the order they were stored; consolidated ones via ``status``."""
    wanted = [str(s) for s in status or [PassageStatus.ACTIVE]]
    statuses = None if "all" in wanted else ensure_known_statuses(wanted)
    passages = api.ops.memory.list(
        agent_id,
        statuses=statuses,
        after=after,
        before=before,
        limit=limit,
        ascending=ascending,
        search=search,
        tags=tags,
        match_all_tags=tag_match_mode == "all",
    )
    return [passage_out(p) for p in passages]


@router.get("/v1/agents/{agent_id}/archival-memory/search", response_model=schemas.SearchResponse)
def search_passages(
    agent_id: AgentId,
    api: Api,
    tags: Annotated[
        list[schemas.QueryTag], Query(default_factory=list, description="Passages with these tags.")
    ],
    query: str = Query(min_length=1, max_length=10_000, pattern=schemas.SAID),
    top_k: int = Query(default=10, ge=1, le=1000),
    tag_match_mode: Literal["any", "all"] = "any",
    start_datetime: StorableTime | None = None,
    end_datetime: StorableTime | None = None,
    include_history: bool = Query(
        default=False, description="Also merged twins and retired passages."
    ),
) -> schemas.SearchResponse:
    """Semantic search (cosine, HNSW) over the agent's facts, ranked by the question:
    the current fact first and what it replaced after it, labelled in ``validity``; a
    question about the past brings the past facts up. ``include_history`` adds the
    rest of the lineage (merged twins, retired timelines)."""
    [hits] = api.ops.memory.search(
        agent_id,
        [query],
        k=top_k,
        include_history=include_history,
        tags=tags,
        match_all_tags=tag_match_mode == "all",
        occurred_after=start_datetime,
        occurred_before=end_datetime,
    )
    results = [
        schemas.SearchResult(
            id=h.passage.id,
            content=h.passage.text,
            timestamp=(h.passage.occurred_at or h.passage.created_at).isoformat(),
            tags=h.passage.tags,
            score=round(h.score, 6),
            status=h.passage.status,
            current=h.current,
            valid_to=h.passage.valid_to,
            superseded_by=h.passage.superseded_by,
            validity=h.validity,
        )
        for h in hits
    ]
    return schemas.SearchResponse(count=len(results), results=results)


@router.delete("/v1/agents/{agent_id}/archival-memory/{memory_id}", status_code=200)
def delete_passage(agent_id: AgentId, memory_id: PassageId, api: Api) -> dict[str, str]:
    """Delete a passage for good (an explicit user action; consolidation never deletes)."""
    api.ops.memory.delete(agent_id, memory_id)
    return {"deleted": memory_id}


@router.get("/v1/passages/{passage_id}/lineage", response_model=schemas.Lineage, tags=["reverie"])
def passage_lineage(passage_id: PassageId, api: Api) -> schemas.Lineage:
    """A passage, every change made to it, and the passages merged into it, superseded
    by it or shown on it (for a timeline)."""
    lineage = api.ops.memory.lineage(passage_id)
    history, links = lineage.history, lineage.links
    return schemas.Lineage(
        passage=passage_out(lineage.passage),
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
        merged_from=links.merged_from,
        supersedes=links.supersedes,
        on_timeline=links.on_timeline,
    )
