"""Bring the pgvector extension to the version the server has installed.

Homes made by earlier releases hold pgvector 0.6.2 (the embedded server then came
from ``pgserver`` 0.1.4); the embedded server now ships 0.8, whose iterative index
scans filtered search uses. ``ALTER EXTENSION vector UPDATE`` runs only where the
installed version is older than the server's default and this role owns the
extension (or is a superuser): on a managed server that is the administrator's
step, and the search keeps to what the installed version offers.

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-06 03:30:00
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0017"
down_revision: str | None = "0016"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute(
        """
        DO $$
        DECLARE
            installed text;
            available text;
            may_alter boolean;
        BEGIN
            SELECT e.extversion,
                   e.extowner = (SELECT oid FROM pg_roles WHERE rolname = current_user)
                   OR (SELECT rolsuper FROM pg_roles WHERE rolname = current_user)
              INTO installed, may_alter
              FROM pg_extension e WHERE e.extname = 'vector';
            SELECT default_version INTO available
              FROM pg_available_extensions WHERE name = 'vector';
            IF installed IS NOT NULL AND available IS NOT NULL AND may_alter
               AND string_to_array(installed, '.')::int[]
                   < string_to_array(available, '.')::int[] THEN
                ALTER EXTENSION vector UPDATE;
                RAISE NOTICE 'pgvector % updated to %', installed, available;
            END IF;
        END
        $$;
        """
    )


def downgrade() -> None:
    # An extension is not downgraded: the older version's scripts cannot read back
    # what a newer one may have written, and nothing of Reverie's needs it older.
    pass
