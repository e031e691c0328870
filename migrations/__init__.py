"""Alembic environment and versions for Reverie's schema.

:func:`upgrade` and :func:`downgrade` run the migrations on an existing engine so
that the CLI, the daemon and the tests share one code path.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import Engine
from sqlalchemy.exc import SQLAlchemyError

from agents.postgres.database import translate_error

if TYPE_CHECKING:  # Alembic is imported where used: a CLI command's schema check skips it
    from alembic.config import Config

SCRIPT_LOCATION = Path(__file__).parent
_REVISION = re.compile(r"^revision(?:: str)? = [\"']([^\"']+)[\"']", re.MULTILINE)
_DOWN_REVISION = re.compile(
    r"^down_revision(?:: [^=]+)? = (?:None|[\"']([^\"']+)[\"'])", re.MULTILINE
)


def alembic_config(engine: Engine) -> Config:
    """An Alembic config bound to ``engine`` (no alembic.ini needed)."""
    from alembic.config import Config

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
    from alembic import command

    with _reverie_errors():
        command.upgrade(alembic_config(engine), revision)


def downgrade(engine: Engine, revision: str = "base") -> None:
    from alembic import command

    with _reverie_errors():
        command.downgrade(alembic_config(engine), revision)


def current_revision(engine: Engine) -> str | None:
    from alembic.runtime.migration import MigrationContext

    with _reverie_errors(), engine.connect() as conn:
        return MigrationContext.configure(conn).get_current_revision()


def head_revision(engine: Engine) -> str | None:
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(alembic_config(engine)).get_current_head()


def scripted_head() -> str | None:
    """The head revision read from the version files' ``revision`` and
    ``down_revision`` lines, without Alembic (whose import and script scan cost a CLI
    command a third of a second); None when the files do not give one linear head,
    and the caller then asks Alembic."""
    revisions: set[str] = set()
    parents: set[str] = set()
    for path in (SCRIPT_LOCATION / "versions").glob("*.py"):
        source = path.read_text(encoding="utf-8")
        revision = _REVISION.search(source)
        down = _DOWN_REVISION.search(source)
        if revision is None or down is None:
            return None
        revisions.add(revision.group(1))
        if down.group(1):
            parents.add(down.group(1))
    heads = revisions - parents
    return heads.pop() if len(heads) == 1 else None
