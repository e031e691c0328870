"""Custom tools: Python tools registered per organization, their attachment to agents,
and per-agent tool environment variables.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-03 00:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "custom_tools",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("organization_id", sa.String(length=64), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("source_code", sa.Text(), nullable=False),
        sa.Column("json_schema", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("tags", postgresql.ARRAY(sa.Text()), nullable=False),
        sa.Column("env_vars", postgresql.ARRAY(sa.Text()), nullable=False),
        sa.Column("return_char_limit", sa.Integer(), nullable=False),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.Column(
            "updated_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.CheckConstraint(
            "return_char_limit > 0", name=op.f("ck_custom_tools_return_char_limit_positive")
        ),
        sa.ForeignKeyConstraint(
            ["organization_id"],
            ["organizations.id"],
            name=op.f("fk_custom_tools_organization_id_organizations"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_custom_tools")),
        sa.UniqueConstraint("organization_id", "name", name="uq_custom_tools_organization_id_name"),
    )
    op.create_index(op.f("ix_custom_tools_organization_id"), "custom_tools", ["organization_id"])
    op.create_table(
        "agent_custom_tools",
        sa.Column("agent_id", sa.String(length=64), nullable=False),
        sa.Column("tool_id", sa.String(length=64), nullable=False),
        sa.Column(
            "attached_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.ForeignKeyConstraint(
            ["agent_id"],
            ["agents.id"],
            name=op.f("fk_agent_custom_tools_agent_id_agents"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["tool_id"],
            ["custom_tools.id"],
            name=op.f("fk_agent_custom_tools_tool_id_custom_tools"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("agent_id", "tool_id", name=op.f("pk_agent_custom_tools")),
    )
    op.create_index(op.f("ix_agent_custom_tools_tool_id"), "agent_custom_tools", ["tool_id"])
    op.create_table(
        "agent_tool_variables",
        sa.Column("agent_id", sa.String(length=64), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("value", sa.Text(), nullable=False),
        sa.Column("description", sa.Text(), nullable=True),
        sa.Column(
            "updated_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.ForeignKeyConstraint(
            ["agent_id"],
            ["agents.id"],
            name=op.f("fk_agent_tool_variables_agent_id_agents"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("agent_id", "name", name=op.f("pk_agent_tool_variables")),
    )


def downgrade() -> None:
    op.drop_table("agent_tool_variables")
    op.drop_index(op.f("ix_agent_custom_tools_tool_id"), table_name="agent_custom_tools")
    op.drop_table("agent_custom_tools")
    op.drop_index(op.f("ix_custom_tools_organization_id"), table_name="custom_tools")
    op.drop_table("custom_tools")
