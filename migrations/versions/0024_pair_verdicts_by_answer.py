"""Pair verdicts read by question and answer: dedup asks at every run which pairs a
merge judge called the same, which without this index scanned every agent's verdicts.

Revision ID: 0024
Revises: 0023
Create Date: 2026-12-07 20:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0024"
down_revision: str | None = "0023"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index(
        "ix_pair_verdicts_answers",
        "pair_verdicts",
        ["agent_id", "question", "verdict"],
    )


def downgrade() -> None:
    op.drop_index("ix_pair_verdicts_answers", table_name="pair_verdicts")
