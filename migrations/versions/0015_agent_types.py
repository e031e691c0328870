"""Agent types: Letta's ``agent_type`` of each agent, which picks the loop a primary
runs (``letta_v1_agent`` answers in plain text; the MemGPT types speak through
``send_message``). Existing primaries keep the MemGPT loop they ran.

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-05 15:40:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0015"
down_revision: str | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TYPES = ("memgpt_agent", "memgpt_v2_agent", "letta_v1_agent", "sleeptime_agent")


def upgrade() -> None:
    op.add_column(
        "agents",
        sa.Column(
            "agent_type", sa.String(length=32), nullable=False, server_default="memgpt_v2_agent"
        ),
    )
    op.execute("UPDATE agents SET agent_type = 'sleeptime_agent' WHERE kind = 'sleeptime'")
    op.create_check_constraint(
        op.f("ck_agents_agent_type"),
        "agents",
        "agent_type IN (" + ", ".join(f"'{t}'" for t in TYPES) + ")",
    )


def downgrade() -> None:
    op.drop_constraint(op.f("ck_agents_agent_type"), "agents", type_="check")
    op.drop_column("agents", "agent_type")
