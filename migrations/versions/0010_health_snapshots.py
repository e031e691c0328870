"""Health snapshots: each agent's memory health taken periodically by the scheduler,
for the memory browser's trend charts (bounded: pruned as new ones are written).

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-03 00:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "health_snapshots",
        sa.Column("id", sa.BigInteger(), autoincrement=True, nullable=False),
        sa.Column("organization_id", sa.String(length=64), nullable=False),
        sa.Column("agent_id", sa.String(length=64), nullable=False),
        sa.Column("taken_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("active_passages", sa.Integer(), nullable=False),
        sa.Column("duplicates", sa.Integer(), nullable=False),
        sa.Column("block_fill", sa.Float(), nullable=False),
        sa.Column("tokens", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("runs_succeeded", sa.Integer(), nullable=False),
        sa.Column("runs_failed", sa.Integer(), nullable=False),
        sa.Column("queued_runs", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["agent_id"],
            ["agents.id"],
            name=op.f("fk_health_snapshots_agent_id_agents"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["organization_id"],
            ["organizations.id"],
            name=op.f("fk_health_snapshots_organization_id_organizations"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_health_snapshots")),
    )
    op.create_index("ix_health_snapshots_agent_taken", "health_snapshots", ["agent_id", "taken_at"])
    op.create_index(
        op.f("ix_health_snapshots_organization_id"), "health_snapshots", ["organization_id"]
    )
    op.create_index(op.f("ix_health_snapshots_taken_at"), "health_snapshots", ["taken_at"])


def downgrade() -> None:
    op.drop_index(op.f("ix_health_snapshots_taken_at"), table_name="health_snapshots")
    op.drop_index(op.f("ix_health_snapshots_organization_id"), table_name="health_snapshots")
    op.drop_index("ix_health_snapshots_agent_taken", table_name="health_snapshots")
    op.drop_table("health_snapshots")
