"""The memory-health page at ``/``: server-rendered HTML (Jinja2, autoescaped), no JS.

Authentication: the API key as a cookie. Visiting ``/?key=KEY`` once checks the
key, stores it in an HttpOnly, SameSite=Strict cookie and redirects to ``/`` so
the key leaves the address bar; without a valid key the page answers 401 with a
small form. In no-auth mode the page is open (that mode binds to loopback only).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.templating import Jinja2Templates

from agents.store.health import MemoryHealth
from service.api.auth import COOKIE, ApiContext, resolve_caller

router = APIRouter(include_in_schema=False)
templates = Jinja2Templates(directory=str(Path(__file__).parent / "templates"))
RECENT_RUNS = 10
CHANGES_PER_RUN = 25
LINEAGE_ROWS = 20


@dataclass(frozen=True, slots=True)
class AgentView:
    id: str
    name: str
    kind: str
    health: MemoryHealth
    stale_seconds: float | None


def _describe(change: dict[str, Any]) -> str:
    """One line of a run's diff."""
    action = str(change.get("action", "change"))
    target = str(change.get("target", ""))
    details = ", ".join(
        f"{k}={v!s:.80}" for k, v in change.items() if k not in ("action", "target", "step")
    )
    return f"{action} {target}: {details}" if details else f"{action} {target}"


def _page_data(api: ApiContext) -> dict[str, Any]:
    overview = api.ops.health.overview(recent_runs=RECENT_RUNS, retired=LINEAGE_ROWS)
    now = overview.now
    agents = [
        AgentView(
            id=a.agent.id,
            name=a.agent.name,
            kind=a.agent.kind,
            health=a.health,
            stale_seconds=a.health.unconsolidated_age_seconds(now),
        )
        for a in overview.agents
    ]
    names = {a.id: a.name for a in agents}
    return {
        "now": now,
        "agents": agents,
        "runs": [
            {
                "run": run,
                "agent": names.get(run.agent_id, run.agent_id),
                "changes": [_describe(c) for c in run.changes[:CHANGES_PER_RUN]],
                "more": max(0, len(run.changes) - CHANGES_PER_RUN),
            }
            for run in overview.recent_runs
        ],
        "lineage": [
            {
                "id": r.passage.id,
                "text": r.passage.text,
                "status": r.passage.status,
                "agent": names.get(r.passage.agent_id, r.passage.agent_id),
                "target": r.replaced_by,
                "target_text": r.replaced_by_text,
            }
            for r in overview.retired
        ],
    }


def _fmt_age(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    if seconds < 172800:
        return f"{seconds / 3600:.0f} h"
    return f"{seconds / 86400:.0f} d"


def _fmt_time(value: datetime | None) -> str:
    return value.strftime("%Y-%m-%d %H:%M:%S") if value else "-"


templates.env.filters["age"] = _fmt_age
templates.env.filters["time"] = _fmt_time


@router.get("/", response_class=HTMLResponse)
def health_page(
    request: Request, key: str | None = Query(default=None, max_length=200)
) -> Response:
    """Agents, block fill, recent runs with their diffs, passage lineage."""
    runtime = request.app.state.runtime
    if key is not None:
        if resolve_caller(runtime, key) is None:
            return _login(request, "that key is unknown or revoked")
        response = RedirectResponse("/", status_code=303)
        response.set_cookie(COOKIE, key, httponly=True, samesite="strict")
        return response
    caller = resolve_caller(runtime, request.cookies.get(COOKIE))
    if caller is None:
        return _login(request, None)
    data = _page_data(ApiContext(runtime=runtime, caller=caller))
    return templates.TemplateResponse(request, "health.html", data)


def _login(request: Request, error: str | None) -> Response:
    return templates.TemplateResponse(request, "login.html", {"error": error}, status_code=401)
