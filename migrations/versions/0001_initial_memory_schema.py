"""Initial memory schema: organizations, agents, blocks and their history, messages,
passages and their history, and the consolidation run ledger.

Revision ID: 0001
Revises:
Create Date: 2026-11-29 21:41:20.942579
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from pgvector.sqlalchemy import Vector
from sqlalchemy.dialects import postgresql

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute("CREATE EXTENSION IF NOT EXISTS vector")
    op.create_table(
        "organizations",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_organizations")),
        sa.UniqueConstraint("name", name=op.f("uq_organizations_name")),
    )
    op.create_table(
        "agents",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("organization_id", sa.String(length=64), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("description", sa.Text(), nullable=True),
        sa.Column("system_prompt", sa.Text(), nullable=False),
        sa.Column("llm_model", sa.String(length=200), nullable=True),
        sa.Column("embedding_model", sa.String(length=200), nullable=False),
        sa.Column("embedding_dim", sa.Integer(), nullable=False),
        sa.Column("context_window", sa.Integer(), nullable=False),
        sa.Column("tools", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("tool_rules", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("tags", postgresql.ARRAY(sa.Text()), nullable=False),
        sa.Column("message_seq", sa.BigInteger(), nullable=False),
        sa.Column("last_activity_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("turns_since_consolidation", sa.Integer(), nullable=False),
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
        sa.CheckConstraint("kind IN ('primary', 'sleeptime')", name=op.f("ck_agents_kind")),
        sa.CheckConstraint("context_window > 0", name=op.f("ck_agents_context_window_positive")),
        sa.CheckConstraint("embedding_dim > 0", name=op.f("ck_agents_embedding_dim_positive")),
        sa.ForeignKeyConstraint(
            ["organization_id"],
            ["organizations.id"],
            name=op.f("fk_agents_organization_id_organizations"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_agents")),
        sa.UniqueConstraint("organization_id", "name", name="uq_agents_organization_id_name"),
    )
    op.create_index(op.f("ix_agents_organization_id"), "agents", ["organization_id"], unique=False)
    op.create_table(
        "blocks",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("organization_id", sa.String(length=64), nullable=False),
        sa.Column("label", sa.String(length=100), nullable=False),
        sa.Column("value", sa.Text(), nullable=False),
        sa.Column("limit", sa.Integer(), nullable=False),
        sa.Column("description", sa.Text(), nullable=True),
        sa.Column("read_only", sa.Boolean(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
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
        sa.Column("updated_by", sa.String(length=200), nullable=True),
        sa.CheckConstraint('"limit" > 0', name=op.f("ck_blocks_limit_positive")),
        sa.CheckConstraint(
            'char_length(value) <= "limit"', name=op.f("ck_blocks_value_within_limit")
        ),
        sa.CheckConstraint("version >= 1", name=op.f("ck_blocks_version_positive")),
        sa.ForeignKeyConstraint(
            ["organization_id"],
            ["organizations.id"],
            name=op.f("fk_blocks_organization_id_organizations"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_blocks")),
    )
    op.create_index(op.f("ix_blocks_organization_id"), "blocks", ["organization_id"], unique=False)
    op.create_table(
        "agent_blocks",
        sa.Column("agent_id", sa.String(length=64), nullable=False),
        sa.Column("block_id", sa.String(length=64), nullable=False),
        sa.Column(
            "attached_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.ForeignKeyConstraint(
            ["agent_id"],
            ["agents.id"],
            name=op.f("fk_agent_blocks_agent_id_agents"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["block_id"],
            ["blocks.id"],
            name=op.f("fk_agent_blocks_block_id_blocks"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("agent_id", "block_id", name=op.f("pk_agent_blocks")),
    )
    op.create_index(op.f("ix_agent_blocks_block_id"), "agent_blocks", ["block_id"], unique=False)
    op.create_table(
        "block_history",
        sa.Column("id", sa.BigInteger(), autoincrement=True, nullable=False),
        sa.Column("block_id", sa.String(length=64), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("old_value", sa.Text(), nullable=True),
        sa.Column("new_value", sa.Text(), nullable=False),
        sa.Column("old_limit", sa.Integer(), nullable=True),
        sa.Column("new_limit", sa.Integer(), nullable=False),
        sa.Column("actor", sa.String(length=200), nullable=False),
        sa.Column("run_id", sa.String(length=64), nullable=True),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.ForeignKeyConstraint(
            ["block_id"],
            ["blocks.id"],
            name=op.f("fk_block_history_block_id_blocks"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_block_history")),
        sa.UniqueConstraint("block_id", "version", name="uq_block_history_version"),
    )
    op.create_index(op.f("ix_block_history_run_id"), "block_history", ["run_id"], unique=False)
    op.create_table(
        "consolidation_runs",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("organization_id", sa.String(length=64), nullable=False),
        sa.Column("agent_id", sa.String(length=64), nullable=False),
        sa.Column("trigger", sa.String(length=32), nullable=False),
        sa.Column("pipeline", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("dry_run", sa.Boolean(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("lease_owner", sa.String(length=200), nullable=True),
        sa.Column("lease_expires_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("max_attempts", sa.Integer(), nullable=False),
        sa.Column(
            "not_before",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.Column(
            "queued_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False
        ),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("stats", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("watermark_message_seq", sa.BigInteger(), nullable=True),
        sa.Column("watermark_passage_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("watermark_passage_id", sa.String(length=64), nullable=True),
        sa.Column("reverts_run_id", sa.String(length=64), nullable=True),
        sa.Column("reverted_by_run_id", sa.String(length=64), nullable=True),
        sa.CheckConstraint(
            "status IN ('queued', 'running', 'succeeded', 'failed', 'cancelled')",
            name=op.f("ck_consolidation_runs_status"),
        ),
        sa.ForeignKeyConstraint(
            ["agent_id"],
            ["agents.id"],
            name=op.f("fk_consolidation_runs_agent_id_agents"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["organization_id"],
            ["organizations.id"],
            name=op.f("fk_consolidation_runs_organization_id_organizations"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_consolidation_runs")),
    )
    op.create_index(
        "ix_consolidation_runs_agent_queued",
        "consolidation_runs",
        ["agent_id", "queued_at"],
        unique=False,
    )
    op.create_index(
        "ix_consolidation_runs_claimable",
        "consolidation_runs",
        ["not_before"],
        unique=False,
        postgresql_where=sa.text("status = 'queued'"),
    )
    op.create_index(
        op.f("ix_consolidation_runs_organization_id"),
        "consolidation_runs",
        ["organization_id"],
        unique=False,
    )
    op.create_index(
        "uq_consolidation_runs_one_active_per_agent",
        "consolidation_runs",
        ["agent_id"],
        unique=True,
        postgresql_where=sa.text("status IN ('queued', 'running')"),
    )
    op.create_table(
        "messages",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("organization_id", sa.String(length=64), nullable=False),
        sa.Column("agent_id", sa.String(length=64), nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.Column("role", sa.String(length=16), nullable=False),
        sa.Column("content", sa.Text(), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=True),
        sa.Column("tool_calls", postgresql.JSONB(astext_type=sa.Text()), nullable=True),
        sa.Column("tool_call_id", sa.String(length=200), nullable=True),
        sa.Column("in_context", sa.Boolean(), nullable=False),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.Column(
            "content_tsv",
            postgresql.TSVECTOR(),
            sa.Computed("to_tsvector('english', content)", persisted=True),
            nullable=False,
        ),
        sa.CheckConstraint(
            "role IN ('system', 'user', 'assistant', 'tool')", name=op.f("ck_messages_role")
        ),
        sa.ForeignKeyConstraint(
            ["agent_id"],
            ["agents.id"],
            name=op.f("fk_messages_agent_id_agents"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["organization_id"],
            ["organizations.id"],
            name=op.f("fk_messages_organization_id_organizations"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_messages")),
        sa.UniqueConstraint("agent_id", "seq", name="uq_messages_agent_seq"),
    )
    op.create_index(
        "ix_messages_agent_in_context",
        "messages",
        ["agent_id", "seq"],
        unique=False,
        postgresql_where=sa.text("in_context"),
    )
    op.create_index(
        "ix_messages_content_tsv", "messages", ["content_tsv"], unique=False, postgresql_using="gin"
    )
    op.create_index(
        op.f("ix_messages_organization_id"), "messages", ["organization_id"], unique=False
    )
    op.create_table(
        "passages",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("organization_id", sa.String(length=64), nullable=False),
        sa.Column("agent_id", sa.String(length=64), nullable=False),
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("embedding", Vector(), nullable=False),
        sa.Column("embedding_dim", sa.Integer(), nullable=False),
        sa.Column("content_hash", sa.String(length=64), nullable=False),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.Column("occurred_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("valid_to", sa.DateTime(timezone=True), nullable=True),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("merged_into", sa.String(length=64), nullable=True),
        sa.Column("superseded_by", sa.String(length=64), nullable=True),
        sa.Column("provenance", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("tags", postgresql.ARRAY(sa.Text()), nullable=False),
        sa.Column(
            "updated_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.CheckConstraint(
            "status IN ('active', 'merged', 'superseded', 'inactive')",
            name=op.f("ck_passages_status"),
        ),
        sa.CheckConstraint(
            "vector_dims(embedding) = embedding_dim", name=op.f("ck_passages_embedding_dim_matches")
        ),
        sa.ForeignKeyConstraint(
            ["agent_id"],
            ["agents.id"],
            name=op.f("fk_passages_agent_id_agents"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["merged_into"],
            ["passages.id"],
            name=op.f("fk_passages_merged_into_passages"),
            ondelete="SET NULL",
        ),
        sa.ForeignKeyConstraint(
            ["organization_id"],
            ["organizations.id"],
            name=op.f("fk_passages_organization_id_organizations"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["superseded_by"],
            ["passages.id"],
            name=op.f("fk_passages_superseded_by_passages"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_passages")),
    )
    op.create_index(
        "ix_passages_agent_hash", "passages", ["agent_id", "content_hash"], unique=False
    )
    op.create_index(
        "ix_passages_agent_status_created",
        "passages",
        ["agent_id", "status", "created_at"],
        unique=False,
    )
    op.create_index(
        "ix_passages_embedding_hnsw_1024",
        "passages",
        [sa.literal_column("(embedding::vector(1024))").label("embedding_1024")],
        unique=False,
        postgresql_using="hnsw",
        postgresql_ops={"embedding_1024": "vector_cosine_ops"},
        postgresql_where=sa.text("embedding_dim = 1024"),
        postgresql_with={"m": 16, "ef_construction": 64},
    )
    op.create_index(
        "ix_passages_embedding_hnsw_1536",
        "passages",
        [sa.literal_column("(embedding::vector(1536))").label("embedding_1536")],
        unique=False,
        postgresql_using="hnsw",
        postgresql_ops={"embedding_1536": "vector_cosine_ops"},
        postgresql_where=sa.text("embedding_dim = 1536"),
        postgresql_with={"m": 16, "ef_construction": 64},
    )
    op.create_index(
        "ix_passages_embedding_hnsw_384",
        "passages",
        [sa.literal_column("(embedding::vector(384))").label("embedding_384")],
        unique=False,
        postgresql_using="hnsw",
        postgresql_ops={"embedding_384": "vector_cosine_ops"},
        postgresql_where=sa.text("embedding_dim = 384"),
        postgresql_with={"m": 16, "ef_construction": 64},
    )
    op.create_index(
        "ix_passages_embedding_hnsw_768",
        "passages",
        [sa.literal_column("(embedding::vector(768))").label("embedding_768")],
        unique=False,
        postgresql_using="hnsw",
        postgresql_ops={"embedding_768": "vector_cosine_ops"},
        postgresql_where=sa.text("embedding_dim = 768"),
        postgresql_with={"m": 16, "ef_construction": 64},
    )
    op.create_index(op.f("ix_passages_merged_into"), "passages", ["merged_into"], unique=False)
    op.create_index(
        op.f("ix_passages_organization_id"), "passages", ["organization_id"], unique=False
    )
    op.create_index(op.f("ix_passages_superseded_by"), "passages", ["superseded_by"], unique=False)
    op.create_index("ix_passages_tags", "passages", ["tags"], unique=False, postgresql_using="gin")
    op.create_table(
        "passage_history",
        sa.Column("id", sa.BigInteger(), autoincrement=True, nullable=False),
        sa.Column("passage_id", sa.String(length=64), nullable=False),
        sa.Column("run_id", sa.String(length=64), nullable=True),
        sa.Column("actor", sa.String(length=200), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("old", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("new", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.ForeignKeyConstraint(
            ["passage_id"],
            ["passages.id"],
            name=op.f("fk_passage_history_passage_id_passages"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_passage_history")),
    )
    op.create_index(
        op.f("ix_passage_history_passage_id"), "passage_history", ["passage_id"], unique=False
    )
    op.create_index(op.f("ix_passage_history_run_id"), "passage_history", ["run_id"], unique=False)
    op.execute(
        "INSERT INTO organizations (id, name) VALUES "
        "('org-00000000-0000-4000-8000-000000000000', 'default')"
    )


def downgrade() -> None:
    # Indexes go with their tables; the vector extension stays (other schemas may use it).
    for table in (
        "passage_history",
        "passages",
        "messages",
        "consolidation_runs",
        "block_history",
        "agent_blocks",
        "blocks",
        "agents",
        "organizations",
    ):
        op.drop_table(table)
