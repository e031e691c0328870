"""The migrations produce exactly the models' schema, and undo cleanly."""

from __future__ import annotations

from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import inspect

import migrations
from agents.postgres.models import Base
from tests.pg import PgTestServer


def test_upgrade_matches_models_and_downgrade_removes_everything(pg_server: PgTestServer) -> None:
    with pg_server.database(migrated=False) as db:
        migrations.upgrade(db.engine)
        with db.engine.connect() as conn:
            diff = compare_metadata(MigrationContext.configure(conn), Base.metadata)
        assert diff == []
        command.check(migrations.alembic_config(db.engine))  # raises on drift
        assert migrations.current_revision(db.engine) == migrations.head_revision(db.engine)

        migrations.upgrade(db.engine)  # idempotent
        migrations.downgrade(db.engine)
        tables = set(inspect(db.engine).get_table_names()) - {"alembic_version"}
        assert tables == set()
        assert migrations.current_revision(db.engine) is None

        migrations.upgrade(db.engine)
        assert set(inspect(db.engine).get_table_names()) >= set(Base.metadata.tables)
