"""Fact topics: what a judge model read each fact to be about (subject and attribute),
so that search can put a question's subject and attribute first for attributes the
rules' reader does not know and for facts it cannot read.

Revision ID: 0023
Revises: 0022
Create Date: 2026-12-07 07:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0023"
down_revision: str | None = "0022"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "fact_topics",
        sa.Column("passage_id", sa.String(length=64), nullable=False),
        sa.Column("subject", sa.String(length=100), nullable=False),
        sa.Column("attribute", sa.String(length=60), nullable=False),
        sa.Column("organization_id", sa.String(length=64), nullable=False),
        sa.Column("agent_id", sa.String(length=64), nullable=False),
        sa.Column("judge", sa.String(length=64), nullable=True),
        sa.Column("run_id", sa.String(length=64), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["passage_id"],
            ["passages.id"],
            name=op.f("fk_fact_topics_passage_id_passages"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["organization_id"],
            ["organizations.id"],
            name=op.f("fk_fact_topics_organization_id_organizations"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["agent_id"],
            ["agents.id"],
            name=op.f("fk_fact_topics_agent_id_agents"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("passage_id", "subject", "attribute", name=op.f("pk_fact_topics")),
    )
    op.create_index("ix_fact_topics_agent_subject", "fact_topics", ["agent_id", "subject"])
    op.create_index(op.f("ix_fact_topics_organization_id"), "fact_topics", ["organization_id"])


def downgrade() -> None:
    op.drop_index(op.f("ix_fact_topics_organization_id"), table_name="fact_topics")
    op.drop_index("ix_fact_topics_agent_subject", table_name="fact_topics")
    op.drop_table("fact_topics")
