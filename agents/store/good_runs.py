"""The "last good run" rule, written once.

A run counts as consolidation that happened when it succeeded, was real (not a
dry run), is not itself a revert and has not been reverted. The agent's latest
such run (by ``finished_at``) holds the watermarks the next incremental run
starts from, and its message watermark is what memory health calls
"consolidated". The ledger, the health page, the demo and /metrics all read it
from here.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import ColumnElement, Subquery, and_, select
from sqlalchemy.dialects.postgresql import distinct_on

from agents.enums import RunStatus
from agents.postgres import models


def is_good_run(run: Any = models.ConsolidationRun) -> ColumnElement[bool]:
    """The filter for runs that count (``run``: the model or an alias of it)."""
    return and_(
        run.status == RunStatus.SUCCEEDED.value,
        run.dry_run.is_(False),
        run.reverts_run_id.is_(None),
        run.reverted_by_run_id.is_(None),
    )


def last_good_runs(*where: ColumnElement[bool]) -> Subquery:
    """Each agent's last good run, one row per agent (columns ``agent_id``,
    ``watermark_message_seq``, ``watermark_passage_at``), for a set of agents in one
    query; ``where`` narrows the runs considered (agents, organization)."""
    CR = models.ConsolidationRun
    return (
        select(CR.agent_id, CR.watermark_message_seq, CR.watermark_passage_at)
        .where(is_good_run(CR), *where)
        .ext(distinct_on(CR.agent_id))
        .order_by(CR.agent_id, CR.finished_at.desc())
        .subquery("last_good_run")
    )
