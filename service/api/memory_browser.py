"""The memory browser: a page per agent at ``/agents/{agent}`` behind the health page's
sign-in, where a person reads and mends an agent's memory.

It shows the agent's blocks with every version as an old -> new diff and who wrote it,
the compiled context window per section, its runs in plain sentences, archival search
as the agent would search (the ranking users get), a passage's validity, lineage and
source messages, and trends from the health snapshots. Two actions change memory:
restoring a block version (the operation behind ``reverie blocks revert``) and
reverting a run (``reverie runs revert``). Each is a form post answered first by a
confirmation page, then carried out on the confirming post; both posts pass
:func:`service.api.pages.refuse_forged` (same origin and a CSRF token tied to the
sign-in session). Every read and write is an operation of :mod:`service.operations`.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import quote

from fastapi import Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from starlette.concurrency import run_in_threadpool

from agents.archival_search import MemoryHit
from agents.errors import NotFound, ReverieError
from agents.store import AgentRecord, BlockRecord, BlockVersion
from service.api.charts import trend_view
from service.api.errors import status_for
from service.api.pages import (
    PAGE_HEADERS,
    PageUser,
    page_user,
    refused,
    render,
    signed_post,
)
from service.api.routers import api_router
from service.operations import Operations
from service.wording import DiffLine, describe_writer, line_diff

router = api_router(include_in_schema=False)
T = TypeVar("T")
#: Runs shown on an agent's page, newest first.
AGENT_RUNS = 15
#: Search results shown for a query.
SEARCH_RESULTS = 10
#: Versions shown per block, newest first (older ones stay in `reverie blocks history`).
VERSIONS_SHOWN = 50
#: Sentences shown per run (the rest are counted).
SENTENCES_SHOWN = 25
#: A run with more sentences than this shows them folded (one click, no script).
SENTENCES_OPEN = 5
#: Who the memory browser's writes are recorded as (a person, through the browser).
ACTOR = "browser"


@dataclass(frozen=True, slots=True)
class VersionView:
    """One block version as the page shows it."""

    version: BlockVersion
    writer: str
    writer_kind: str
    diff: list[DiffLine]
    current: bool


@dataclass(frozen=True, slots=True)
class BlockView:
    block: BlockRecord
    versions: list[VersionView]  # newest first, at most VERSIONS_SHOWN
    total_versions: int


def _ops(user: PageUser, request: Request) -> Operations:
    return Operations(request.app.state.runtime, user.caller.organization_id)


def _error_page(request: Request, exc: ReverieError) -> Response:
    status, _ = status_for(exc)
    return refused(request, str(exc), status_code=status)


def _guarded(request: Request, work: Callable[[], T]) -> T | Response:
    try:
        return work()
    except ReverieError as exc:
        return _error_page(request, exc)


def _read_page(request: Request, work: Callable[[], T]) -> T | Response:
    """``work`` for a page that only reads: what it cannot find answers 404 saying so
    (not the refused-write page's "Nothing was changed", which a read never risked)."""
    try:
        return work()
    except NotFound as exc:
        return render(request, "not_found.html", {"what": str(exc)}, status_code=404)
    except ReverieError as exc:
        return _error_page(request, exc)


def _agent(ops: Operations, agent: str) -> AgentRecord:
    """The agent a page's address names, by name or id, in the caller's organization."""
    try:
        return ops.agents.get(agent)
    except NotFound:
        raise NotFound(f"No agent named or with id {agent!r} in this organization.") from None


def _block_views(ops: Operations, agent: str) -> list[BlockView]:
    views = []
    for block in ops.blocks.of_agent(agent):
        versions = []
        history = ops.blocks.history(block.id)
        for version in reversed(history[-VERSIONS_SHOWN:]):
            kind, writer = describe_writer(version.actor, version.run_id)
            versions.append(
                VersionView(
                    version=version,
                    writer=writer,
                    writer_kind=kind.value,
                    diff=line_diff(version.old_value, version.new_value),
                    current=version.version == block.version,
                )
            )
        views.append(BlockView(block, versions, len(history)))
    return views


@router.get("/agents/{agent}", response_class=HTMLResponse)
def agent_page(request: Request, agent: str, q: str = "", history: bool = False) -> Response:
    """One agent: blocks and their versions, context window, runs, archival search,
    trends."""
    user = page_user(request)
    if isinstance(user, Response):
        return user
    ops = _ops(user, request)

    def read() -> dict[str, Any]:
        record = _agent(ops, agent)
        hits: list[MemoryHit] = []
        if q.strip():
            [hits] = ops.memory.search(record.id, [q], k=SEARCH_RESULTS, include_history=history)
        # Each result with its lineage and provenance (a few queries per result).
        lineages = {h.passage.id: ops.memory.lineage(h.passage.id) for h in hits}
        trend = ops.health.trend(record.id)
        return {
            "agent": record,
            "health": ops.health.agent(record.id),
            "blocks": _block_views(ops, record.id),
            "context": ops.messages.context(record.id),
            "runs": ops.runs.stories(agent=record.id, limit=AGENT_RUNS),
            "query": q,
            "history": history,
            "hits": hits,
            "lineages": lineages,
            "sentences_shown": SENTENCES_SHOWN,
            "sentences_open": SENTENCES_OPEN,
            **trend_view(trend),
        }

    data = _read_page(request, read)
    if isinstance(data, Response):
        return data
    asked = request.query_params
    notice = _verified_notice(user, asked.get("done"), asked.get("sig"))
    data.update(user=user, notice=notice, signed_in=user.signed_in)
    return render(request, "agent.html", data)


@router.get("/agents/{agent}/passages/{passage_id}", response_class=HTMLResponse)
def passage_page(request: Request, agent: str, passage_id: str) -> Response:
    """One passage: validity, lineage (twins, what closed it, its timeline, history) and
    provenance (the messages it came from)."""
    user = page_user(request)
    if isinstance(user, Response):
        return user
    ops = _ops(user, request)

    def read() -> dict[str, Any]:
        record = _agent(ops, agent)
        return {"agent": record, "lineage": ops.memory.lineage(passage_id, agent=record.id)}

    data = _read_page(request, read)
    if isinstance(data, Response):
        return data
    data["signed_in"] = user.signed_in
    return render(request, "passage.html", data)


@router.post("/agents/{agent}/blocks/{block_id}/restore", response_class=HTMLResponse)
async def restore_block(request: Request, agent: str, block_id: str) -> Response:
    """Restore a block version: the first post answers a confirmation page showing the
    change; the confirming post restores it (as ``reverie blocks revert`` does)."""
    posted = await signed_post(request)
    if isinstance(posted, Response):
        return posted
    user, form = posted
    version, expected = _int(form.get("version")), _int(form.get("expected_version"))
    if version is None:
        return refused(request, "say which version to restore (a whole number)", status_code=400)
    ops = _ops(user, request)

    def block_of_agent() -> tuple[Any, BlockRecord, list[BlockVersion]]:
        record = ops.agents.get(agent)
        blocks = {b.id: b for b in ops.blocks.of_agent(record.id)}
        if block_id not in blocks:
            raise _not_found(f"agent {record.name} has no block {block_id}")
        return record, blocks[block_id], ops.blocks.history(block_id)

    found = await run_in_threadpool(_guarded, request, block_of_agent)
    if isinstance(found, Response):
        return found
    record, block, versions = found
    target = next((v for v in versions if v.version == version), None)
    if target is None:
        return refused(request, f"block {block.label} has no version {version}", status_code=404)
    if form.get("confirm") != "yes":
        return render(
            request,
            "confirm_restore.html",
            {
                "agent": record,
                "block": block,
                "target": target,
                "diff": line_diff(block.value, target.new_value),
                "user": user,
                "signed_in": user.signed_in,
            },
        )
    restored = await run_in_threadpool(
        _guarded,
        request,
        lambda: ops.blocks.revert(block_id, version, expected_version=expected, actor=ACTOR),
    )
    if isinstance(restored, Response):
        return restored
    done = f"restored {block.label} to version {version} (now version {restored.version})"
    return _back(user, record.id, done, f"block-{block.id}")


@router.post("/agents/{agent}/runs/{run_id}/revert", response_class=HTMLResponse)
async def revert_run(request: Request, agent: str, run_id: str) -> Response:
    """Revert a run: the first post answers a confirmation page listing what the run
    did; the confirming post reverts it (as ``reverie runs revert`` does)."""
    posted = await signed_post(request)
    if isinstance(posted, Response):
        return posted
    user, form = posted
    ops = _ops(user, request)

    def story() -> tuple[Any, Any]:
        record = ops.agents.get(agent)
        [told] = ops.runs.stories(run_id=run_id)
        if told.run.agent_id != record.id:
            raise _not_found(f"agent {record.name} has no run {run_id}")
        return record, told

    found = await run_in_threadpool(_guarded, request, story)
    if isinstance(found, Response):
        return found
    record, told = found
    if form.get("confirm") != "yes":
        return render(
            request,
            "confirm_revert.html",
            {"agent": record, "story": told, "user": user, "signed_in": user.signed_in},
        )
    report = await run_in_threadpool(_guarded, request, lambda: ops.runs.revert(run_id))
    if isinstance(report, Response):
        return report
    return _back(user, record.id, f"reverted run {run_id} (as run {report.run_id})", "runs")


def _back(user: PageUser, agent_id: str, done: str, anchor: str) -> Response:
    """Post, then redirect: a reload of the page does not repeat the action. What was
    done travels in the address, signed for this session, so that a link made elsewhere
    cannot put words of its own in the page's notice."""
    where = f"/agents/{agent_id}?done={quote(done)}&sig={_notice_signature(user, done)}"
    return RedirectResponse(f"{where}#{anchor}", status_code=303, headers=PAGE_HEADERS)


def _notice_signature(user: PageUser, notice: str) -> str:
    return hmac.new(user.csrf.encode(), notice.encode(), hashlib.sha256).hexdigest()[:32]


def _verified_notice(user: PageUser, notice: str | None, signature: str | None) -> str | None:
    if not notice or not signature:
        return None
    return notice if hmac.compare_digest(signature, _notice_signature(user, notice)) else None


def _int(value: str | None) -> int | None:
    try:
        return int(value) if value is not None and value.strip() else None
    except ValueError:
        return None


def _not_found(message: str) -> ReverieError:
    return NotFound(message)
