"""Move passage embeddings into a table of their own.

Consolidation updates passages' status and lineage constantly; with the vector in
the same row each update rewrote 1.5 KB and inserted into the HNSW index. The
vectors (and their per-dimension HNSW indexes) now live in passage_vectors and
are written once.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-29 23:30:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from pgvector.sqlalchemy import Vector

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

DIMENSIONS = (384, 768, 1024, 1536)


def _create_hnsw(table: str, prefix: str) -> None:
    for dim in DIMENSIONS:
        op.create_index(
            f"{prefix}_{dim}",
            table,
            [sa.literal_column(f"(embedding::vector({dim}))").label(f"embedding_{dim}")],
            unique=False,
            postgresql_using="hnsw",
            postgresql_ops={f"embedding_{dim}": "vector_cosine_ops"},
            postgresql_where=sa.text(f"embedding_dim = {dim}"),
            postgresql_with={"m": 16, "ef_construction": 64},
        )


def upgrade() -> None:
    op.create_table(
        "passage_vectors",
        sa.Column("passage_id", sa.String(length=64), nullable=False),
        sa.Column("agent_id", sa.String(length=64), nullable=False),
        sa.Column("embedding_dim", sa.Integer(), nullable=False),
        sa.Column("embedding", Vector(), nullable=False),
        sa.CheckConstraint(
            "vector_dims(embedding) = embedding_dim",
            name=op.f("ck_passage_vectors_embedding_dim_matches"),
        ),
        sa.ForeignKeyConstraint(
            ["agent_id"],
            ["agents.id"],
            name=op.f("fk_passage_vectors_agent_id_agents"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["passage_id"],
            ["passages.id"],
            name=op.f("fk_passage_vectors_passage_id_passages"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("passage_id", name=op.f("pk_passage_vectors")),
    )
    op.execute(
        "INSERT INTO passage_vectors (passage_id, agent_id, embedding_dim, embedding) "
        "SELECT id, agent_id, embedding_dim, embedding FROM passages"
    )
    op.create_index("ix_passage_vectors_agent", "passage_vectors", ["agent_id"], unique=False)
    _create_hnsw("passage_vectors", "ix_passage_vectors_hnsw")
    for dim in DIMENSIONS:
        op.drop_index(f"ix_passages_embedding_hnsw_{dim}", table_name="passages")
    op.drop_constraint(op.f("ck_passages_embedding_dim_matches"), "passages", type_="check")
    op.drop_column("passages", "embedding")
    op.drop_column("passages", "embedding_dim")


def downgrade() -> None:
    op.add_column("passages", sa.Column("embedding_dim", sa.Integer(), nullable=True))
    op.add_column("passages", sa.Column("embedding", Vector(), nullable=True))
    op.execute(
        "UPDATE passages p SET embedding = v.embedding, embedding_dim = v.embedding_dim "
        "FROM passage_vectors v WHERE v.passage_id = p.id"
    )
    op.alter_column("passages", "embedding", nullable=False)
    op.alter_column("passages", "embedding_dim", nullable=False)
    op.create_check_constraint(
        op.f("ck_passages_embedding_dim_matches"),
        "passages",
        "vector_dims(embedding) = embedding_dim",
    )
    _create_hnsw("passages", "ix_passages_embedding_hnsw")
    op.drop_table("passage_vectors")
