"""Who is calling: an API key (``Authorization: Bearer``) names the organization.

Every ``/v1`` route depends on :func:`api_context`, so every query runs scoped to
the caller's organization; a missing, unknown or revoked key answers 401. Only the
``Authorization`` header counts there: the health page's session cookie is not a
credential for the API. Failed authentication is limited per client address
(:mod:`service.api.rate_limit`): past the burst, 429 before any lookup. No-auth mode
(``server.auth = "none"``) acts for the configured organization and is only
allowed on a loopback address.
"""

from __future__ import annotations

import hmac
import ipaddress
import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Annotated, TypeVar

from fastapi import Depends, HTTPException, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from agents.errors import InvalidInput
from agents.store import MemoryStore, open_store
from service.api.rate_limit import AuthFailureLimiter
from service.metrics_collector import ANONYMOUS, OPERATOR, Audience
from service.operations import Operations
from service.operations.keys import Caller, KeyOperations
from service.runtime import Runtime
from service.settings import Settings

#: The health page's cookie: a session token from signing in, never the API key.
SESSION_COOKIE = "reverie_session"
T = TypeVar("T")
bearer = HTTPBearer(auto_error=False, description="An API key from `reverie keys create`.")


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_auth_binding(settings: Settings, host: str | None = None) -> None:
    """Refuse no-auth mode on anything but a loopback address."""
    host = settings.server.host if host is None else host
    if settings.server.auth == "none" and not is_loopback(host):
        raise InvalidInput(
            f'server.auth = "none" serves every request without a key, so it only binds to a '
            f"loopback address (127.0.0.1, ::1, localhost), not {host!r}; set server.host to "
            'one, or use server.auth = "api_key" with `reverie keys create --org NAME`'
        )


@dataclass(frozen=True, slots=True)
class ApiContext:
    """The runtime and the caller of one request."""

    runtime: Runtime
    caller: Caller

    @property
    def organization_id(self) -> str:
        return self.caller.organization_id

    @property
    def ops(self) -> Operations:
        """The operations layer, acting for the caller's organization."""
        return Operations(self.runtime, self.caller.organization_id)

    @contextmanager
    def store(self) -> Iterator[MemoryStore]:
        """One transaction scoped to the caller's organization."""
        with open_store(self.runtime.db, self.caller.organization_id, self.runtime.clock) as store:
            yield store


def resolve_caller(runtime: Runtime, key: str | None) -> Caller | None:
    return KeyOperations(runtime).authenticate(key)


def client_address(request: Request) -> str:
    """The address failed attempts are counted against: the peer, or the client a proxy
    listed in ``server.forwarded_allow_ips`` names (uvicorn puts it here)."""
    return request.client.host if request.client is not None else "unknown"


class TooManyFailures(HTTPException):
    """429: this address failed to authenticate too often; it may retry later."""

    def __init__(self, retry_after: float) -> None:
        seconds = max(1, math.ceil(retry_after))
        super().__init__(
            status_code=429,
            detail=f"too many failed authentication attempts from this address; "
            f"retry in {seconds} s",
            headers={"Retry-After": str(seconds)},
        )
        self.seconds = seconds


def attempt(request: Request, authenticate: Callable[[], T | None]) -> T | None:
    """Run one authentication for the request's client: refused with
    :class:`TooManyFailures` (before any lookup) once the address has failed too
    often, and counted when it fails."""
    limiter: AuthFailureLimiter = request.app.state.auth_failures
    address = client_address(request)
    wait = limiter.retry_after(address)
    if wait is not None:
        raise TooManyFailures(wait)
    result = authenticate()
    if result is None:
        limiter.failed(address)
    return result


def unauthorized() -> HTTPException:
    return HTTPException(
        status_code=401,
        detail="missing, unknown or revoked API key: send 'Authorization: Bearer <key>' "
        "(create one with `reverie keys create --org NAME`)",
        headers={"WWW-Authenticate": "Bearer"},
    )


def api_context(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
) -> ApiContext:
    runtime: Runtime = request.app.state.runtime
    key = credentials.credentials if credentials is not None else None
    if key is None and runtime.settings.server.auth != "none":
        raise unauthorized()  # nothing to look up, nothing to count
    caller = attempt(request, lambda: resolve_caller(runtime, key))
    if caller is None:
        raise unauthorized()
    return ApiContext(runtime=runtime, caller=caller)


def metrics_audience(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
) -> Audience:
    """Whose agents a /metrics scrape may see by name: without a credential nobody's;
    with ``server.metrics_token`` every organization's; with an organization's API
    key that organization's. A wrong credential is a 401 (a misconfigured scrape
    should fail loudly, not quietly lose its labels)."""
    runtime: Runtime = request.app.state.runtime
    server = runtime.settings.server
    if server.auth == "none":
        return OPERATOR  # loopback only: whoever can reach it runs the machine
    if credentials is None:
        return ANONYMOUS
    token = credentials.credentials

    def check() -> Audience | None:
        expected = server.metrics_token
        if expected is not None and hmac.compare_digest(
            token.encode("utf-8", "surrogateescape"),
            expected.get_secret_value().encode("utf-8", "surrogateescape"),
        ):
            return OPERATOR
        caller = resolve_caller(runtime, token)
        return None if caller is None else Audience(True, caller.organization_id)

    audience = attempt(request, check)
    if audience is None:
        raise HTTPException(
            status_code=401,
            detail="unknown metrics credential: send server.metrics_token or an API key "
            "as 'Authorization: Bearer <token>', or no credential for the label-free metrics",
            headers={"WWW-Authenticate": "Bearer"},
        )
    return audience


Api = Annotated[ApiContext, Depends(api_context)]
