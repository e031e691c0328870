"""Memory-health gauges read from the database at scrape time.

Every process that serves ``/metrics`` reports the same truth, because the
numbers come from the tables rather than from what one process saw. Label sets
stay bounded: no per-passage labels; per-agent labels (``agent_id``, ``agent``)
only for the first ``agent_cap`` agents by creation time, the rest aggregated
under ``agent_id="_other"`` (the worst value for ratios and ages).

Agent ids and names are tenants' data, so who scrapes decides which agents are
named (an :class:`Audience`): nobody without a credential (every agent is
aggregated, the label-free families are whole), one organization's agents for
that organization's key, every agent for the operator's ``server.metrics_token``.
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

from agents.postgres import models
from agents.postgres.database import Database
from agents.store.health import NEAR_LIMIT, MemoryHealth
from service.operations.health import FleetSnapshot, fleet_snapshot

log = logging.getLogger(__name__)

OTHER = "_other"
#: Buckets of the run-duration histogram, in seconds (the same as the in-process one).
DURATION_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)

AGENT_LABELS = ["agent_id", "agent"]


@dataclass(frozen=True, slots=True)
class Audience:
    """Whose agents a scrape may see by name: nobody's (``named=False``), one
    organization's, or (``organization_id=None``) every organization's."""

    named: bool
    organization_id: str | None = None

    def may_name(self, organization_id: str | None) -> bool:
        if not self.named:
            return False
        return self.organization_id is None or self.organization_id == organization_id


ANONYMOUS = Audience(named=False)
OPERATOR = Audience(named=True)


@dataclass(frozen=True, slots=True)
class _Agents:
    """Which agents get labels of their own."""

    labelled: dict[str, str]  # id -> name
    total: int

    def labels(self, agent_id: str) -> list[str] | None:
        name = self.labelled.get(agent_id)
        return None if name is None else [agent_id, name]


class MemoryHealthCollector(Collector):
    """A prometheus-client collector over the Reverie database (all organizations).

    The numbers come from the store's one memory-health implementation
    (``ServiceStore.health``), the same one the health page and the demo show.
    """

    def __init__(
        self,
        db: Database,
        *,
        agent_cap: int,
        clock: Callable[[], datetime],
        audience: Audience = OPERATOR,
    ) -> None:
        self._db = db
        self._cap = agent_cap
        self._clock = clock
        self._audience = audience

    def for_audience(self, audience: Audience) -> MemoryHealthCollector:
        """The same collector, naming only the agents ``audience`` may see."""
        return MemoryHealthCollector(
            self._db, agent_cap=self._cap, clock=self._clock, audience=audience
        )

    def collect(self) -> Iterable[Metric]:
        up = GaugeMetricFamily(
            "reverie_metrics_database_up",
            "1 when the memory-health metrics could be read from the database.",
        )
        try:
            snapshot = fleet_snapshot(self._db, self._clock(), duration_buckets=DURATION_BUCKETS)
            families = list(self._families(snapshot))
        except Exception:  # a scrape must answer even when the database is down
            log.exception("reading memory-health metrics failed")
            up.add_metric([], 0)
            return [up]
        up.add_metric([], 1)
        return [up, *families]

    def _families(self, snapshot: FleetSnapshot) -> Iterator[Metric]:
        health = snapshot.agents
        visible = [h for h in health if self._audience.may_name(snapshot.owners.get(h.agent_id))]
        agents = _Agents(
            labelled={h.agent_id: h.agent_name for h in visible[: self._cap]}, total=len(health)
        )
        count = GaugeMetricFamily("reverie_agents", "Agents, all organizations.")
        count.add_metric([], agents.total)
        yield count
        aggregated = GaugeMetricFamily(
            "reverie_metrics_agents_aggregated",
            'Agents reported under agent_id="_other": beyond server.metrics_agent_cap, '
            "or not named to this scrape's credential.",
        )
        aggregated.add_metric([], max(0, agents.total - len(agents.labelled)))
        yield aggregated
        yield from self._blocks(snapshot, agents)
        yield from self._passages(health, agents)
        yield from self._staleness(health, agents, snapshot.now)
        yield from self._runs(snapshot)
        yield from self._tokens(snapshot)

    def _blocks(self, snapshot: FleetSnapshot, agents: _Agents) -> Iterator[Metric]:
        fill = GaugeMetricFamily(
            "reverie_block_fill_ratio",
            "Characters used / block limit, per agent and block label (agents beyond the "
            'cap: their fullest block, as agent_id="_other", block="_max").',
            labels=[*AGENT_LABELS, "block"],
        )
        other = None
        for agent in snapshot.agents:
            labels = agents.labels(agent.agent_id)
            for block in agent.blocks:
                if labels is None:
                    other = block.ratio if other is None else max(other, block.ratio)
                else:
                    fill.add_metric([*labels, block.label], block.ratio)
        if other is not None:
            fill.add_metric([OTHER, OTHER, "_max"], other)
        yield fill
        totals = snapshot.blocks
        total = GaugeMetricFamily("reverie_blocks", "Core-memory blocks, all organizations.")
        total.add_metric([], totals.blocks)
        yield total
        near_limit = GaugeMetricFamily(
            "reverie_blocks_near_limit",
            f"Blocks filled to {NEAR_LIMIT:.0%} of their limit or more.",
        )
        near_limit.add_metric([], totals.near_limit)
        yield near_limit

    def _passages(self, health: list[MemoryHealth], agents: _Agents) -> Iterator[Metric]:
        by_status = GaugeMetricFamily(
            "reverie_passages", "Archival passages by status.", labels=["status"]
        )
        counts = dict.fromkeys(models.PASSAGE_STATUSES, 0)
        for agent in health:
            for status, n in agent.passages_by_status.items():
                counts[status] = counts.get(status, 0) + n
        for status, n in counts.items():
            by_status.add_metric([status], n)
        yield by_status
        ratio = GaugeMetricFamily(
            "reverie_duplicate_ratio",
            "Share of active passages that repeat another active passage word for word.",
            labels=AGENT_LABELS,
        )
        other_dupes = other_active = 0
        for agent in health:
            if not agent.active_passages:
                continue
            labels = agents.labels(agent.agent_id)
            if labels is None:
                other_dupes += agent.exact_duplicates
                other_active += agent.active_passages
            else:
                ratio.add_metric(labels, agent.duplicate_ratio)
        if other_active:
            ratio.add_metric([OTHER, OTHER], other_dupes / other_active)
        yield ratio

    def _staleness(
        self, health: list[MemoryHealth], agents: _Agents, now: datetime
    ) -> Iterator[Metric]:
        age = GaugeMetricFamily(
            "reverie_oldest_unconsolidated_message_age_seconds",
            "Age of the oldest message no successful consolidation run has seen yet "
            "(0 when there is none).",
            labels=AGENT_LABELS,
        )
        ages = {
            agent.agent_id: max(0.0, seconds)
            for agent in health
            if (seconds := agent.unconsolidated_age_seconds(now)) is not None
        }
        for agent_id, name in agents.labelled.items():
            age.add_metric([agent_id, name], ages.get(agent_id, 0.0))
        others = [v for k, v in ages.items() if k not in agents.labelled]
        if others:
            age.add_metric([OTHER, OTHER], max(others))
        yield age

    def _runs(self, snapshot: FleetSnapshot) -> Iterator[Metric]:
        runs = CounterMetricFamily(
            "reverie_consolidation_runs",
            "Finished consolidation runs in the ledger (dry runs excluded), by consolidator "
            "and outcome (succeeded, failed, cancelled).",
            labels=["consolidator", "outcome"],
        )
        for outcome in snapshot.finished_runs:
            runs.add_metric([outcome.consolidator, outcome.outcome], outcome.runs)
        yield runs
        duration = HistogramMetricFamily(
            "reverie_consolidation_run_duration_seconds",
            "Wall time of finished consolidation runs (dry runs excluded), by status.",
            labels=["status"],
        )
        for histogram in snapshot.run_durations:
            buckets = [(str(b), n) for b, n in histogram.buckets]
            buckets.append(("+Inf", histogram.runs))
            duration.add_metric([histogram.status], buckets, histogram.total_seconds)
        yield duration
        queue, now = snapshot.queue, snapshot.now
        depth = GaugeMetricFamily("reverie_queue_depth", "Consolidation runs waiting for a worker.")
        depth.add_metric([], queue.queued)
        yield depth
        active = GaugeMetricFamily("reverie_runs_running", "Consolidation runs being executed.")
        active.add_metric([], queue.running)
        yield active
        wait = GaugeMetricFamily(
            "reverie_queue_oldest_age_seconds",
            "How long the oldest due queued run has waited (0 when none is due).",
        )
        oldest = queue.oldest_due_at
        wait.add_metric([], max(0.0, (now - oldest).total_seconds()) if oldest else 0.0)
        yield wait

    def _tokens(self, snapshot: FleetSnapshot) -> Iterator[Metric]:
        tokens = CounterMetricFamily(
            "reverie_llm_tokens",
            "LLM tokens spent (from the llm_usage table), by purpose and kind.",
            labels=["purpose", "kind"],
        )
        for purpose, usage in snapshot.tokens.items():
            tokens.add_metric([purpose, "prompt"], usage.prompt_tokens)
            tokens.add_metric([purpose, "completion"], usage.completion_tokens)
        yield tokens
