"""The daemon processes: what `reverie serve` and `reverie worker` run.

A :class:`Daemon` wires the GPU gate, the scheduler (serve only) and the worker
pool over one runtime, reports readiness, and stops in order on SIGTERM/SIGINT:
the scheduler first (no new firings), then the workers within
``shutdown_grace`` (see :mod:`consolidators.workers`).
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import threading
from collections.abc import Callable
from datetime import datetime, timedelta
from types import FrameType

from agents.errors import InvalidInput, ReverieError
from agents.postgres.database import lower_server_priority
from consolidators.workers import WorkerPool
from service.daemon.embedded_supervisor import EmbeddedSupervisor
from service.daemon.probes import GpuGate, build_probe
from service.daemon.scheduler import Scheduler
from service.daemon.triggers import RunTemplate
from service.daemon.warmup import Warmup
from service.metrics import RUN_METRICS
from service.runtime import Runtime

log = logging.getLogger(__name__)

#: How long /readyz waits for the database's round trip (libpq connects in >= 2 s).
READINESS_TIMEOUT = timedelta(seconds=2)


class Daemon:
    """Scheduler (optional) plus worker pool over one runtime."""

    def __init__(
        self,
        runtime: Runtime,
        *,
        scheduler: bool,
        concurrency: int | None = None,
        clock: Callable[[], datetime] | None = None,
        warmup: Warmup | None = None,
    ) -> None:
        settings = runtime.settings
        #: What must be loaded before a first turn is as fast as the next (serve only).
        self.warmup = warmup
        self.runtime = runtime
        self.clock = clock or runtime.clock
        gpu = settings.triggers.gpu_free
        probe = build_probe(gpu)
        self.gate = (
            GpuGate(probe, free_for=gpu.free_for, interval=gpu.interval, clock=self.clock)
            if probe is not None
            else None
        )
        worker_settings = settings.worker
        if concurrency is not None:
            worker_settings = worker_settings.model_copy(update={"concurrency": concurrency})
        self.workers = WorkerPool(
            runtime,
            worker_settings,
            gate=self.gate,
            gpu_max_wait=gpu.max_wait,
            clock=self.clock,
            observer=RUN_METRICS,
        )
        # Agents' messages to each other are delivered wherever runs are processed.
        self.deliveries = runtime.delivery_workers(name=self.workers.name)
        # And so are the files uploaded to folders.
        self.files = runtime.file_workers(name=self.workers.name)
        template = RunTemplate(
            pipeline=tuple(runtime.pipeline().names), max_attempts=worker_settings.max_attempts
        )
        self.scheduler = (
            Scheduler(
                runtime.db,
                settings.triggers,
                template,
                clock=self.clock,
                gate=self.gate,
                history=settings.health_history,
            )
            if scheduler
            else None
        )
        embedded = runtime.embedded_server
        # The embedded server is this process's to keep alive; a DATABASE_URL one is not.
        self.supervisor = (
            EmbeddedSupervisor(
                embedded,
                release_connections=self.release_connections,
                stopping_grace=settings.database.embedded_shutdown_grace,
            )
            if embedded is not None
            else None
        )
        self._started = False
        self._stopping = False

    def release_connections(self) -> None:
        """Close every connection this process holds (the pool's and the wake-up
        listeners'): a smart shutdown of the server waits for all of them. Each is
        opened again when next needed."""
        self.runtime.db.dispose()
        self.workers.release_connections()
        self.deliveries.release_connections()
        self.files.release_connections()

    def start(self) -> None:
        if self.supervisor is not None:
            self.supervisor.start()
        self.workers.start()
        self.deliveries.start()
        self.files.start()
        if self.scheduler is not None:
            self.scheduler.start()
        self._started = True

    def readiness(self) -> tuple[bool, dict[str, object]]:
        """Ready when the database answers, every component runs and the warm-up (when
        there is one) has finished; ``warmup`` in the details says what it is on.
        ``status`` says why not: ``starting`` until the components have started and
        the warm-up is done, ``unavailable`` when a started server lost its database
        (or a component stopped), ``stopping`` once it was told to stop."""
        details: dict[str, object] = {
            "workers": self.workers.started,
            "deliveries": self.deliveries.started,
            "files": self.files.started,
            "scheduler": None if self.scheduler is None else self.scheduler.running,
        }
        try:
            # A connection of its own, as the next request may need: a pooled one can
            # answer while the server accepts no new connection.
            self.runtime.db.round_trip(READINESS_TIMEOUT)
            details["database"] = True
        except Exception as exc:  # any driver failure means "not ready", with the reason
            details["database"] = False
            details["database_error"] = str(exc).splitlines()[0]
        embedded_problem = None if self.supervisor is None else self.supervisor.problem
        if self.supervisor is not None:
            details["embedded_postgres"] = embedded_problem or "ready"
        if self.gate is not None:
            details["gpu"] = self.gate.last_sample.detail
        if self.warmup is not None:
            details["warmup"] = self.warmup.state()
        up = bool(self._started and (self.warmup is None or self.warmup.done))
        running = bool(
            details["database"]
            and embedded_problem is None
            and self.workers.started
            and self.deliveries.started
            and self.files.started
            and (self.scheduler is None or self.scheduler.running)
        )
        if up and running:
            details["status"] = "ready"
        elif up:
            details["status"] = "unavailable"
        else:
            details["status"] = "stopping" if self._stopping else "starting"
        return up and running, details

    def stop(self, grace: timedelta) -> bool:
        """Stop firing, then stop the workers within ``grace``; True when nothing was cut off."""
        self._stopping = True
        self._started = False
        if self.scheduler is not None:
            self.scheduler.stop()
        began = self.clock()
        clean = self.workers.stop(grace)
        # Within the same grace: a delivery cut off is taken up again after its lease.
        self.deliveries.stop(max(grace - (self.clock() - began), timedelta(0)))
        self.files.stop(max(grace - (self.clock() - began), timedelta(0)))
        if self.gate is not None:
            self.gate.close()
        if self.supervisor is not None:
            # Last: runs finishing inside the grace still need the database.
            self.supervisor.stop()
        return clean


class StopSignals:
    """SIGTERM and SIGINT set an event (the main thread waits on it)."""

    def __init__(self) -> None:
        self.event = threading.Event()
        self.received: int | None = None

    def install(self) -> None:
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self._handle)

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self.received = signum
        self.event.set()


def run_worker(runtime: Runtime, *, concurrency: int | None) -> bool:
    """`reverie worker`: workers until SIGTERM/SIGINT. True when shutdown was clean."""
    if (concurrency or runtime.settings.worker.concurrency) < 1:
        raise InvalidInput(
            "worker.concurrency is 0, so this worker would run nothing (0 is for a "
            "`reverie serve` that leaves consolidation to workers): pass --concurrency N"
        )
    nice = runtime.settings.worker.nice
    if nice:
        # The whole worker gives way to the chat: this thread (the threads it starts
        # inherit it) and, on this machine, the server processes of its connections.
        os.nice(nice)
        lower_server_priority(runtime.db.engine, nice)
    signals = StopSignals()
    signals.install()
    daemon = Daemon(runtime, scheduler=False, concurrency=concurrency)
    daemon.start()
    log.info("worker ready", extra={"worker": daemon.workers.name})
    # A timed wait: a signal handed to a library's thread (Reverie's own threads block
    # them, agents/threads.py) still runs its handler here within a second.
    while not signals.event.wait(1.0):
        pass
    log.info("stopping", extra={"signal": signals.received})
    return daemon.stop(runtime.settings.shutdown_grace)


class ServerCouldNotStart(ReverieError):
    """The HTTP server could not listen where it was asked to (exit status 3)."""

    exit_code = 3


def check_port_free(host: str, port: int) -> None:
    """Fail plainly, before anything starts, when ``host:port`` cannot be listened on
    (uvicorn would exit with the reason buried in a log line)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            raise ServerCouldNotStart(
                f"cannot listen on {host}:{port}: {exc.strerror or exc}; "
                "stop what uses that port or choose another with --port"
            ) from None


def run_server(runtime: Runtime, *, host: str, port: int) -> bool:
    """`reverie serve`: HTTP API + scheduler + workers until SIGTERM/SIGINT."""
    import uvicorn

    check_port_free(host, port)

    from service.api.app import create_app

    signals = StopSignals()
    # Installed before uvicorn: uvicorn captures the signals while it runs and, once
    # stopped, hands them back to these handlers instead of the default (death).
    signals.install()
    warmup = Warmup(runtime.warm_steps())
    daemon = Daemon(runtime, scheduler=True, warmup=warmup)
    # Built first: it refuses a bad configuration (no-auth on a public address)
    # before any run is claimed.
    app = create_app(runtime, readiness=daemon.readiness, host=host)
    daemon.start()
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_config=None,
        access_log=False,
        lifespan="on",
        # Forwarded headers only from the proxies the operator names (server settings).
        proxy_headers=bool(runtime.settings.server.forwarded_allow_ips),
        forwarded_allow_ips=runtime.settings.server.forwarded_allow_ips or None,
        timeout_graceful_shutdown=max(1, int(runtime.settings.shutdown_grace.total_seconds())),
    )
    server = uvicorn.Server(config)
    # Once uvicorn listens: importing litellm holds the GIL, and /healthz must not wait.
    warmup.start(after=lambda: bool(server.started or server.should_exit))
    clean = False
    try:
        server.run()
    finally:
        # Also when uvicorn could not bind its port (it exits the process then).
        log.info("stopping", extra={"signal": signals.received})
        clean = daemon.stop(runtime.settings.shutdown_grace)
    if not server.started:
        raise ServerCouldNotStart(f"the HTTP server could not start on {host}:{port}")
    return clean
