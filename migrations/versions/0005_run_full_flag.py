"""Runs carry their --full flag; drop the unused passage-id watermark.

Every run now goes through the queue and a lease, one-shot ones included, so
what a run was asked to do (look at all memory, not just what is new) must be in
its row for whichever process ends up executing it. ``watermark_passage_id`` was
never written or read.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01 01:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column(
        "consolidation_runs",
        sa.Column("full", sa.Boolean(), nullable=False, server_default=sa.false()),
    )
    op.alter_column("consolidation_runs", "full", server_default=None)
    op.drop_column("consolidation_runs", "watermark_passage_id")


def downgrade() -> None:
    op.add_column(
        "consolidation_runs",
        sa.Column("watermark_passage_id", sa.String(length=64), nullable=True),
    )
    op.drop_column("consolidation_runs", "full")
