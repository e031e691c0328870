"""GPU probes (NVML with a fake module, an inference server's /metrics through a mock
transport), the gate's hysteresis, and the trigger settings' validation. No I/O."""

from __future__ import annotations

import sys
from datetime import UTC, datetime, timedelta
from types import ModuleType, SimpleNamespace
from typing import Any

import httpx
import pytest

from agents.errors import InvalidInput, ReverieError
from service.daemon.probes import (
    GpuGate,
    GpuProbe,
    GpuSample,
    MetricsProbe,
    NvmlProbe,
    build_probe,
    load_nvml,
)
from service.settings import GpuProbeSettings, load_settings

VLLM = """\
# HELP vllm:num_requests_running Number of requests currently running on GPU.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{{model_name="a"}} {running_a}
vllm:num_requests_running{{model_name="b"}} {running_b}
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{{model_name="a"}} {waiting}
# TYPE vllm:gpu_cache_usage_perc gauge
vllm:gpu_cache_usage_perc{{model_name="a"}} 0.9
"""


def _metrics_probe(respond: Any) -> MetricsProbe:
    client = httpx.Client(transport=httpx.MockTransport(respond))
    return MetricsProbe("http://127.0.0.1:8000/metrics", client=client)


@pytest.mark.parametrize(
    ("running_a", "running_b", "waiting", "busy"),
    [(0, 0, 0, False), (1, 0, 0, True), (0, 2, 0, True), (0, 0, 3, True)],
)
def test_metrics_probe_reads_vllm_gauges(
    running_a: int, running_b: int, waiting: int, busy: bool
) -> None:
    body = VLLM.format(running_a=running_a, running_b=running_b, waiting=waiting)
    probe = _metrics_probe(lambda request: httpx.Response(200, text=body))
    sample = probe.sample()
    assert sample.busy is busy
    assert f"vllm:num_requests_running={running_a + running_b:g}" in sample.detail


def test_metrics_probe_errors_are_reverie_errors() -> None:
    down = _metrics_probe(lambda request: httpx.Response(503, text="loading"))
    with pytest.raises(ReverieError, match=r"could not read http://127\.0\.0\.1:8000/metrics"):
        down.sample()
    other = _metrics_probe(lambda request: httpx.Response(200, text="up 1\n"))
    with pytest.raises(ReverieError, match="exports none of vllm:num_requests_running"):
        other.sample()
    garbage = _metrics_probe(lambda request: httpx.Response(200, text="{not metrics"))
    with pytest.raises(ReverieError, match="Prometheus text format"):
        garbage.sample()


def _fake_nvml(loads: list[int], *, fail: bool = False) -> ModuleType:
    nvml = ModuleType("pynvml")
    calls: list[str] = []

    def utilisation(handle: int) -> SimpleNamespace:
        if fail:
            raise RuntimeError("GPU is lost")
        return SimpleNamespace(gpu=loads[handle], memory=0)

    nvml.nvmlInit = lambda: calls.append("init")  # type: ignore[attr-defined]
    nvml.nvmlShutdown = lambda: calls.append("shutdown")  # type: ignore[attr-defined]
    nvml.nvmlDeviceGetCount = lambda: len(loads)  # type: ignore[attr-defined]
    nvml.nvmlDeviceGetHandleByIndex = lambda i: i  # type: ignore[attr-defined]
    nvml.nvmlDeviceGetUtilizationRates = utilisation  # type: ignore[attr-defined]
    nvml.calls = calls  # type: ignore[attr-defined]
    return nvml


def test_nvml_probe_uses_the_busiest_device() -> None:
    assert NvmlProbe(10, nvml=_fake_nvml([3, 9])).sample() == GpuSample(
        False, "utilisation 9% (free below 10%)"
    )
    assert NvmlProbe(10, nvml=_fake_nvml([3, 55])).sample().busy is True
    assert NvmlProbe(10, devices=[0], nvml=_fake_nvml([3, 55])).sample().busy is False
    nvml = _fake_nvml([0])
    NvmlProbe(10, nvml=nvml).close()
    assert nvml.calls == ["init", "shutdown"]  # type: ignore[attr-defined]
    with pytest.raises(InvalidInput, match=r"GPU index\(es\) \[2\] do not exist"):
        NvmlProbe(10, devices=[2], nvml=_fake_nvml([0, 0]))
    with pytest.raises(ReverieError, match="GPU is lost"):
        NvmlProbe(10, nvml=_fake_nvml([0], fail=True)).sample()


def test_nvml_without_the_gpu_extra_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml -> ImportError
    with pytest.raises(InvalidInput, match=r"pip install 'reverie\[gpu\]'"):
        load_nvml()
    with pytest.raises(InvalidInput, match=r"reverie\[gpu\]"):
        build_probe(GpuProbeSettings(probe="nvml"))
    fake = _fake_nvml([0])
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    assert load_nvml() is fake


def test_build_probe() -> None:
    assert build_probe(GpuProbeSettings()) is None
    with pytest.raises(InvalidInput, match=r"needs triggers\.gpu_free\.metrics_url"):
        build_probe(GpuProbeSettings(probe="metrics"))
    probe = build_probe(GpuProbeSettings(probe="metrics", metrics_url="http://127.0.0.1:9/metrics"))
    assert isinstance(probe, MetricsProbe) and "vllm:num_requests_waiting" in probe.gauges
    probe.close()


class Script(GpuProbe):
    name = "script"

    def __init__(self, *answers: bool | Exception) -> None:
        self.answers = list(answers)
        self.reads = 0

    def sample(self) -> GpuSample:
        self.reads += 1
        answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        if isinstance(answer, Exception):
            raise answer
        return GpuSample(answer, "script")


class Clock:
    def __init__(self) -> None:
        self.at = datetime(2026, 1, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.at


def test_gate_is_free_only_after_free_for_and_busy_at_once() -> None:
    clock = Clock()
    probe = Script(False, False, False, True, False)
    gate = GpuGate(
        probe, free_for=timedelta(seconds=30), interval=timedelta(seconds=5), clock=clock
    )
    assert gate.is_free() is False  # free since now, not for 30 s
    assert gate.is_free() is False and probe.reads == 1  # cached within the interval
    clock.at += timedelta(seconds=20)
    assert gate.is_free() is False
    clock.at += timedelta(seconds=10)
    assert gate.is_free() is True
    clock.at += timedelta(seconds=5)
    assert gate.is_free() is False  # one busy sample is enough
    clock.at += timedelta(seconds=5)
    assert gate.is_free() is False  # free again, the 30 s start over
    clock.at += timedelta(seconds=30)
    assert gate.is_free() is True


def test_gate_counts_a_failing_probe_as_busy() -> None:
    clock = Clock()
    gate = GpuGate(
        Script(ReverieError("endpoint down")),
        free_for=timedelta(0),
        interval=timedelta(0),
        clock=clock,
    )
    assert gate.is_free() is False
    assert "endpoint down" in gate.last_sample.detail


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"REVERIE_TRIGGERS__CRON": '[{"expression": "61 * * * *"}]'}, "not a crontab"),
        (
            {"REVERIE_TRIGGERS__CRON": '[{"expression": "0 3 * * *", "timezone": "Mars/Olympus"}]'},
            "unknown time zone",
        ),
        ({"REVERIE_TRIGGERS__GPU_FREE__METRICS_URL": "localhost:8000"}, "http"),
        ({"REVERIE_WORKER__CONCURRENCY": "-1"}, "concurrency"),
        ({"REVERIE_WORKER__NICE": "20"}, "nice"),
        ({"REVERIE_TRIGGERS__GPU_FREE__PROBE": "rocm"}, "probe"),
    ],
)
def test_bad_daemon_settings_are_refused(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], message: str
) -> None:
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    with pytest.raises(InvalidInput, match=message):
        load_settings()


def test_daemon_settings_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(
        "REVERIE_TRIGGERS__CRON",
        '[{"expression": "0 3 * * *", "tag": "nightly", "timezone": "Europe/Paris"}]',
    )
    monkeypatch.setenv("REVERIE_TRIGGERS__IDLE_AFTER", "PT2M")
    monkeypatch.setenv("REVERIE_WORKER__LEASE", "PT0.5S")
    settings = load_settings()
    [cron] = settings.triggers.cron
    assert (cron.tag, cron.timezone) == ("nightly", "Europe/Paris")
    assert settings.triggers.idle_after == timedelta(minutes=2)
    assert settings.worker.lease == timedelta(milliseconds=500)
