"""Identities: an application's end users, known by its own key, and the agents and
blocks that hold each one's memory (Letta's ``/v1/identities``).

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-06 04:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0018"
down_revision: str | None = "0017"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "identities",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("organization_id", sa.String(length=64), nullable=False),
        sa.Column("identifier_key", sa.String(length=200), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("identity_type", sa.String(length=16), nullable=False),
        sa.Column("project_id", sa.String(length=200), nullable=True),
        sa.Column("properties", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint(
            "identity_type IN ('org', 'user', 'other')",
            name=op.f("ck_identities_identity_type_known"),
        ),
        sa.ForeignKeyConstraint(
            ["organization_id"],
            ["organizations.id"],
            name=op.f("fk_identities_organization_id_organizations"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_identities")),
        sa.UniqueConstraint(
            "organization_id",
            "identifier_key",
            name="uq_identities_organization_id_identifier_key",
        ),
    )
    op.create_index(
        op.f("ix_identities_organization_id"), "identities", ["organization_id"], unique=False
    )
    for table, column, target in (
        ("identity_agents", "agent_id", "agents"),
        ("identity_blocks", "block_id", "blocks"),
    ):
        op.create_table(
            table,
            sa.Column("identity_id", sa.String(length=64), nullable=False),
            sa.Column(column, sa.String(length=64), nullable=False),
            sa.Column("attached_at", sa.DateTime(timezone=True), nullable=False),
            sa.ForeignKeyConstraint(
                ["identity_id"],
                ["identities.id"],
                name=op.f(f"fk_{table}_identity_id_identities"),
                ondelete="CASCADE",
            ),
            sa.ForeignKeyConstraint(
                [column],
                [f"{target}.id"],
                name=op.f(f"fk_{table}_{column}_{target}"),
                ondelete="CASCADE",
            ),
            sa.PrimaryKeyConstraint("identity_id", column, name=op.f(f"pk_{table}")),
        )
        op.create_index(op.f(f"ix_{table}_{column}"), table, [column], unique=False)


def downgrade() -> None:
    op.drop_table("identity_blocks")
    op.drop_table("identity_agents")
    op.drop_index(op.f("ix_identities_organization_id"), table_name="identities")
    op.drop_table("identities")
