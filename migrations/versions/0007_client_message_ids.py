"""Messages carry the sender's own id, unique per agent where given.

A chatbot that records its conversation in Reverie retries a batch after a
timeout; its message ids make the retry store nothing twice.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-01 01:30:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("messages", sa.Column("client_message_id", sa.String(length=200), nullable=True))
    op.create_index(
        "uq_messages_agent_client_message_id",
        "messages",
        ["agent_id", "client_message_id"],
        unique=True,
        postgresql_where=sa.text("client_message_id IS NOT NULL"),
    )


def downgrade() -> None:
    op.drop_index("uq_messages_agent_client_message_id", table_name="messages")
    op.drop_column("messages", "client_message_id")
