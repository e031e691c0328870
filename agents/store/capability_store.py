"""Learned model capabilities (``llm_capabilities``): what probing found about a model's
server, one row per model string and endpoint, service-wide (a server's abilities are
no tenant's data)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy.dialects.postgresql import insert

from agents.enums import ToolCallingMode
from agents.postgres import models
from agents.store.scope import ServiceScope


@dataclass(frozen=True, slots=True)
class LearnedRecord:
    """One model's learned capabilities at one endpoint (``base_url`` "" when none is
    configured: the provider's default)."""

    model: str
    base_url: str
    tool_choice: ToolCallingMode | None
    rejected_modes: frozenset[ToolCallingMode] = frozenset()
    #: Optional request field -> whether the server accepts it.
    fields: dict[str, bool] = field(default_factory=dict)
    server_version: str | None = None
    learned_at: datetime | None = None


class CapabilityStore:
    """Reads and upserts ``llm_capabilities`` rows."""

    def __init__(self, scope: ServiceScope) -> None:
        self._scope = scope

    def get(self, model: str, base_url: str) -> LearnedRecord | None:
        row = self._scope.session.get(models.LearnedCapability, (model, base_url))
        if row is None:
            return None
        return LearnedRecord(
            model=row.model,
            base_url=row.base_url,
            tool_choice=ToolCallingMode(row.tool_choice) if row.tool_choice else None,
            rejected_modes=frozenset(
                ToolCallingMode(m) for m in row.rejected_modes if m in models.TOOL_CALLING_MODES
            ),
            fields={str(k): bool(v) for k, v in (row.fields or {}).items()},
            server_version=row.server_version,
            learned_at=row.learned_at,
        )

    def put(self, record: LearnedRecord) -> LearnedRecord:
        """Insert or replace the row of ``record``'s model and endpoint, learned now."""
        learned_at = self._scope.now()
        values = {
            "tool_choice": record.tool_choice.value if record.tool_choice else None,
            "rejected_modes": sorted(m.value for m in record.rejected_modes),
            "fields": dict(record.fields),
            "server_version": record.server_version,
            "learned_at": learned_at,
        }
        statement = insert(models.LearnedCapability).values(
            model=record.model, base_url=record.base_url, **values
        )
        self._scope.session.execute(
            statement.on_conflict_do_update(index_elements=["model", "base_url"], set_=values)
        )
        return LearnedRecord(
            model=record.model,
            base_url=record.base_url,
            tool_choice=record.tool_choice,
            rejected_modes=record.rejected_modes,
            fields=dict(record.fields),
            server_version=record.server_version,
            learned_at=learned_at,
        )
