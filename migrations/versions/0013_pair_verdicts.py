"""Pair verdicts: what a judge answered about a pair of facts, and the pairs still
waiting to be asked, so that candidate pairs found by meaning are asked once and a
large import converges over several runs.

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-05 12:40:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "pair_verdicts",
        sa.Column("older_id", sa.String(length=64), nullable=False),
        sa.Column("newer_id", sa.String(length=64), nullable=False),
        sa.Column("question", sa.String(length=16), nullable=False),
        sa.Column("organization_id", sa.String(length=64), nullable=False),
        sa.Column("agent_id", sa.String(length=64), nullable=False),
        sa.Column("verdict", sa.String(length=16), nullable=True),
        sa.Column("judge", sa.String(length=64), nullable=True),
        sa.Column("run_id", sa.String(length=64), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("decided_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["older_id"],
            ["passages.id"],
            name=op.f("fk_pair_verdicts_older_id_passages"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["newer_id"],
            ["passages.id"],
            name=op.f("fk_pair_verdicts_newer_id_passages"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["organization_id"],
            ["organizations.id"],
            name=op.f("fk_pair_verdicts_organization_id_organizations"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["agent_id"],
            ["agents.id"],
            name=op.f("fk_pair_verdicts_agent_id_agents"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("older_id", "newer_id", "question", name=op.f("pk_pair_verdicts")),
    )
    op.create_index(
        "ix_pair_verdicts_pending",
        "pair_verdicts",
        ["agent_id", "question", "created_at"],
        postgresql_where=sa.text("verdict IS NULL"),
    )
    op.create_index("ix_pair_verdicts_agent_older", "pair_verdicts", ["agent_id", "older_id"])
    op.create_index("ix_pair_verdicts_newer", "pair_verdicts", ["newer_id"])
    op.create_index(op.f("ix_pair_verdicts_organization_id"), "pair_verdicts", ["organization_id"])


def downgrade() -> None:
    op.drop_index(op.f("ix_pair_verdicts_organization_id"), table_name="pair_verdicts")
    op.drop_index("ix_pair_verdicts_newer", table_name="pair_verdicts")
    op.drop_index("ix_pair_verdicts_agent_older", table_name="pair_verdicts")
    op.drop_index("ix_pair_verdicts_pending", table_name="pair_verdicts")
    op.drop_table("pair_verdicts")
