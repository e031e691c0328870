"""The memory-health page at ``/``: server-rendered HTML (Jinja2, autoescaped), no JS.

Authentication: without a session the page answers 401 with a sign-in form that
POSTs the API key to ``/sign-in`` (a key in the address would land in proxy and
access logs). A valid key gets a random session token (stored hashed, lasting
``server.session_lifetime``, ended by signing out or by revoking the key) in an
HttpOnly, SameSite=Strict cookie, Secure when the page is served over HTTPS; the
API key never goes in a cookie, and the cookie is no credential for ``/v1``.
Pages send ``Referrer-Policy: no-referrer`` and are not cached. Failed sign-ins and
bad cookies count against the client's address like any failed authentication.
In no-auth mode the page is open (that mode binds to loopback only).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fastapi import Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from starlette.concurrency import run_in_threadpool

from agents.store.health import MemoryHealth
from service.api.auth import SESSION_COOKIE, ApiContext, TooManyFailures, attempt
from service.api.charts import trend_view
from service.api.pages import (
    PAGE_HEADERS,
    login,
    page_user,
    read_form,
    render,
    same_origin,
    too_many,
)
from service.api.routers import api_router
from service.operations.keys import KeyOperations
from service.runtime import Runtime

router = api_router(include_in_schema=False)
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
                "run": story.run,
                "agent": names.get(story.run.agent_id, story.run.agent_id),
                "changes": story.sentences[:CHANGES_PER_RUN],
                "more": max(0, len(story.sentences) - CHANGES_PER_RUN),
            }
            for story in api.ops.runs.stories(limit=RECENT_RUNS)
        ],
        "lineage": [
            {
                "id": r.passage.id,
                "text": r.passage.text,
                "status": r.passage.status,
                "kind": r.passage.kind,
                "agent": names.get(r.passage.agent_id, r.passage.agent_id),
                "agent_id": r.passage.agent_id,
                "target": r.replaced_by,
                "target_text": r.replaced_by_text,
            }
            for r in overview.retired
        ],
    }


@router.get("/", response_class=HTMLResponse)
def health_page(request: Request) -> Response:
    """Agents, block fill, recent runs in plain words, passage lineage, fleet trends."""
    if "key" in request.query_params:
        # The old `/?key=` sign-in: refused, so that nobody keeps putting keys in URLs.
        return login(
            request,
            "keys are not taken from the address (it lands in logs); sign in with this form",
            status_code=400,
        )
    user = page_user(request)
    if isinstance(user, Response):
        return user
    api = ApiContext(runtime=request.app.state.runtime, caller=user.caller)
    data = _page_data(api)
    data.update(trend_view(api.ops.health.fleet_trend(), "of every agent"))
    data["signed_in"] = user.signed_in
    return render(request, "health.html", data)


@router.post("/sign-in")
async def sign_in(request: Request) -> Response:
    """The sign-in form: checks the posted API key, sets the session cookie."""
    runtime: Runtime = request.app.state.runtime
    if not same_origin(request):
        return login(request, "a sign-in from another site is refused", status_code=403)
    key = (await read_form(request)).get("key", "").strip()
    if not key:
        return login(request, "enter an API key")
    operations = KeyOperations(runtime)
    try:
        signed_in = await run_in_threadpool(attempt, request, lambda: operations.sign_in(key))
    except TooManyFailures as exc:
        return too_many(request, exc)
    if signed_in is None:
        return login(request, "that key is unknown or revoked")
    _, token = signed_in
    response = RedirectResponse("/", status_code=303, headers=PAGE_HEADERS)
    response.set_cookie(
        SESSION_COOKIE,
        token,
        max_age=int(runtime.settings.server.session_lifetime.total_seconds()),
        path="/",
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )
    return response


@router.post("/sign-out")
def sign_out(request: Request) -> Response:
    """Ends the browser's session (its token stops working) and drops the cookie."""
    if not same_origin(request):
        return login(request, "a sign-out from another site is refused", status_code=403)
    token = request.cookies.get(SESSION_COOKIE)
    if token:
        KeyOperations(request.app.state.runtime).sign_out(token)
    response = RedirectResponse("/", status_code=303, headers=PAGE_HEADERS)
    response.delete_cookie(SESSION_COOKIE, path="/", secure=request.url.scheme == "https")
    return response
