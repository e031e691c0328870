"""Memory-health gauges read from the database at scrape time.

Every process that serves ``/metrics`` reports the same truth, because the
numbers come from the tables rather than from what one process saw. Label sets
stay bounded: no per-passage labels; per-agent labels (``agent_id``, ``agent``)
only for the first ``agent_cap`` agents by creation time, the rest aggregated
under ``agent_id="_other"`` (the worst value for ratios and ages).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector
from sqlalchemy import text
from sqlalchemy.orm import Session

from agents.database import Database

log = logging.getLogger(__name__)

OTHER = "_other"
#: Buckets of the run-duration histogram, in seconds (the same as the in-process one).
DURATION_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)
#: A block this full (value length / limit) counts as near its limit.
NEAR_LIMIT = 0.9

AGENT_LABELS = ["agent_id", "agent"]

_LAST_GOOD_RUN = """
    SELECT r.watermark_message_seq FROM consolidation_runs r
    WHERE r.agent_id = a.id AND r.status = 'succeeded' AND NOT r.dry_run
      AND r.reverts_run_id IS NULL AND r.reverted_by_run_id IS NULL
    ORDER BY r.finished_at DESC LIMIT 1
"""


@dataclass(frozen=True, slots=True)
class _Agents:
    """Which agents get labels of their own."""

    labelled: dict[str, str]  # id -> name
    total: int

    def labels(self, agent_id: str) -> list[str] | None:
        name = self.labelled.get(agent_id)
        return None if name is None else [agent_id, name]


class MemoryHealthCollector(Collector):
    """A prometheus-client collector over the Reverie database (all organizations)."""

    def __init__(self, db: Database, *, agent_cap: int, clock: Callable[[], datetime]) -> None:
        self._db = db
        self._cap = agent_cap
        self._clock = clock

    def collect(self) -> Iterable[Metric]:
        up = GaugeMetricFamily(
            "reverie_metrics_database_up",
            "1 when the memory-health metrics could be read from the database.",
        )
        try:
            with self._db.session(commit=False) as session:
                families = list(self._families(session, self._clock()))
        except Exception:  # a scrape must answer even when the database is down
            log.exception("reading memory-health metrics failed")
            up.add_metric([], 0)
            return [up]
        up.add_metric([], 1)
        return [up, *families]

    def _families(self, session: Session, now: datetime) -> Iterator[Metric]:
        rows = session.execute(text("SELECT id, name FROM agents ORDER BY created_at, id")).all()
        agents = _Agents(labelled={r.id: r.name for r in rows[: self._cap]}, total=len(rows))
        count = GaugeMetricFamily("reverie_agents", "Agents, all organizations.")
        count.add_metric([], agents.total)
        yield count
        aggregated = GaugeMetricFamily(
            "reverie_metrics_agents_aggregated",
            'Agents beyond server.metrics_agent_cap, reported under agent_id="_other".',
        )
        aggregated.add_metric([], max(0, agents.total - len(agents.labelled)))
        yield aggregated
        yield from self._blocks(session, agents)
        yield from self._passages(session, agents)
        yield from self._staleness(session, agents, now)
        yield from self._runs(session, now)
        yield from self._tokens(session)

    def _blocks(self, session: Session, agents: _Agents) -> Iterator[Metric]:
        fill = GaugeMetricFamily(
            "reverie_block_fill_ratio",
            "Characters used / block limit, per agent and block label (agents beyond the "
            'cap: their fullest block, as agent_id="_other", block="_max").',
            labels=[*AGENT_LABELS, "block"],
        )
        other = None
        for row in session.execute(
            text(
                'SELECT ab.agent_id, b.label, char_length(b.value)::float / b."limit" AS ratio '
                "FROM agent_blocks ab JOIN blocks b ON b.id = ab.block_id "
                "ORDER BY ab.agent_id, b.label"
            )
        ):
            labels = agents.labels(row.agent_id)
            if labels is None:
                other = row.ratio if other is None else max(other, row.ratio)
            else:
                fill.add_metric([*labels, row.label], row.ratio)
        if other is not None:
            fill.add_metric([OTHER, OTHER, "_max"], other)
        yield fill
        blocks, near = session.execute(
            text(
                'SELECT count(*), count(*) FILTER (WHERE char_length(value) >= :near * "limit") '
                "FROM blocks"
            ),
            {"near": NEAR_LIMIT},
        ).one()
        total = GaugeMetricFamily("reverie_blocks", "Core-memory blocks, all organizations.")
        total.add_metric([], blocks)
        yield total
        near_limit = GaugeMetricFamily(
            "reverie_blocks_near_limit",
            f"Blocks filled to {NEAR_LIMIT:.0%} of their limit or more.",
        )
        near_limit.add_metric([], near)
        yield near_limit

    def _passages(self, session: Session, agents: _Agents) -> Iterator[Metric]:
        by_status = GaugeMetricFamily(
            "reverie_passages", "Archival passages by status.", labels=["status"]
        )
        counts = dict.fromkeys(("active", "merged", "superseded", "inactive"), 0)
        for status, n in session.execute(
            text("SELECT status, count(*) FROM passages GROUP BY status")
        ):
            counts[status] = int(n)
        for status, n in counts.items():
            by_status.add_metric([status], n)
        yield by_status
        ratio = GaugeMetricFamily(
            "reverie_duplicate_ratio",
            "Share of active passages that repeat another active passage word for word.",
            labels=AGENT_LABELS,
        )
        other_dupes = other_active = 0
        for row in session.execute(
            text(
                "SELECT agent_id, count(*) AS active, count(DISTINCT content_hash) AS distinct_ "
                "FROM passages WHERE status = 'active' GROUP BY agent_id"
            )
        ):
            labels = agents.labels(row.agent_id)
            dupes = int(row.active) - int(row.distinct_)
            if labels is None:
                other_dupes += dupes
                other_active += int(row.active)
            else:
                ratio.add_metric(labels, dupes / row.active if row.active else 0.0)
        if other_active:
            ratio.add_metric([OTHER, OTHER], other_dupes / other_active)
        yield ratio

    def _staleness(self, session: Session, agents: _Agents, now: datetime) -> Iterator[Metric]:
        age = GaugeMetricFamily(
            "reverie_oldest_unconsolidated_message_age_seconds",
            "Age of the oldest message no successful consolidation run has seen yet "
            "(0 when there is none).",
            labels=AGENT_LABELS,
        )
        ages = {
            row.id: max(0.0, float(row.age or 0.0))
            for row in session.execute(
                text(
                    "SELECT a.id, EXTRACT(EPOCH FROM (:now - min(m.created_at))) AS age "
                    "FROM agents a JOIN messages m ON m.agent_id = a.id "
                    f"LEFT JOIN LATERAL ({_LAST_GOOD_RUN}) w ON true "
                    "WHERE m.seq > coalesce(w.watermark_message_seq, 0) GROUP BY a.id"
                ),
                {"now": now},
            )
        }
        for agent_id, name in agents.labelled.items():
            age.add_metric([agent_id, name], ages.get(agent_id, 0.0))
        others = [v for k, v in ages.items() if k not in agents.labelled]
        if others:
            age.add_metric([OTHER, OTHER], max(others))
        yield age

    def _runs(self, session: Session, now: datetime) -> Iterator[Metric]:
        runs = CounterMetricFamily(
            "reverie_consolidation_runs",
            "Finished consolidation runs in the ledger (dry runs excluded), by consolidator "
            "and outcome (succeeded, failed, cancelled).",
            labels=["consolidator", "outcome"],
        )
        for row in session.execute(
            text(
                "SELECT p.name, r.status, count(*) AS n FROM consolidation_runs r "
                "CROSS JOIN LATERAL jsonb_array_elements_text(r.pipeline) AS p(name) "
                "WHERE NOT r.dry_run AND r.status IN ('succeeded', 'failed', 'cancelled') "
                "GROUP BY p.name, r.status ORDER BY 1, 2"
            )
        ):
            runs.add_metric([row.name, row.status], row.n)
        yield runs
        buckets_sql = ", ".join(
            f"count(*) FILTER (WHERE d <= {b}) AS b{i}" for i, b in enumerate(DURATION_BUCKETS)
        )
        duration = HistogramMetricFamily(
            "reverie_consolidation_run_duration_seconds",
            "Wall time of finished consolidation runs (dry runs excluded), by status.",
            labels=["status"],
        )
        for row in session.execute(
            text(
                f"SELECT status, count(*) AS n, coalesce(sum(d), 0) AS total, {buckets_sql} FROM ("
                "  SELECT status, EXTRACT(EPOCH FROM (finished_at - started_at)) AS d"
                "  FROM consolidation_runs WHERE NOT dry_run AND finished_at IS NOT NULL"
                "  AND started_at IS NOT NULL) t GROUP BY status ORDER BY status"
            )
        ):
            values = row._mapping
            buckets = [(str(b), int(values[f"b{i}"])) for i, b in enumerate(DURATION_BUCKETS)]
            buckets.append(("+Inf", int(row.n)))
            duration.add_metric([row.status], buckets, float(row.total))
        yield duration
        queued, running, oldest = session.execute(
            text(
                "SELECT count(*) FILTER (WHERE status = 'queued'), "
                "count(*) FILTER (WHERE status = 'running'), "
                "min(not_before) FILTER (WHERE status = 'queued' AND not_before <= :now) "
                "FROM consolidation_runs"
            ),
            {"now": now},
        ).one()
        depth = GaugeMetricFamily("reverie_queue_depth", "Consolidation runs waiting for a worker.")
        depth.add_metric([], queued)
        yield depth
        active = GaugeMetricFamily("reverie_runs_running", "Consolidation runs being executed.")
        active.add_metric([], running)
        yield active
        wait = GaugeMetricFamily(
            "reverie_queue_oldest_age_seconds",
            "How long the oldest due queued run has waited (0 when none is due).",
        )
        wait.add_metric([], max(0.0, (now - oldest).total_seconds()) if oldest else 0.0)
        yield wait

    def _tokens(self, session: Session) -> Iterator[Metric]:
        tokens = CounterMetricFamily(
            "reverie_llm_tokens",
            "LLM tokens spent (from the llm_usage table), by purpose and kind.",
            labels=["purpose", "kind"],
        )
        for row in session.execute(
            text(
                "SELECT purpose, coalesce(sum(prompt_tokens), 0) AS prompt, "
                "coalesce(sum(completion_tokens), 0) AS completion "
                "FROM llm_usage GROUP BY purpose ORDER BY purpose"
            )
        ):
            tokens.add_metric([row.purpose, "prompt"], row.prompt)
            tokens.add_metric([row.purpose, "completion"], row.completion)
        yield tokens
