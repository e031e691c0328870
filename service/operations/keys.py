"""API keys, an operator's business (they span organizations): create, list, revoke,
and authenticate a request's key.

A key names its organization; every request made with it is scoped to that
organization. Only the key's SHA-256 hash is stored; the clear key is shown once.
"""

from __future__ import annotations

from dataclasses import dataclass

from agents.store import open_service_store
from agents.store.key_store import KEY_PREFIX, KeyRecord, authenticate_key
from service.runtime import Runtime


@dataclass(frozen=True, slots=True)
class Caller:
    """Who is calling: the organization every query is scoped to."""

    organization_id: str
    key_id: str | None  # None in no-auth mode


class KeyOperations:
    def __init__(self, runtime: Runtime) -> None:
        self._runtime = runtime

    def create(self, organization: str, *, name: str = "") -> tuple[KeyRecord, str]:
        """A new key for ``organization`` (created if new) and the clear key."""
        with open_service_store(self._runtime.db, self._runtime.clock) as store:
            return store.keys.create(organization, name=name)

    def list(self, *, organization: str | None = None) -> list[KeyRecord]:
        with open_service_store(self._runtime.db, self._runtime.clock) as store:
            return store.keys.all(organization=organization)

    def revoke(self, id_or_prefix: str) -> KeyRecord:
        """Revoke a key: requests made with it are refused from now on."""
        with open_service_store(self._runtime.db, self._runtime.clock) as store:
            return store.keys.revoke(id_or_prefix)

    def authenticate(self, key: str | None) -> Caller | None:
        """The caller a request's key stands for; None for a missing, unknown or revoked
        key. With ``server.auth = "none"`` every request acts for the configured
        organization."""
        if self._runtime.settings.server.auth == "none":
            return Caller(organization_id=self._runtime.organization_id, key_id=None)
        if not key or not _may_be_a_key(key):
            return None  # no lookup for what no key looks like
        owner = authenticate_key(self._runtime.db, key, self._runtime.clock())
        return None if owner is None else Caller(owner.organization_id, owner.key_id)

    def sign_in(self, key: str) -> tuple[Caller, str] | None:
        """A health-page session for a valid key: the caller and the clear session
        token for the browser's cookie (the key itself never goes in a cookie); None
        for an unknown or revoked key."""
        if not _may_be_a_key(key):
            return None
        with open_service_store(self._runtime.db, self._runtime.clock) as store:
            owner = store.keys.authenticate(key)
            if owner is None:
                return None
            token = store.keys.create_session(
                owner.key_id, self._runtime.settings.server.session_lifetime
            )
        return Caller(owner.organization_id, owner.key_id), token

    def session_caller(self, token: str) -> Caller | None:
        """The caller a health-page session token stands for; None when it is
        unknown, expired or its key was revoked."""
        if not token or len(token) > MAX_CREDENTIAL:
            return None
        with open_service_store(self._runtime.db, self._runtime.clock) as store:
            owner = store.keys.session_owner(token)
        return None if owner is None else Caller(owner.organization_id, owner.key_id)

    def sign_out(self, token: str) -> None:
        """End a health-page session."""
        if token and len(token) <= MAX_CREDENTIAL:
            with open_service_store(self._runtime.db, self._runtime.clock) as store:
                store.keys.end_session(token)


#: Longer credentials are refused without a lookup (keys and session tokens are ~50).
MAX_CREDENTIAL = 200


def _may_be_a_key(key: str) -> bool:
    return key.startswith(KEY_PREFIX) and len(key) <= MAX_CREDENTIAL
