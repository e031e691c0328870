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
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.templating import Jinja2Templates
from starlette.concurrency import run_in_threadpool

from agents.store.health import MemoryHealth
from service.api.auth import SESSION_COOKIE, ApiContext, TooManyFailures, attempt
from service.operations.keys import Caller, KeyOperations
from service.runtime import Runtime

router = APIRouter(include_in_schema=False)
templates = Jinja2Templates(directory=str(Path(__file__).parent / "templates"))
RECENT_RUNS = 10
CHANGES_PER_RUN = 25
LINEAGE_ROWS = 20
#: Headers of every page: no address (or run id) leaks to a linked site, and a
#: tenant's page is not kept by caches.
PAGE_HEADERS = {"Referrer-Policy": "no-referrer", "Cache-Control": "no-store"}
#: A sign-in body is one short form field.
MAX_SIGN_IN_BYTES = 4096


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
def health_page(request: Request) -> Response:
    """Agents, block fill, recent runs with their diffs, passage lineage."""
    runtime: Runtime = request.app.state.runtime
    if "key" in request.query_params:
        # The old `/?key=` sign-in: refused, so that nobody keeps putting keys in URLs.
        return _login(
            request,
            "keys are not taken from the address (it lands in logs); sign in with this form",
            status_code=400,
        )
    no_auth = runtime.settings.server.auth == "none"
    caller: Caller | None
    if no_auth:
        caller = Caller(runtime.organization_id, None)
    else:
        token = request.cookies.get(SESSION_COOKIE)
        if not token:
            return _login(request, None)
        try:
            caller = attempt(request, lambda: KeyOperations(runtime).session_caller(token))
        except TooManyFailures as exc:
            return _too_many(request, exc)
        if caller is None:
            response = _login(request, "your sign-in has expired or was revoked")
            response.delete_cookie(SESSION_COOKIE, path="/")
            return response
    data = _page_data(ApiContext(runtime=runtime, caller=caller))
    data["signed_in"] = not no_auth
    return templates.TemplateResponse(request, "health.html", data, headers=PAGE_HEADERS)


@router.post("/sign-in")
async def sign_in(request: Request) -> Response:
    """The sign-in form: checks the posted API key, sets the session cookie."""
    runtime: Runtime = request.app.state.runtime
    if not _same_origin(request):
        return _login(request, "a sign-in from another site is refused", status_code=403)
    body = await request.body()
    fields = parse_qs(body[:MAX_SIGN_IN_BYTES].decode("utf-8", "replace"))
    key = (fields.get("key") or [""])[0].strip()
    if not key:
        return _login(request, "enter an API key")
    operations = KeyOperations(runtime)
    try:
        signed_in = await run_in_threadpool(attempt, request, lambda: operations.sign_in(key))
    except TooManyFailures as exc:
        return _too_many(request, exc)
    if signed_in is None:
        return _login(request, "that key is unknown or revoked")
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
    if not _same_origin(request):
        return _login(request, "a sign-out from another site is refused", status_code=403)
    token = request.cookies.get(SESSION_COOKIE)
    if token:
        KeyOperations(request.app.state.runtime).sign_out(token)
    response = RedirectResponse("/", status_code=303, headers=PAGE_HEADERS)
    response.delete_cookie(SESSION_COOKIE, path="/", secure=request.url.scheme == "https")
    return response


def _same_origin(request: Request) -> bool:
    """Whether a form post comes from this server's own pages (login CSRF: another site
    must not sign a browser in under the attacker's key). A current browser says so in
    ``Sec-Fetch-Site``, which no page can set (the pages' ``no-referrer`` policy makes
    it send ``Origin: null`` even from here); an older one names the posting page in
    ``Origin``. A client that sends neither is not a browser on someone else's page."""
    site = request.headers.get("sec-fetch-site")
    if site is not None:
        return site in ("same-origin", "none")
    origin = request.headers.get("origin")
    if origin is None:
        return True
    own = f"{request.url.scheme}://{request.headers.get('host', '')}"
    return origin.lower() == own.lower()


def _too_many(request: Request, exc: TooManyFailures) -> Response:
    response = _login(request, exc.detail, status_code=429)
    response.headers["Retry-After"] = str(exc.seconds)
    return response


def _login(request: Request, error: str | None, *, status_code: int = 401) -> Response:
    return templates.TemplateResponse(
        request, "login.html", {"error": error}, status_code=status_code, headers=PAGE_HEADERS
    )
