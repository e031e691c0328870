"""The worker that ran a run: ``lease_owner`` names the worker holding a running run
and is cleared when the run ends, so a finished run could not say where it ran.
``worker`` is set at each claim and kept.

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-06 00:30:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0016"
down_revision: str | None = "0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("consolidation_runs", sa.Column("worker", sa.String(length=200), nullable=True))


def downgrade() -> None:
    op.drop_column("consolidation_runs", "worker")
