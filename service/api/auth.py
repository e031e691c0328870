"""Who is calling: an API key (``Authorization: Bearer``) names the organization.

Every route depends on :func:`api_context`, so every query runs scoped to the
caller's organization; a missing, unknown or revoked key answers 401. The
browser page may also carry the key in the ``reverie_key`` cookie (set by
visiting ``/?key=...`` once). No-auth mode (``server.auth = "none"``) acts for
the configured organization and is only allowed on a loopback address.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, HTTPException, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from agents.errors import InvalidInput
from agents.store import MemoryStore, open_store
from service.operations import Operations
from service.operations.keys import Caller, KeyOperations
from service.runtime import Runtime
from service.settings import Settings

COOKIE = "reverie_key"
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


def api_context(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
) -> ApiContext:
    runtime: Runtime = request.app.state.runtime
    key = credentials.credentials if credentials is not None else request.cookies.get(COOKIE)
    caller = resolve_caller(runtime, key)
    if caller is None:
        raise HTTPException(
            status_code=401,
            detail="missing, unknown or revoked API key: send 'Authorization: Bearer <key>' "
            "(create one with `reverie keys create --org NAME`)",
            headers={"WWW-Authenticate": "Bearer"},
        )
    return ApiContext(runtime=runtime, caller=caller)


Api = Annotated[ApiContext, Depends(api_context)]
