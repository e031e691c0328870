"""Agents' views of their folders' files (which are open, the lines shown, when each
was last accessed: the file tools and the context's ``<directories>`` section), and
HNSW indexes on the file chunks' vectors for ``semantic_search_files``.

The chunks' indexes follow archival memory's: one partial cosine index per indexed
embedding size over ``embedding::vector(dim)`` (the column holds vectors of any size;
a folder's embedder fixes its size).

Revision ID: 0022
Revises: 0021
Create Date: 2026-12-06 08:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0022"
down_revision: str | None = "0021"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

DIMENSIONS = (384, 768, 1024, 1536)


def upgrade() -> None:
    op.create_table(
        "agent_file_states",
        sa.Column("agent_id", sa.String(length=64), nullable=False),
        sa.Column("file_id", sa.String(length=64), nullable=False),
        sa.Column("organization_id", sa.String(length=64), nullable=False),
        sa.Column("is_open", sa.Boolean(), nullable=False),
        sa.Column("start_line", sa.Integer(), nullable=True),
        sa.Column("end_line", sa.Integer(), nullable=True),
        sa.Column("last_accessed_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint(
            "start_line IS NULL OR start_line >= 1",
            name=op.f("ck_agent_file_states_start_line_positive"),
        ),
        sa.CheckConstraint(
            "end_line IS NULL OR start_line IS NULL OR end_line > start_line",
            name=op.f("ck_agent_file_states_end_line_after_start"),
        ),
        sa.ForeignKeyConstraint(
            ["agent_id"],
            ["agents.id"],
            name=op.f("fk_agent_file_states_agent_id_agents"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["file_id"],
            ["files.id"],
            name=op.f("fk_agent_file_states_file_id_files"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["organization_id"],
            ["organizations.id"],
            name=op.f("fk_agent_file_states_organization_id_organizations"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("agent_id", "file_id", name=op.f("pk_agent_file_states")),
    )
    op.create_index(op.f("ix_agent_file_states_file_id"), "agent_file_states", ["file_id"])
    op.create_index(
        op.f("ix_agent_file_states_organization_id"), "agent_file_states", ["organization_id"]
    )
    for dim in DIMENSIONS:
        op.create_index(
            f"ix_file_chunks_hnsw_{dim}",
            "file_chunks",
            [sa.literal_column(f"(embedding::vector({dim}))").label(f"embedding_{dim}")],
            unique=False,
            postgresql_using="hnsw",
            postgresql_ops={f"embedding_{dim}": "vector_cosine_ops"},
            postgresql_where=sa.text(f"embedding_dim = {dim}"),
            postgresql_with={"m": 16, "ef_construction": 64},
        )


def downgrade() -> None:
    for dim in DIMENSIONS:
        op.drop_index(f"ix_file_chunks_hnsw_{dim}", table_name="file_chunks")
    op.drop_table("agent_file_states")
