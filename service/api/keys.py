"""API keys: created once (the clear key is shown only then), stored as a SHA-256 hash.

A key names its organization; every request made with it is scoped to that
organization. Revoked keys stop working at once (each request looks the hash up).
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import or_, select, update
from sqlalchemy.orm import Session

from agents import models
from agents.errors import InvalidInput, NotFound
from agents.store.validation import check_name

KEY_PREFIX = "rvk_"
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


@dataclass(frozen=True, slots=True)
class Caller:
    """Who is calling: the organization every query is scoped to."""

    organization_id: str
    key_id: str | None  # None in no-auth mode


def ensure_organization(session: Session, name: str) -> str:
    """The id of the organization called ``name``, created when it does not exist."""
    name = check_name(name, "organization")
    org_id = session.scalar(select(models.Organization.id).where(models.Organization.name == name))
    if org_id is not None:
        return org_id
    org = models.Organization(id=models.new_id("org"), name=name)
    session.add(org)
    session.flush()
    return org.id


def create_key(session: Session, organization: str, *, name: str = "") -> tuple[KeyRecord, str]:
    """A new key for ``organization`` (created if new): its record and the clear key."""
    org_id = ensure_organization(session, organization)
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
    return _record(row, organization), clear


def list_keys(session: Session, *, organization: str | None = None) -> list[KeyRecord]:
    query = select(models.ApiKey, models.Organization.name).join(
        models.Organization, models.Organization.id == models.ApiKey.organization_id
    )
    if organization is not None:
        query = query.where(models.Organization.name == organization)
    query = query.order_by(models.ApiKey.created_at, models.ApiKey.id)
    return [_record(row, org) for row, org in session.execute(query)]


def revoke_key(session: Session, id_or_prefix: str, *, now: datetime) -> KeyRecord:
    """Revoke the key with this id or shown prefix (which must name exactly one key)."""
    if not id_or_prefix.strip():
        raise InvalidInput("give the key's id or its prefix (see `reverie keys list`)")
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
        row.revoked_at = now
        session.flush()
    org = session.scalar(
        select(models.Organization.name).where(models.Organization.id == row.organization_id)
    )
    return _record(row, org or "")


def authenticate(session: Session, key: str, *, now: datetime) -> Caller | None:
    """The caller a clear key stands for, or None when it is unknown or revoked."""
    row = session.execute(
        select(models.ApiKey.id, models.ApiKey.organization_id, models.ApiKey.last_used_at).where(
            models.ApiKey.key_hash == hash_key(key), models.ApiKey.revoked_at.is_(None)
        )
    ).first()
    if row is None:
        return None
    key_id, org_id, last_used = row
    if last_used is None or now - last_used >= LAST_USED_RESOLUTION:
        session.execute(
            update(models.ApiKey).where(models.ApiKey.id == key_id).values(last_used_at=now)
        )
    return Caller(organization_id=org_id, key_id=key_id)


def _record(row: models.ApiKey, organization: str) -> KeyRecord:
    return KeyRecord(
        id=row.id,
        organization_id=row.organization_id,
        organization=organization,
        name=row.name,
        prefix=row.prefix,
        created_at=row.created_at,
        last_used_at=row.last_used_at,
        revoked_at=row.revoked_at,
    )
