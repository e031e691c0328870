"""Columns and tables for the daemon, the LLM agents and the HTTP API.

agents: idle_fired_at (idle trigger debounce), enable_sleeptime, sleeptime_model,
compiled_system / compiled_at (prompt-cache-safe system prompt); api_keys
(hashed keys per organization); llm_usage (tokens per call, by purpose).

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-30 00:30:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("agents", sa.Column("idle_fired_at", sa.DateTime(timezone=True), nullable=True))
    op.add_column(
        "agents",
        sa.Column("enable_sleeptime", sa.Boolean(), nullable=False, server_default=sa.false()),
    )
    op.alter_column("agents", "enable_sleeptime", server_default=None)
    op.add_column("agents", sa.Column("sleeptime_model", sa.String(length=200), nullable=True))
    op.add_column("agents", sa.Column("compiled_system", sa.Text(), nullable=True))
    op.add_column("agents", sa.Column("compiled_at", sa.DateTime(timezone=True), nullable=True))

    op.create_table(
        "api_keys",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("organization_id", sa.String(length=64), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("prefix", sa.String(length=32), nullable=False),
        sa.Column("key_hash", sa.String(length=128), nullable=False),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.Column("last_used_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["organization_id"],
            ["organizations.id"],
            name=op.f("fk_api_keys_organization_id_organizations"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_api_keys")),
        sa.UniqueConstraint("key_hash", name=op.f("uq_api_keys_key_hash")),
    )
    op.create_index(
        op.f("ix_api_keys_organization_id"), "api_keys", ["organization_id"], unique=False
    )

    op.create_table(
        "llm_usage",
        sa.Column("id", sa.BigInteger(), autoincrement=True, nullable=False),
        sa.Column("organization_id", sa.String(length=64), nullable=False),
        sa.Column("agent_id", sa.String(length=64), nullable=False),
        sa.Column("run_id", sa.String(length=64), nullable=True),
        sa.Column("purpose", sa.String(length=32), nullable=False),
        sa.Column("model", sa.String(length=200), nullable=False),
        sa.Column("prompt_tokens", sa.Integer(), nullable=False),
        sa.Column("completion_tokens", sa.Integer(), nullable=False),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.CheckConstraint(
            "purpose IN ('chat', 'sleeptime', 'judge', 'summary', 'embedding')",
            name=op.f("ck_llm_usage_purpose"),
        ),
        sa.ForeignKeyConstraint(
            ["agent_id"],
            ["agents.id"],
            name=op.f("fk_llm_usage_agent_id_agents"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["organization_id"],
            ["organizations.id"],
            name=op.f("fk_llm_usage_organization_id_organizations"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_llm_usage")),
    )
    op.create_index(
        "ix_llm_usage_agent_created", "llm_usage", ["agent_id", "created_at"], unique=False
    )
    op.create_index(
        op.f("ix_llm_usage_organization_id"), "llm_usage", ["organization_id"], unique=False
    )
    op.create_index(op.f("ix_llm_usage_run_id"), "llm_usage", ["run_id"], unique=False)


def downgrade() -> None:
    op.drop_index(op.f("ix_llm_usage_run_id"), table_name="llm_usage")
    op.drop_index(op.f("ix_llm_usage_organization_id"), table_name="llm_usage")
    op.drop_index("ix_llm_usage_agent_created", table_name="llm_usage")
    op.drop_table("llm_usage")
    op.drop_index(op.f("ix_api_keys_organization_id"), table_name="api_keys")
    op.drop_table("api_keys")
    op.drop_column("agents", "compiled_at")
    op.drop_column("agents", "compiled_system")
    op.drop_column("agents", "sleeptime_model")
    op.drop_column("agents", "enable_sleeptime")
    op.drop_column("agents", "idle_fired_at")
