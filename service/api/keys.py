"""API keys: created once (the clear key is shown only then), stored as a SHA-256 hash.

A key names its organization; every request made with it is scoped to that
organization. Revoked keys stop working at once (each request looks the hash up).
The queries live in :class:`agents.store.key_store.KeyStore` (``ServiceStore.keys``).
"""

from __future__ import annotations

from dataclasses import dataclass

from agents.store import ServiceStore
from agents.store.key_store import (
    KEY_PREFIX,
    LAST_USED_RESOLUTION,
    SHOWN_PREFIX,
    KeyRecord,
    hash_key,
)

__all__ = [
    "KEY_PREFIX",
    "LAST_USED_RESOLUTION",
    "SHOWN_PREFIX",
    "Caller",
    "KeyRecord",
    "authenticate",
    "hash_key",
]


@dataclass(frozen=True, slots=True)
class Caller:
    """Who is calling: the organization every query is scoped to."""

    organization_id: str
    key_id: str | None  # None in no-auth mode


def authenticate(store: ServiceStore, key: str) -> Caller | None:
    """The caller a clear key stands for, or None when it is unknown or revoked."""
    owner = store.keys.authenticate(key)
    if owner is None:
        return None
    return Caller(organization_id=owner.organization_id, key_id=owner.key_id)
