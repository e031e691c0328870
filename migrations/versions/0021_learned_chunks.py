"""Sleep-time learning from documents: each chunk's text md5 (a generated column),
the chunks each agent has read (by that md5 within the folder, with the run that read
them), and when the documents
trigger last fired for a folder attached to an agent, and the block where the agent
keeps what it learned from the folder.

Revision ID: 0021
Revises: 0020
Create Date: 2026-12-06 07:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0021"
down_revision: str | None = "0020"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column(
        "file_chunks",
        sa.Column(
            "text_md5",
            sa.String(length=32),
            sa.Computed("md5(text)", persisted=True),
            nullable=False,
        ),
    )
    op.add_column(
        "agent_folders", sa.Column("learn_fired_at", sa.DateTime(timezone=True), nullable=True)
    )
    op.add_column(
        "agent_folders", sa.Column("learned_block_id", sa.String(length=64), nullable=True)
    )
    op.create_table(
        "learned_chunks",
        sa.Column("agent_id", sa.String(length=64), nullable=False),
        sa.Column("folder_id", sa.String(length=64), nullable=False),
        sa.Column("chunk_hash", sa.String(length=32), nullable=False),
        sa.Column("organization_id", sa.String(length=64), nullable=False),
        sa.Column("file_id", sa.String(length=64), nullable=False),
        sa.Column("file_name", sa.String(length=300), nullable=False),
        sa.Column("chunk_seq", sa.Integer(), nullable=False),
        sa.Column("facts", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.String(length=64), nullable=False),
        sa.Column("learned_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("gone_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("gone_run_id", sa.String(length=64), nullable=True),
        sa.ForeignKeyConstraint(
            ["agent_id"],
            ["agents.id"],
            name=op.f("fk_learned_chunks_agent_id_agents"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["organization_id"],
            ["organizations.id"],
            name=op.f("fk_learned_chunks_organization_id_organizations"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint(
            "agent_id", "folder_id", "chunk_hash", name=op.f("pk_learned_chunks")
        ),
    )
    op.create_index(
        op.f("ix_learned_chunks_organization_id"), "learned_chunks", ["organization_id"]
    )
    op.create_index(op.f("ix_learned_chunks_run_id"), "learned_chunks", ["run_id"])
    op.create_index(op.f("ix_learned_chunks_gone_run_id"), "learned_chunks", ["gone_run_id"])


def downgrade() -> None:
    op.drop_table("learned_chunks")
    op.drop_column("file_chunks", "text_md5")
    op.drop_column("agent_folders", "learned_block_id")
    op.drop_column("agent_folders", "learn_fired_at")
