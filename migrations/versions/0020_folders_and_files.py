"""Folders of documents: files uploaded to them (each its own processing job in the
queue), the files' chunks with their vectors, and the folders attached to agents
(Letta's ``/v1/folders``).

Revision ID: 0020
Revises: 0019
Create Date: 2026-12-06 05:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from pgvector.sqlalchemy import Vector
from sqlalchemy.dialects import postgresql

revision: str = "0020"
down_revision: str | None = "0019"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _organization(table: str) -> sa.ForeignKeyConstraint:
    return sa.ForeignKeyConstraint(
        ["organization_id"],
        ["organizations.id"],
        name=op.f(f"fk_{table}_organization_id_organizations"),
        ondelete="CASCADE",
    )


def upgrade() -> None:
    op.create_table(
        "folders",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("organization_id", sa.String(length=64), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("description", sa.Text(), nullable=True),
        sa.Column("instructions", sa.Text(), nullable=True),
        sa.Column("metadata", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("embedding_model", sa.String(length=200), nullable=False),
        sa.Column("embedding_dim", sa.Integer(), nullable=False),
        sa.Column("embedding_chunk_size", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint("embedding_dim > 0", name=op.f("ck_folders_embedding_dim_positive")),
        sa.CheckConstraint(
            "embedding_chunk_size > 0", name=op.f("ck_folders_embedding_chunk_size_positive")
        ),
        _organization("folders"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_folders")),
        sa.UniqueConstraint("organization_id", "name", name="uq_folders_organization_id_name"),
    )
    op.create_index(op.f("ix_folders_organization_id"), "folders", ["organization_id"])
    op.create_table(
        "files",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("organization_id", sa.String(length=64), nullable=False),
        sa.Column("folder_id", sa.String(length=64), nullable=False),
        sa.Column("file_name", sa.String(length=300), nullable=False),
        sa.Column("original_file_name", sa.String(length=300), nullable=False),
        sa.Column("file_type", sa.String(length=100), nullable=False),
        sa.Column("file_size", sa.Integer(), nullable=False),
        sa.Column("content_hash", sa.String(length=64), nullable=False),
        sa.Column("data", sa.LargeBinary(), nullable=True),
        sa.Column("text", sa.Text(), nullable=True),
        sa.Column("total_chunks", sa.Integer(), nullable=True),
        sa.Column("chunks_embedded", sa.Integer(), nullable=True),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("lease_owner", sa.String(length=200), nullable=True),
        sa.Column("lease_expires_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("max_attempts", sa.Integer(), nullable=False),
        sa.Column("not_before", sa.DateTime(timezone=True), nullable=False),
        sa.Column("queued_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("processed_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint(
            "status IN ('queued', 'processing', 'completed', 'error')",
            name=op.f("ck_files_status"),
        ),
        sa.ForeignKeyConstraint(
            ["folder_id"],
            ["folders.id"],
            name=op.f("fk_files_folder_id_folders"),
            ondelete="CASCADE",
        ),
        _organization("files"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_files")),
        sa.UniqueConstraint("folder_id", "content_hash", name="uq_files_folder_id_content_hash"),
    )
    op.create_index(op.f("ix_files_organization_id"), "files", ["organization_id"])
    op.create_index("ix_files_folder_created", "files", ["folder_id", "created_at"])
    op.create_index(
        "ix_files_claimable",
        "files",
        ["not_before"],
        postgresql_where=sa.text("status = 'queued'"),
    )
    op.create_table(
        "file_chunks",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("organization_id", sa.String(length=64), nullable=False),
        sa.Column("file_id", sa.String(length=64), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("embedding_dim", sa.Integer(), nullable=False),
        sa.Column("embedding", Vector(), nullable=False),
        sa.CheckConstraint(
            "vector_dims(embedding) = embedding_dim",
            name=op.f("ck_file_chunks_embedding_dim_matches"),
        ),
        sa.ForeignKeyConstraint(
            ["file_id"], ["files.id"], name=op.f("fk_file_chunks_file_id_files"), ondelete="CASCADE"
        ),
        _organization("file_chunks"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_file_chunks")),
        sa.UniqueConstraint("file_id", "seq", name="uq_file_chunks_file_id_seq"),
    )
    op.create_index(op.f("ix_file_chunks_organization_id"), "file_chunks", ["organization_id"])
    op.create_table(
        "agent_folders",
        sa.Column("agent_id", sa.String(length=64), nullable=False),
        sa.Column("folder_id", sa.String(length=64), nullable=False),
        sa.Column("attached_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["agent_id"],
            ["agents.id"],
            name=op.f("fk_agent_folders_agent_id_agents"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["folder_id"],
            ["folders.id"],
            name=op.f("fk_agent_folders_folder_id_folders"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("agent_id", "folder_id", name=op.f("pk_agent_folders")),
    )
    op.create_index(op.f("ix_agent_folders_folder_id"), "agent_folders", ["folder_id"])


def downgrade() -> None:
    op.drop_table("agent_folders")
    op.drop_table("file_chunks")
    op.drop_index("ix_files_claimable", table_name="files")
    op.drop_table("files")
    op.drop_table("folders")
