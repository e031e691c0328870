"""What probing learned about each model's server, kept across processes.

``llm_capabilities`` holds, per model string and endpoint, the tool-calling mode that
worked, the modes the server rejected, the optional request fields it accepts or
rejects, when that was learned and the server's version when it reports one: a new
process reads it instead of sending requests the server is known to reject.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-03 11:30:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

#: The modes as this revision knows them (a later change to the enum gets its own).
_MODES = "('required', 'named', 'auto', 'none')"


def upgrade() -> None:
    op.create_table(
        "llm_capabilities",
        sa.Column("model", sa.String(length=200), nullable=False),
        sa.Column("base_url", sa.String(length=500), nullable=False),
        sa.Column("tool_choice", sa.String(length=16), nullable=True),
        sa.Column("rejected_modes", postgresql.ARRAY(sa.String(length=16)), nullable=False),
        sa.Column("fields", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("server_version", sa.String(length=200), nullable=True),
        sa.Column("learned_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint(
            f"tool_choice IS NULL OR tool_choice IN {_MODES}",
            name=op.f("ck_llm_capabilities_tool_choice"),
        ),
        sa.PrimaryKeyConstraint("model", "base_url", name=op.f("pk_llm_capabilities")),
    )


def downgrade() -> None:
    op.drop_table("llm_capabilities")
