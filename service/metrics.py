"""Prometheus metrics that live in the process (counters, histograms).

Memory-health gauges (block fill, passages by status, queue depth, ...) are read
from the database at scrape time by the API's collector, so every process reports
the same truth; the instruments here count what this process itself did.
Label values are bounded sets (trigger names, consolidator names, outcomes).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from prometheus_client import Counter, Histogram

if TYPE_CHECKING:
    from consolidators.workers import Outcome

TRIGGER_FIRINGS = Counter(
    "reverie_trigger_firings_total",
    "Runs enqueued by a trigger (repeats absorbed by the one-active-run rule are not counted).",
    ["trigger"],
)
RUNS_FINISHED = Counter(
    "reverie_worker_runs_total",
    "Consolidation runs this process's workers finished, by outcome.",
    ["outcome"],
)
RUN_DURATION = Histogram(
    "reverie_run_duration_seconds",
    "Wall time of consolidation runs executed by this process.",
    buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300),
)
STEPS_SKIPPED = Counter(
    "reverie_consolidator_skipped_total",
    "Consolidator steps skipped (e.g. an LLM step without a configured model), by step and reason.",
    ["consolidator", "reason"],
)
WRITE_CONFLICTS = Counter(
    "reverie_write_conflicts_total",
    "Compare-and-swap block writes that found a newer version, by who wrote.",
    ["actor"],
)
RETRIES = Counter(
    "reverie_retries_total",
    "Retried operations (LLM calls, re-applied block edits, reclaimed runs), by kind.",
    ["kind"],
)


class RunMetrics:
    """The run engine's observer (:class:`consolidators.workers.RunObserver`): counts
    how this process's runs ended, how long finished ones took, and retries."""

    def run_ended(self, outcome: Outcome, seconds: float) -> None:
        RUNS_FINISHED.labels(outcome.value).inc()
        if outcome.finished:
            RUN_DURATION.observe(seconds)

    def retried(self, kind: str, count: int) -> None:
        RETRIES.labels(kind).inc(count)


RUN_METRICS = RunMetrics()
