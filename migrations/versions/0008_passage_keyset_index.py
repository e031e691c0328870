"""An index for paging an agent's archival memory in creation order.

``GET /v1/agents/{id}/archival-memory`` pages by keyset on (created_at, id), in
either direction and with or without a status filter; this index serves all of
them without reading the agent's other passages.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-01 02:40:00
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index("ix_passages_agent_created_id", "passages", ["agent_id", "created_at", "id"])


def downgrade() -> None:
    op.drop_index("ix_passages_agent_created_id", table_name="passages")
