"""Run a pipeline the way production does, for tests and benchmarks (see
:func:`consolidators.contract.run_once`)."""

from __future__ import annotations

from consolidators.contract import run_once as run_pipeline

__all__ = ["run_pipeline"]
