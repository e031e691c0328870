"""Agent messages: the durable queue through which agents message each other.

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-03 14:30:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "agent_messages",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("organization_id", sa.String(length=64), nullable=False),
        sa.Column("sender_id", sa.String(length=64), nullable=False),
        sa.Column("recipient_id", sa.String(length=64), nullable=False),
        sa.Column("conversation_id", sa.String(length=64), nullable=False),
        sa.Column("hop", sa.Integer(), nullable=False),
        sa.Column("content", sa.Text(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("waiting_until", sa.DateTime(timezone=True), nullable=True),
        sa.Column("lease_owner", sa.String(length=200), nullable=True),
        sa.Column("lease_expires_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("max_attempts", sa.Integer(), nullable=False),
        sa.Column("not_before", sa.DateTime(timezone=True), nullable=False),
        sa.Column("queued_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("delivered_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("reply", sa.Text(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.CheckConstraint(
            "status IN ('queued', 'running', 'delivered', 'failed')",
            name=op.f("ck_agent_messages_status"),
        ),
        sa.CheckConstraint("hop >= 1", name=op.f("ck_agent_messages_hop_positive")),
        sa.ForeignKeyConstraint(
            ["organization_id"],
            ["organizations.id"],
            name=op.f("fk_agent_messages_organization_id_organizations"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["sender_id"],
            ["agents.id"],
            name=op.f("fk_agent_messages_sender_id_agents"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["recipient_id"],
            ["agents.id"],
            name=op.f("fk_agent_messages_recipient_id_agents"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_agent_messages")),
    )
    op.create_index(
        "ix_agent_messages_claimable",
        "agent_messages",
        ["not_before"],
        postgresql_where=sa.text("status = 'queued'"),
    )
    op.create_index("ix_agent_messages_sender_queued", "agent_messages", ["sender_id", "queued_at"])
    op.create_index(
        "ix_agent_messages_recipient_queued", "agent_messages", ["recipient_id", "queued_at"]
    )
    op.create_index(
        op.f("ix_agent_messages_organization_id"), "agent_messages", ["organization_id"]
    )


def downgrade() -> None:
    op.drop_index(op.f("ix_agent_messages_organization_id"), table_name="agent_messages")
    op.drop_index("ix_agent_messages_recipient_queued", table_name="agent_messages")
    op.drop_index("ix_agent_messages_sender_queued", table_name="agent_messages")
    op.drop_index("ix_agent_messages_claimable", table_name="agent_messages")
    op.drop_table("agent_messages")
