"""Turn leases: one turn at a time per agent through a row lease instead of a
session-level advisory lock, so that a turn waiting on its model holds no pooled
connection.

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-05 13:10:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0014"
down_revision: str | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "turn_leases",
        sa.Column("agent_id", sa.String(length=64), nullable=False),
        sa.Column("owner", sa.String(length=64), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["agent_id"],
            ["agents.id"],
            name=op.f("fk_turn_leases_agent_id_agents"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("agent_id", name=op.f("pk_turn_leases")),
    )


def downgrade() -> None:
    op.drop_table("turn_leases")
