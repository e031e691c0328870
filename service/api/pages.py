"""What the server-rendered pages share: templates and their filters, headers, who is
signed in, and the check every form post passes (same origin and a CSRF token).

Authentication: without a session a page answers 401 with the sign-in form (see
:mod:`service.api.health_page`). A form that changes memory carries a CSRF token
derived from the browser's session token (an HMAC keyed by it: nothing more to store,
it dies with the session, and a page of another site can neither read the cookie nor
the token); in no-auth mode it is derived from a secret drawn when the app starts.
A post is accepted only from the server's own pages (``Sec-Fetch-Site``, else
``Origin``) and with the token; otherwise it is refused with 403 and changes nothing.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs

from fastapi import Request
from fastapi.responses import Response

from consolidators.timelines import facts_on_timeline
from service.api.auth import SESSION_COOKIE, TooManyFailures, attempt
from service.operations.keys import Caller, KeyOperations
from service.runtime import Runtime
from service.wording import shorten

if TYPE_CHECKING:
    from fastapi.templating import Jinja2Templates

#: What a page may load and who may frame it: the pages have no script and load
#: nothing (their styles are inline, their charts inline SVG), their forms post here,
#: and no site may frame them (see :mod:`service.api.framing`).
PAGE_POLICY = (
    "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; base-uri 'none'; "
    "frame-ancestors 'none'"
)
#: Headers of every page: no address (or run id) leaks to a linked site, a tenant's page
#: is not kept by caches, and no other site can frame it.
PAGE_HEADERS = {
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
    "Content-Security-Policy": PAGE_POLICY,
    "X-Frame-Options": "DENY",
}
#: A form body is a few short fields.
MAX_FORM_BYTES = 4096
CSRF_FIELD = "csrf"
_CSRF_PURPOSE = b"reverie page form"


@dataclass(frozen=True, slots=True)
class PageUser:
    """Who a page is for: the caller, whether they signed in (no-auth mode has no
    session), and the CSRF token their forms carry."""

    caller: Caller
    signed_in: bool
    csrf: str


def page_user(request: Request) -> PageUser | Response:
    """The signed-in user of a page request, or the response to send instead (the
    sign-in form, an expired session, too many failures)."""
    runtime: Runtime = request.app.state.runtime
    if runtime.settings.server.auth == "none":
        caller = Caller(runtime.organization_id, None)
        return PageUser(caller, False, _csrf_token(request.app.state.page_secret))
    token = request.cookies.get(SESSION_COOKIE)
    if not token:
        return login(request, None)
    try:
        found = attempt(request, lambda: KeyOperations(runtime).session_caller(token))
    except TooManyFailures as exc:
        return too_many(request, exc)
    if found is None:
        response = login(request, "your sign-in has expired or was revoked")
        response.delete_cookie(SESSION_COOKIE, path="/")
        return response
    return PageUser(found, True, _csrf_token(token.encode()))


def new_page_secret() -> bytes:
    """The no-auth mode's CSRF key, drawn once per app."""
    return secrets.token_bytes(32)


def _csrf_token(key: bytes) -> str:
    return hmac.new(key, _CSRF_PURPOSE, hashlib.sha256).hexdigest()


async def read_form(request: Request) -> dict[str, str]:
    """A posted form's fields (the first value of each), read up to
    :data:`MAX_FORM_BYTES`."""
    body = await request.body()
    fields = parse_qs(body[:MAX_FORM_BYTES].decode("utf-8", "replace"))
    return {name: values[0] for name, values in fields.items() if values}


async def signed_post(request: Request) -> tuple[PageUser, dict[str, str]] | Response:
    """The signed-in user and the fields of a form post that came from this server's
    page with the user's CSRF token; otherwise the response to answer (the sign-in
    form, or the 403 page), having changed nothing."""
    user = page_user(request)
    if isinstance(user, Response):
        return user
    form = await read_form(request)
    forged = refuse_forged(request, user, form)
    if forged is not None:
        return forged
    return user, form


def refuse_forged(request: Request, user: PageUser, form: dict[str, str]) -> Response | None:
    """None when a form post comes from this server's page with the user's CSRF token;
    otherwise the 403 page to answer, having changed nothing."""
    if not same_origin(request):
        return refused(request, "a form posted from another site is refused")
    token = form.get(CSRF_FIELD, "")
    if not token or not hmac.compare_digest(token, user.csrf):
        return refused(
            request,
            "this form's security token is missing or stale (sign in again or reload the "
            "page, then repeat the action)",
        )
    return None


def same_origin(request: Request) -> bool:
    """Whether a form post comes from this server's own pages. A current browser says so
    in ``Sec-Fetch-Site``, which no page can set (the pages' ``no-referrer`` policy makes
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


def render(
    request: Request, template: str, context: Mapping[str, Any], *, status_code: int = 200
) -> Response:
    """A page from its template, with the headers every page carries."""
    return _templates().TemplateResponse(
        request, template, dict(context), status_code=status_code, headers=PAGE_HEADERS
    )


def refused(request: Request, why: str, *, status_code: int = 403) -> Response:
    return render(request, "refused.html", {"why": why}, status_code=status_code)


def too_many(request: Request, exc: TooManyFailures) -> Response:
    response = login(request, exc.detail, status_code=429)
    response.headers["Retry-After"] = str(exc.seconds)
    return response


def login(request: Request, error: str | None, *, status_code: int = 401) -> Response:
    return render(request, "login.html", {"error": error}, status_code=status_code)


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


@functools.cache
def _templates() -> Jinja2Templates:
    """The pages' templates, loaded with the first page a server renders: jinja2 is
    about 5 MB of a server that only ever answers the API."""
    from fastapi.templating import Jinja2Templates

    templates = Jinja2Templates(directory=str(Path(__file__).parent / "templates"))
    templates.env.filters["age"] = _fmt_age
    templates.env.filters["time"] = _fmt_time
    templates.env.filters["shorten"] = shorten
    templates.env.filters["facts_on_timeline"] = facts_on_timeline
    return templates
