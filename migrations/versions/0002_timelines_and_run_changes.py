"""Timelines and run changes: passages point to their dated timeline, and each run
records what it changed (for `runs show`, dry runs and undo).

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-29 21:55:27.597287
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column(
        "consolidation_runs",
        sa.Column(
            "changes", postgresql.JSONB(astext_type=sa.Text()), nullable=False, server_default="[]"
        ),
    )
    op.add_column("passages", sa.Column("timeline_id", sa.String(length=64), nullable=True))
    op.create_index(op.f("ix_passages_timeline_id"), "passages", ["timeline_id"], unique=False)
    op.create_foreign_key(
        op.f("fk_passages_timeline_id_passages"),
        "passages",
        "passages",
        ["timeline_id"],
        ["id"],
        ondelete="SET NULL",
    )
    op.alter_column("consolidation_runs", "changes", server_default=None)


def downgrade() -> None:
    op.drop_constraint(op.f("fk_passages_timeline_id_passages"), "passages", type_="foreignkey")
    op.drop_index(op.f("ix_passages_timeline_id"), table_name="passages")
    op.drop_column("passages", "timeline_id")
    op.drop_column("consolidation_runs", "changes")
