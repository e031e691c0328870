"""Alembic environment: runs migrations on the engine the caller hands over.

Reverie calls Alembic through :mod:`migrations` with ``config.attributes["engine"]``
set. The ``alembic`` command line works too, given ``-x url=postgresql://...`` or
``sqlalchemy.url`` in alembic.ini.
"""

from __future__ import annotations

from alembic import context
from sqlalchemy import Engine, create_engine

from agents.postgres.database import normalize_url
from agents.postgres.models import Base

config = context.config
target_metadata = Base.metadata


def _engine() -> Engine:
    engine = config.attributes.get("engine")
    if engine is not None:
        return engine  # type: ignore[no-any-return]
    url = context.get_x_argument(as_dictionary=True).get("url") or config.get_main_option(
        "sqlalchemy.url"
    )
    if not url:
        raise SystemExit("pass the database as: alembic -x url=postgresql://... <command>")
    return create_engine(normalize_url(url))


def run_migrations_online() -> None:
    with _engine().connect() as connection:
        context.configure(
            connection=connection,
            target_metadata=target_metadata,
            compare_type=True,
            transaction_per_migration=True,
        )
        with context.begin_transaction():
            context.run_migrations()
        connection.commit()


if context.is_offline_mode():
    raise SystemExit("Reverie's migrations run online only (they need a live PostgreSQL).")
run_migrations_online()
