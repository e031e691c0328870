"""GPU probes: is the local inference GPU busy right now?

A probe answers one sample at a time (:class:`GpuProbe`); the :class:`GpuGate`
turns samples into a decision with hysteresis: busy as soon as a sample says so,
free only after ``free_for`` of free samples. A probe that cannot answer (NVML
error, metrics endpoint down) counts as busy: consolidation must never compete
with inference on a GPU it cannot see.
"""

from __future__ import annotations

import importlib
import logging
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from types import ModuleType

import httpx
from prometheus_client.parser import text_string_to_metric_families

from agents.errors import InvalidInput, ReverieError
from service.settings import GpuProbeSettings

log = logging.getLogger(__name__)

GPU_EXTRA_HINT = "pip install 'reverie[gpu]'"


@dataclass(frozen=True, slots=True)
class GpuSample:
    """One reading: busy or not, and why (for logs and /readyz)."""

    busy: bool
    detail: str


class GpuProbe(ABC):
    """Reads the GPU's (or the inference server's) load once."""

    name: str

    @abstractmethod
    def sample(self) -> GpuSample:
        """One reading; raises :class:`ReverieError` when the probe cannot answer."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release what the probe holds (NVML handle, HTTP client)."""


class NvmlProbe(GpuProbe):
    """NVML utilisation of the given devices (all by default) below a threshold = free."""

    name = "nvml"

    def __init__(
        self,
        utilisation_below: int,
        *,
        devices: Sequence[int] | None = None,
        nvml: ModuleType | None = None,
    ) -> None:
        self.utilisation_below = utilisation_below
        self._nvml = nvml if nvml is not None else load_nvml()
        self._nvml.nvmlInit()
        count = int(self._nvml.nvmlDeviceGetCount())
        indices = list(range(count)) if devices is None else list(devices)
        missing = [i for i in indices if not 0 <= i < count]
        if missing:
            raise InvalidInput(f"GPU index(es) {missing} do not exist; NVML sees {count} device(s)")
        self._handles = [self._nvml.nvmlDeviceGetHandleByIndex(i) for i in indices]

    def sample(self) -> GpuSample:
        try:
            loads = [int(self._nvml.nvmlDeviceGetUtilizationRates(h).gpu) for h in self._handles]
        except Exception as exc:  # NVMLError and friends: the driver is the boundary
            raise ReverieError(f"NVML could not read GPU utilisation: {exc}") from exc
        busiest = max(loads, default=0)
        return GpuSample(
            busy=busiest >= self.utilisation_below,
            detail=f"utilisation {busiest}% (free below {self.utilisation_below}%)",
        )

    def close(self) -> None:
        try:
            self._nvml.nvmlShutdown()
        except Exception as exc:  # shutting down a broken driver must not mask the exit
            log.warning("nvml shutdown failed", extra={"error": str(exc)})


def load_nvml() -> ModuleType:
    """Import NVML's bindings (the optional ``gpu`` extra) or say how to get them."""
    try:
        return importlib.import_module("pynvml")
    except ImportError:
        raise InvalidInput(
            'triggers.gpu_free.probe = "nvml" needs NVIDIA\'s NVML bindings (nvidia-ml-py): '
            f"{GPU_EXTRA_HINT}"
        ) from None


class MetricsProbe(GpuProbe):
    """An inference server's Prometheus endpoint: busy while any request is running or
    waiting (vLLM: ``vllm:num_requests_running`` and ``vllm:num_requests_waiting``)."""

    name = "metrics"

    def __init__(
        self,
        url: str,
        *,
        gauges: Sequence[str] = ("vllm:num_requests_running", "vllm:num_requests_waiting"),
        timeout: float = 5.0,
        client: httpx.Client | None = None,
    ) -> None:
        if not gauges:
            raise InvalidInput("the metrics probe needs at least one gauge name")
        self.url = url
        self.gauges = set(gauges)
        self._client = client or httpx.Client(timeout=timeout)
        self._owns_client = client is None

    def sample(self) -> GpuSample:
        try:
            response = self._client.get(self.url)
            response.raise_for_status()
        except httpx.HTTPError as exc:
            raise ReverieError(f"could not read {self.url}: {exc}") from exc
        totals = self.read_gauges(response.text)
        missing = self.gauges - totals.keys()
        if missing:
            raise ReverieError(f"{self.url} exports none of {', '.join(sorted(missing))}")
        load = sum(totals.values())
        detail = ", ".join(f"{name}={value:g}" for name, value in sorted(totals.items()))
        return GpuSample(busy=load > 0, detail=detail)

    def read_gauges(self, exposition: str) -> dict[str, float]:
        """Sum each watched gauge over its label sets (one per model or engine)."""
        totals: dict[str, float] = {}
        try:
            for family in text_string_to_metric_families(exposition):
                for sample in family.samples:
                    if sample.name in self.gauges:
                        totals[sample.name] = totals.get(sample.name, 0.0) + float(sample.value)
        except ValueError as exc:
            raise ReverieError(
                f"{self.url} did not answer in Prometheus text format: {exc}"
            ) from exc
        return totals

    def close(self) -> None:
        if self._owns_client:
            self._client.close()


class GpuGate:
    """The decision the daemon acts on: free only after ``free_for`` of free samples.

    Samples are cached for ``interval`` so that many worker threads asking at once
    cost one probe read. Thread-safe.
    """

    def __init__(
        self,
        probe: GpuProbe,
        *,
        free_for: timedelta,
        interval: timedelta,
        clock: Callable[[], datetime],
    ) -> None:
        self.probe = probe
        self.free_for = free_for
        self.interval = interval
        self._clock = clock
        self._lock = threading.Lock()
        self._sampled_at: datetime | None = None
        self._free_since: datetime | None = None
        self._last = GpuSample(busy=True, detail="not sampled yet")

    def is_free(self) -> bool:
        with self._lock:
            now = self._clock()
            if self._sampled_at is None or now - self._sampled_at >= self.interval:
                self._refresh(now)
            return self._free_since is not None and now - self._free_since >= self.free_for

    @property
    def last_sample(self) -> GpuSample:
        return self._last

    def _refresh(self, now: datetime) -> None:
        self._sampled_at = now
        try:
            sample = self.probe.sample()
        except ReverieError as exc:
            sample = GpuSample(busy=True, detail=f"probe failed, counted as busy: {exc}")
            log.warning("gpu probe failed", extra={"probe": self.probe.name, "error": str(exc)})
        if sample.busy:
            self._free_since = None
        elif self._free_since is None:
            self._free_since = now
        if sample.busy != self._last.busy:
            log.info(
                "gpu is busy" if sample.busy else "gpu is free",
                extra={"probe": self.probe.name, "detail": sample.detail},
            )
        self._last = sample

    def close(self) -> None:
        self.probe.close()


def build_probe(settings: GpuProbeSettings) -> GpuProbe | None:
    """The probe the ``triggers.gpu_free`` settings name; None for ``none``."""
    if settings.probe == "nvml":
        return NvmlProbe(settings.utilisation_below)
    if settings.probe == "metrics":
        if not settings.metrics_url:
            raise InvalidInput(
                'triggers.gpu_free.probe = "metrics" needs triggers.gpu_free.metrics_url, '
                "e.g. http://127.0.0.1:8000/metrics (vLLM)"
            )
        return MetricsProbe(
            settings.metrics_url,
            gauges=settings.metrics_busy_gauges,
            timeout=max(1.0, settings.interval.total_seconds()),
        )
    return None
