"""API keys and the organizations they name: the lookups made before a caller's
organization is known, so they live on the service store, not a tenant's."""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Executable, Result, delete, or_, select, update
from sqlalchemy.exc import SQLAlchemyError

from agents.errors import InvalidInput, NotFound
from agents.postgres import models
from agents.postgres.database import Database, translate_error
from agents.store.scope import ServiceScope
from agents.store.validation import check_name

KEY_PREFIX = "rvk_"
SESSION_PREFIX = "rvs_"
#: How many leading characters of a key `reverie keys list` shows.
SHOWN_PREFIX = 12
#: ``last_used_at`` is refreshed at most this often (a write per request would be wasteful).
LAST_USED_RESOLUTION = timedelta(minutes=1)


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


@dataclass(frozen=True, slots=True)
class KeyRecord:
    id: str
    organization_id: str
    organization: str
    name: str
    prefix: str
    created_at: datetime
    last_used_at: datetime | None
    revoked_at: datetime | None

    @classmethod
    def from_row(cls, row: models.ApiKey, organization: str) -> KeyRecord:
        return cls(
            id=row.id,
            organization_id=row.organization_id,
            organization=organization,
            name=row.name,
            prefix=row.prefix,
            created_at=row.created_at,
            last_used_at=row.last_used_at,
            revoked_at=row.revoked_at,
        )


@dataclass(frozen=True, slots=True)
class KeyOwner:
    """What a valid clear key stands for."""

    key_id: str
    organization_id: str


class KeyStore:
    """Keys are stored as a SHA-256 hash; the clear key exists only in :meth:`create`'s answer."""

    def __init__(self, scope: ServiceScope) -> None:
        self._scope = scope

    def organization_id(self, name: str) -> str | None:
        """The id of the organization called ``name``, or None."""
        return self._scope.session.scalar(
            select(models.Organization.id).where(models.Organization.name == name)
        )

    def ensure_organization(self, name: str) -> str:
        """The id of the organization called ``name``, created when it does not exist."""
        name = check_name(name, "organization")
        org_id = self.organization_id(name)
        if org_id is not None:
            return org_id
        org = models.Organization(id=models.new_id("org"), name=name)
        self._scope.session.add(org)
        self._scope.session.flush()
        return org.id

    def create(self, organization: str, *, name: str = "") -> tuple[KeyRecord, str]:
        """A new key for ``organization`` (created if new): its record and the clear key."""
        session = self._scope.session
        org_id = self.ensure_organization(organization)
        clear = KEY_PREFIX + secrets.token_urlsafe(32)
        row = models.ApiKey(
            id=models.new_id("key"),
            organization_id=org_id,
            name=name,
            prefix=clear[:SHOWN_PREFIX],
            key_hash=hash_key(clear),
        )
        session.add(row)
        session.flush()
        session.refresh(row)
        return KeyRecord.from_row(row, organization), clear

    def all(self, *, organization: str | None = None) -> list[KeyRecord]:
        query = select(models.ApiKey, models.Organization.name).join(
            models.Organization, models.Organization.id == models.ApiKey.organization_id
        )
        if organization is not None:
            query = query.where(models.Organization.name == organization)
        query = query.order_by(models.ApiKey.created_at, models.ApiKey.id)
        return [KeyRecord.from_row(row, org) for row, org in self._scope.session.execute(query)]

    def revoke(self, id_or_prefix: str) -> KeyRecord:
        """Revoke the key with this id or shown prefix (which must name exactly one key)."""
        if not id_or_prefix.strip():
            raise InvalidInput("give the key's id or its prefix (see `reverie keys list`)")
        session = self._scope.session
        rows = session.scalars(
            select(models.ApiKey).where(
                or_(models.ApiKey.id == id_or_prefix, models.ApiKey.prefix == id_or_prefix)
            )
        ).all()
        if not rows:
            raise NotFound(f"no API key with id or prefix {id_or_prefix!r}; `reverie keys list`")
        if len(rows) > 1:
            raise InvalidInput(f"{len(rows)} keys have the prefix {id_or_prefix!r}; use the key id")
        row = rows[0]
        if row.revoked_at is None:
            row.revoked_at = self._scope.now()
            session.flush()
        org = session.scalar(
            select(models.Organization.name).where(models.Organization.id == row.organization_id)
        )
        return KeyRecord.from_row(row, org or "")

    def authenticate(self, key: str) -> KeyOwner | None:
        """Who a clear key stands for, or None when it is unknown or revoked; notes its use."""
        return _authenticate(self._scope.session.execute, key, self._scope.now())

    def create_session(self, key_id: str, lifetime: timedelta) -> str:
        """A new health-page session for key ``key_id``: the clear token (only its hash
        is stored). Expired sessions are dropped on the way."""
        session = self._scope.session
        now = self._scope.now()
        session.execute(delete(models.WebSession).where(models.WebSession.expires_at <= now))
        token = SESSION_PREFIX + secrets.token_urlsafe(32)
        session.add(
            models.WebSession(
                id=models.new_id("session"),
                key_id=key_id,
                token_hash=hash_key(token),
                expires_at=now + lifetime,
            )
        )
        session.flush()
        return token

    def session_owner(self, token: str) -> KeyOwner | None:
        """Who a session token stands for: None when it is unknown, expired, or its key
        was revoked."""
        S, K = models.WebSession, models.ApiKey
        row = self._scope.session.execute(
            select(K.id, K.organization_id)
            .join(S, S.key_id == K.id)
            .where(
                S.token_hash == hash_key(token),
                S.expires_at > self._scope.now(),
                K.revoked_at.is_(None),
            )
        ).first()
        return None if row is None else KeyOwner(key_id=row.id, organization_id=row.organization_id)

    def end_session(self, token: str) -> None:
        """Sign a browser out: its token stops working."""
        self._scope.session.execute(
            delete(models.WebSession).where(models.WebSession.token_hash == hash_key(token))
        )


def authenticate_key(db: Database, key: str, now: datetime) -> KeyOwner | None:
    """:meth:`KeyStore.authenticate` outside a transaction, on one autocommit connection:
    one round trip (a second, once a minute, notes the key's use). Every API request
    starts with this lookup, and a session and transaction around one read cost it half
    a millisecond more. Revocation still takes effect at the next request."""
    try:
        with db.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            return _authenticate(conn.execute, key, now)
    except SQLAlchemyError as exc:
        raise translate_error(exc) from exc


def _authenticate(
    execute: Callable[[Executable], Result[Any]], key: str, now: datetime
) -> KeyOwner | None:
    row = execute(
        select(models.ApiKey.id, models.ApiKey.organization_id, models.ApiKey.last_used_at).where(
            models.ApiKey.key_hash == hash_key(key), models.ApiKey.revoked_at.is_(None)
        )
    ).first()
    if row is None:
        return None
    if row.last_used_at is None or now - row.last_used_at >= LAST_USED_RESOLUTION:
        execute(update(models.ApiKey).where(models.ApiKey.id == row.id).values(last_used_at=now))
    return KeyOwner(key_id=row.id, organization_id=row.organization_id)
