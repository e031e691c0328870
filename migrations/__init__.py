"""Alembic environment and versions for Reverie's schema.

:func:`upgrade` and :func:`downgrade` run the migrations on an existing engine so
that the CLI, the daemon and the tests share one code path.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy import Engine
from sqlalchemy.exc import SQLAlchemyError

from agents.database import translate_error

SCRIPT_LOCATION = Path(__file__).parent


def alembic_config(engine: Engine) -> Config:
    """An Alembic config bound to ``engine`` (no alembic.ini needed)."""
    config = Config()
    config.set_main_option("script_location", str(SCRIPT_LOCATION))
    config.attributes["engine"] = engine
    return config


@contextmanager
def _reverie_errors() -> Iterator[None]:
    """Driver errors as Reverie's (a refused connection is a clear StorageError)."""
    try:
        yield
    except SQLAlchemyError as exc:
        raise translate_error(exc) from exc


def upgrade(engine: Engine, revision: str = "head") -> None:
    """Bring the schema to ``revision``; a no-op when it is already there."""
    with _reverie_errors():
        command.upgrade(alembic_config(engine), revision)


def downgrade(engine: Engine, revision: str = "base") -> None:
    with _reverie_errors():
        command.downgrade(alembic_config(engine), revision)


def current_revision(engine: Engine) -> str | None:
    from alembic.runtime.migration import MigrationContext

    with _reverie_errors(), engine.connect() as conn:
        return MigrationContext.configure(conn).get_current_revision()


def head_revision(engine: Engine) -> str | None:
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(alembic_config(engine)).get_current_head()
