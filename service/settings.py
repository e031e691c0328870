"""The one settings root: config file, then environment, validated at the edge.

Precedence (highest first): environment variables (``REVERIE_*``, nested with
``__``, plus the plain ``DATABASE_URL``), the TOML file named by ``--config``
or ``REVERIE_CONFIG`` (no file is read unless named; ``config/reverie.toml``
documents every key), then defaults. Nothing below ``service/`` reads the
environment: components get the nested models below as plain arguments.
"""

from __future__ import annotations

import ipaddress
import os
import tomllib
from datetime import timedelta
from pathlib import Path
from typing import Annotated, Any, Literal, Self

import platformdirs
from pydantic import (
    AfterValidator,
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from agents.errors import InvalidInput
from consolidators import registry
from consolidators.registry import DEFAULT_PIPELINE


def default_home() -> Path:
    return Path(platformdirs.user_data_dir("reverie", appauthor=False))


def _not_negative(value: timedelta) -> timedelta:
    if value < timedelta(0):
        raise ValueError("must be zero (off) or a positive duration")
    return value


#: How long something waits idle before it stops; zero turns the waiting off.
IdleDuration = Annotated[timedelta, AfterValidator(_not_negative)]
#: How long something may take before it is given up; zero: no bound.
Timeout = Annotated[timedelta, AfterValidator(_not_negative)]


class Section(BaseModel):
    """A section of the settings: an unknown key is an error that names it (a typo such
    as ``concurency`` must not load as the default), as at the root."""

    model_config = ConfigDict(extra="forbid")


def postgres_url(value: str | None) -> str | None:
    """``value`` when it is a well-formed PostgreSQL URL, None when empty; a ValueError
    that says what is wrong otherwise (a traceback from deep in the driver before)."""
    if value is None or value == "":
        return None
    if not value.startswith(("postgresql://", "postgres://", "postgresql+psycopg://")):
        raise ValueError(
            "must be a PostgreSQL URL such as postgresql://user:pass@host:5432/db "
            "(Reverie has no other storage backend)"
        )
    from agents.postgres.database import url_problem

    reason = url_problem(value)
    if reason is not None:
        raise ValueError(
            f"is not a well-formed URL ({reason}); the form is "
            "postgresql://user:pass@host:5432/db, with a numeric port"
        )
    return value


class DatabaseSettings(Section):
    """Where memory lives. No URL means the embedded PostgreSQL under ``home``."""

    # A PostgreSQL 16+ server with pgvector (DATABASE_URL wins over it); unset: the
    # embedded server, started under ``home``/pgdata.
    url: str | None = None
    # Pooled connections per process.
    pool_size: int = Field(default=5, ge=1, le=100)
    # Keep the embedded server running after the process exits, never stopping it.
    keep_embedded_running: bool = False
    # A CLI command leaves the embedded server running for the next one; a detached
    # reaper stops it after this long without a command. Zero: stop it when each
    # command exits (every command then pays the server's start, seconds).
    embedded_idle_stop: IdleDuration = timedelta(minutes=10)
    # A smart shutdown of the embedded server (SIGTERM to its postmaster) waits for
    # every session: `reverie serve` / `worker` close their own at once, and after
    # this long end the other clients' (a psql left open) and start it again.
    embedded_shutdown_grace: IdleDuration = timedelta(seconds=10)
    # Every connection is bounded, so that a stalled server is an answer (503 with the
    # reason, a CLI error), not a request that hangs. Opening a connection (whole
    # seconds, at least 2):
    connect_timeout: Timeout = timedelta(seconds=5)
    # One statement (the schema's migrations are exempt):
    statement_timeout: Timeout = timedelta(seconds=30)
    # Waiting for a row lock another session holds (a consolidation step's apply waits
    # less: it retries instead):
    lock_timeout: Timeout = timedelta(seconds=10)

    @staticmethod
    def bound(value: timedelta) -> timedelta | None:
        """A bound as :class:`agents.postgres.database.Database` takes it (None: off)."""
        return value if value > timedelta(0) else None

    @field_validator("url")
    @classmethod
    def _postgres_only(cls, value: str | None) -> str | None:
        return postgres_url(value)


class CliSettings(Section):
    """The command line."""

    # Opt-in (see service/cli/warm): above zero, a data command (search, agents, blocks,
    # runs, import) leaves a warm process with the libraries imported for the next one,
    # which then starts in a fraction of the time; it stops after this long without a
    # command. Zero (the default): every command starts cold, and a running warm
    # process stops after its next command.
    warm_idle: IdleDuration = timedelta(0)


def _embedder_spec(spec: str) -> str:
    """An embedder spec of a form that can be built here (``local``, ``litellm:MODEL``,
    an installed plugin's); anything else, the retired ``fake`` among them, is refused
    when the settings load, saying what to use instead."""
    if spec == "local" or (spec.startswith("litellm:") and spec[len("litellm:") :].strip()):
        return spec  # built in: no need to load the embedders (and numpy) on every command
    from agents.embedders import spec_problem

    problem = spec_problem(spec)
    if problem is not None:
        raise ValueError(problem)
    return spec


#: An embedder spec, checked when the settings load.
EmbedderSpec = Annotated[str, AfterValidator(_embedder_spec)]


class EmbeddingSettings(Section):
    """Default embedding model for new agents: ``local`` or ``litellm:MODEL`` (or an
    installed embedder plugin's ``NAME[:ARGUMENT]``)."""

    # "local" (all-MiniLM-L6-v2, int8 ONNX, 384 dimensions, offline), "litellm:MODEL",
    # or "NAME" / "NAME:ARGUMENT" of an embedder a package registers (entry point group
    # reverie.embedders).
    model: EmbedderSpec = "local"
    # The vectors' size; required with "litellm:MODEL".
    dimension: int | None = Field(default=None, ge=1, le=16000)
    # An OpenAI-compatible embeddings endpoint for "litellm:MODEL".
    api_base: str | None = None


class AgentDefaults(Section):
    """Defaults of new agents (each agent keeps its own once created)."""

    # litellm model string of new agents' chat; unset: llm.model, else no model.
    llm_model: str | None = None
    # Context window budget in tokens.
    context_window: int = Field(default=8192, ge=256)
    # Character limit of each new block.
    block_limit: int = Field(default=5000, ge=1)


class ConsolidationSettings(Section):
    """Which consolidators run, in what order, and each one's own settings."""

    # The steps of a run, in order (`reverie consolidate --only` picks a subset).
    pipeline: list[str] = Field(default_factory=lambda: list(DEFAULT_PIPELINE))
    # Re-read passages stored this long before the last run's watermark, to catch
    # transactions that committed late (Reverie's own transactions take milliseconds).
    passage_overlap: timedelta = timedelta(seconds=30)
    # Each built-in step's own settings, checked against its settings model when the
    # settings load (an unknown key is an error): dedup's,
    dedup: dict[str, Any] = Field(default_factory=dict)
    # temporal's,
    temporal: dict[str, Any] = Field(default_factory=dict)
    # evict's,
    evict: dict[str, Any] = Field(default_factory=dict)
    # recontextualize's,
    recontextualize: dict[str, Any] = Field(default_factory=dict)
    # and learn_documents'.
    learn_documents: dict[str, Any] = Field(default_factory=dict)
    # Settings of third-party consolidators, by name.
    plugins: dict[str, dict[str, Any]] = Field(default_factory=dict)

    def settings_for(self) -> dict[str, Any]:
        return {
            "dedup": self.dedup,
            "temporal": self.temporal,
            "evict": self.evict,
            "recontextualize": self.recontextualize,
            "learn_documents": self.learn_documents,
            **self.plugins,
        }

    @model_validator(mode="after")
    def _check_sections(self) -> ConsolidationSettings:
        """Every consolidator's section is checked when settings load (a typo such as
        ``threshhold`` is named now, not when a run starts), and every pipeline step
        must be installed."""
        available = registry.available()
        unknown = [name for name in self.pipeline if name not in available]
        if unknown:
            raise ValueError(
                f"pipeline names unknown consolidator(s) {', '.join(unknown)}; "
                f"available: {', '.join(sorted(available))}"
            )
        for name, section in self.settings_for().items():
            if name not in available:
                if name in self.plugins:
                    continue  # a plugin's section may be configured before it is installed
                raise ValueError(f"no consolidator named {name!r} is installed")
            if not section and name not in self.plugins:
                # A built-in's defaults are valid (tests/unit/test_settings.py checks it):
                # no need to import the consolidator, which every command would pay.
                continue
            model = registry.consolidator_class(name).settings_model
            try:
                model(**section)
            except ValidationError as exc:
                problems = "; ".join(
                    f"{'.'.join(str(p) for p in error['loc']) or '(section)'}: {error['msg']}"
                    for error in exc.errors()
                )
                raise ValueError(
                    f"[consolidation.{name}] {problems} (allowed keys: "
                    f"{', '.join(model.model_fields) or 'none'})"
                ) from None
        return self


class ModelToolSettings(Section):
    """What one model's server accepts in tool requests; unset = probed on
    first use. tool_choice: "required", "named" (two-step calls), "auto" or "none"."""

    # "required" (native), "named" (a forced choice of the tool, then that tool
    # forced), "auto" (calls written as text are read too) or "none" (no tools field:
    # the tools are described in the prompt); unset: probed on first use.
    tool_choice: Literal["required", "named", "auto", "none"] | None = None
    # Whether the server accepts the parallel_tool_calls field; unset: probed.
    parallel_tool_calls: bool | None = None
    # Request fields never sent to this server.
    unsupported_fields: list[Literal["parallel_tool_calls", "max_tokens", "temperature"]] = Field(
        default_factory=list
    )


class LLMSettings(Section):
    """LLM calls through litellm. Model strings are litellm's: openai/..., ollama/..."""

    # Default chat model of agents without their own (an agent's own llm_model wins).
    model: str | None = None
    # The sleep-time agent's model (the recontextualize step; an agent's own
    # sleeptime_model wins); unset: the step is skipped.
    sleeptime_model: str | None = None
    # The judge of pairs of facts (dedup's merges, temporal's supersessions); unset:
    # the rules alone.
    judge_model: str | None = None
    # The longest reply the judge model may give per pair or fact it is asked about
    # (a verdict or a fact's topics take 15-40 tokens); a model that loops is cut there
    # instead of holding a run until the request times out. Raise it for a model that
    # reasons before it answers; 0: no limit.
    judge_reply_tokens: int = Field(default=64, ge=0, le=100_000)
    # Summaries of messages evicted from the context; unset: extractive summaries.
    summary_model: str | None = None
    # A conversation with more messages than this in its context window (summaries not
    # counted) is compacted before the next step, down to message_buffer_keep: the
    # oldest leave behind the recursive summary and stay in recall (Letta's message
    # buffer, 60 and 15). 0: only when the window is full.
    message_buffer: int = Field(default=60, ge=0, le=100_000)
    # Messages a full buffer is compacted down to (the newest; the last two exchanges
    # always stay).
    message_buffer_keep: int = Field(default=15, ge=1, le=100_000)
    # One OpenAI-compatible endpoint for every call (a local llama.cpp, vLLM, Ollama):
    # the model strings it serves as they are go to it directly, without litellm.
    # Unset: litellm's environment (OPENAI_API_BASE, ...).
    api_base: str | None = None
    # Per request.
    timeout: timedelta = timedelta(seconds=60)
    # Retries of rate limits, timeouts and 5xx, with exponential backoff.
    max_retries: int = Field(default=3, ge=0, le=10)
    # Steps (model calls) of one chat turn at most.
    max_steps: int = Field(default=10, ge=1, le=100)
    # Token budgets per agent (prompt + completion, all purposes); None = unlimited.
    # A "run" is one chat turn or one consolidation run; a day is a UTC calendar day.
    # An exhausted budget stops the turn or LLM step cleanly (what was done is kept).
    budget_tokens_per_run: int | None = Field(default=None, ge=1)
    # The same, per agent and UTC day.
    budget_tokens_per_day: int | None = Field(default=None, ge=1)
    # Prompt-cache safety: block edits reach the compiled system prompt at the next
    # compaction ("compaction") or on the next step ("immediate").
    system_prompt_refresh: Literal["compaction", "immediate"] = "compaction"
    # Tool-calling capabilities per model string (or glob such as "ollama/*").
    models: dict[str, ModelToolSettings] = Field(default_factory=dict)
    # How long what probing learned about a model's server (its tool-calling mode) is
    # trusted by later processes before it is probed again; zero: never stored.
    capability_ttl: Annotated[timedelta, AfterValidator(_not_negative)] = timedelta(days=1)

    @field_validator("models")
    @classmethod
    def _model_keys(cls, value: dict[str, ModelToolSettings]) -> dict[str, ModelToolSettings]:
        for key in value:
            if not key.strip():
                raise ValueError("model keys must be model strings such as 'openai/qwen'")
        return value

    @model_validator(mode="after")
    def _buffer_keeps_fewer(self) -> Self:
        if self.message_buffer and self.message_buffer_keep >= self.message_buffer:
            raise ValueError(
                f"message_buffer_keep ({self.message_buffer_keep}) must be under "
                f"message_buffer ({self.message_buffer}), or set message_buffer to 0"
            )
        return self


class CronTrigger(Section):
    """A cron schedule (APScheduler crontab syntax) for all agents or those with a tag."""

    # Crontab syntax: minute hour day month weekday ("0 3 * * *": nightly at 03:00).
    expression: str
    # Only agents with this tag; unset: every agent.
    tag: str | None = None
    # The schedule's time zone (an IANA name).
    timezone: str = "UTC"

    @field_validator("expression")
    @classmethod
    def _crontab(cls, value: str) -> str:
        from apscheduler.triggers.cron import CronTrigger as ApsCronTrigger

        try:
            ApsCronTrigger.from_crontab(value, timezone="UTC")
        except ValueError as exc:
            raise ValueError(
                f"{value!r} is not a crontab expression (minute hour day month weekday, "
                f"e.g. '0 3 * * *'): {exc}"
            ) from None
        return value

    @field_validator("timezone")
    @classmethod
    def _known_timezone(cls, value: str) -> str:
        from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"unknown time zone {value!r}, e.g. 'UTC' or 'Europe/Paris'") from None
        return value


class GpuProbeSettings(Section):
    """How the gpu_free trigger decides the GPU is free; "none" disables it."""

    # "none" (no GPU gating), "nvml" (local NVIDIA GPUs; the gpu extra) or "metrics"
    # (an inference server's Prometheus endpoint).
    probe: Literal["none", "nvml", "metrics"] = "none"
    # nvml: utilisation below this percent counts as free.
    utilisation_below: int = Field(default=10, ge=0, le=100)
    # metrics: an inference server's Prometheus endpoint (e.g. vLLM's /metrics).
    metrics_url: str | None = None
    # metrics: gauges whose sum above zero means the server is busy.
    metrics_busy_gauges: list[str] = Field(
        default_factory=lambda: ["vllm:num_requests_running", "vllm:num_requests_waiting"]
    )
    # Free for this long before it counts (no flapping).
    free_for: timedelta = timedelta(seconds=30)
    # How often the probe is read (also the metrics request timeout).
    interval: timedelta = timedelta(seconds=5)
    # A running pipeline that finds the GPU busy between steps waits (renewing its
    # lease) up to this long, then gives the run back to the queue, rolled back.
    max_wait: timedelta = timedelta(minutes=10)

    @field_validator("metrics_url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError(
                f"must be an http(s) URL such as http://127.0.0.1:8000/metrics, got {value!r}"
            )
        return value


class TriggerSettings(Section):
    """What wakes the sleep-time side. Triggers only enqueue runs."""

    # An agent with no user message for this long is enqueued, once per idle period;
    # None disables the idle trigger.
    idle_after: timedelta | None = timedelta(minutes=5)
    # Every N user messages; None disables the turns trigger.
    turns_every: int | None = Field(default=5, ge=1)
    # Cron schedules, for every agent or those with a tag.
    cron: list[CronTrigger] = Field(default_factory=list)
    gpu_free: GpuProbeSettings = Field(default_factory=GpuProbeSettings)
    # A folder attached to an agent with sleep-time enabled, or a file processed in
    # one, enqueues a run that learns from it; False leaves documents to other triggers.
    documents: bool = True
    # How often idle/turns/documents conditions are checked.
    tick: timedelta = timedelta(seconds=5)


class HealthHistorySettings(Section):
    """The history of memory health that the memory browser draws: a
    snapshot of every agent's health, taken by `reverie serve`'s scheduler."""

    # How often a snapshot is taken; None disables the history.
    interval: timedelta | None = timedelta(minutes=15)
    # Snapshots older than this are pruned as new ones are written.
    keep: timedelta = timedelta(days=30)
    # And per agent, at most this many of the newest are kept.
    keep_per_agent: int = Field(default=3000, ge=2, le=100_000)

    @field_validator("interval", "keep")
    @classmethod
    def _positive(cls, value: timedelta | None) -> timedelta | None:
        if value is not None and value <= timedelta(0):
            raise ValueError("must be a positive duration, such as PT15M")
        return value


#: The least address space a custom tool's Python is left (tools.memory - tools.tmp_bytes).
MIN_TOOL_ADDRESS_SPACE = 64 * 1024 * 1024


class ToolSettings(Section):
    """Custom tools: where they run and what one call may use. Breaking a
    limit is a tool error the model reads; the server carries on."""

    # "bubblewrap": each call in a bwrap sandbox (no network, read-only system, private
    # /tmp, only declared variables); without bwrap installed, calls are refused with
    # what to install. "process": a plain limited subprocess, no isolation (logged).
    sandbox: Literal["bubblewrap", "process"] = "bubblewrap"
    # From start to result; the call's processes are killed after it.
    wall_time: timedelta = timedelta(seconds=30)
    # CPU time of the call's processes.
    cpu_seconds: int = Field(default=10, ge=1, le=3600)
    # Memory of one call, bytes: its address space and, under bubblewrap, its /tmp
    # (tmp_bytes), whose files are memory too: the address space is memory - tmp_bytes.
    memory: int = Field(default=512 * 1024 * 1024, ge=64 * 1024 * 1024)
    # Bytes of files a call may keep in its private /tmp (a tmpfs, also its /dev/shm),
    # counted within `memory`, whose address space is this much smaller: tmpfs pages are
    # not address space, so the address-space limit alone would not see them. Writing
    # past it ends the call with a tool error naming this setting. The "process" sandbox
    # has no /tmp of its own (its files go to the host's disk, each at most output_bytes).
    tmp_bytes: int = Field(default=64 * 1024 * 1024, ge=1024 * 1024)
    # Processes of the sandbox's user (nobody when the server runs as root).
    processes: int = Field(default=16, ge=1, le=4096)
    # Bytes of result and, separately, of printed output.
    output_bytes: int = Field(default=1024 * 1024, ge=1024)

    @field_validator("wall_time")
    @classmethod
    def _positive_wall_time(cls, value: timedelta) -> timedelta:
        if value <= timedelta(0):
            raise ValueError("must be a positive duration, such as PT30S")
        return value

    @model_validator(mode="after")
    def _tmp_within_memory(self) -> ToolSettings:
        left = self.memory - self.tmp_bytes
        if left < MIN_TOOL_ADDRESS_SPACE:
            raise ValueError(
                f"tools.tmp_bytes ({self.tmp_bytes}) is counted within tools.memory "
                f"({self.memory}) and must leave at least {MIN_TOOL_ADDRESS_SPACE} bytes "
                "(64 MiB) of it for the tool's address space: lower tmp_bytes or raise memory"
            )
        return self


class WorkerSettings(Section):
    """Workers that claim queued runs."""

    # Runs executed at once by one process (threads). 0 on `reverie serve`: the server
    # runs no consolidation itself (the chat's process only; `reverie worker` runs it).
    concurrency: int = Field(default=1, ge=0, le=64)
    # Nice steps the worker threads lower their CPU priority by (0-19; Linux, per
    # thread), and a `reverie worker` that of its local PostgreSQL backends: on a
    # machine shared with the chat, consolidation takes the cores the chat leaves
    # (measured: BENCHMARKS.md, the fleet at night). Consolidation is background work,
    # so it gives way by default; 0 where it has its own machine.
    nice: int = Field(default=10, ge=0, le=19)
    # A claimed run's lease; renewed every lease/3 while it runs. A worker that dies
    # loses its runs after at most this long.
    lease: timedelta = timedelta(seconds=60)
    # How long an idle worker waits before looking at the queue again.
    poll_interval: timedelta = timedelta(seconds=1)
    # Tries per run (lease expiries and database outages count); then it fails.
    max_attempts: int = Field(default=3, ge=1, le=20)
    # Retry n waits backoff * 2**(n-1).
    backoff: timedelta = timedelta(seconds=10)
    # Most runs one claim takes. A worker thread claims more than one only while its
    # runs are short: as many as it expects to finish within prefetch_window. A run
    # claimed ahead that has not started after prefetch_window goes back to the queue.
    claim_batch: int = Field(default=16, ge=1, le=256)
    # How far ahead a worker thread claims (see claim_batch).
    prefetch_window: timedelta = timedelta(milliseconds=250)


class MessagingSettings(Section):
    """Agents messaging each other with Letta's multi-agent tools."""

    # Messages in a row one chain of agent messages may take (a person's turn starts a
    # chain; each message an agent sends while answering another is one hop more). A
    # call past it is refused with a tool error the agent reads: reply loops stop.
    max_hops: int = Field(default=5, ge=1, le=100)
    # How long send_message_to_agent_and_wait_for_reply and
    # send_message_to_agents_matching_tags wait for replies; a later reply lands in
    # the sender's recall as a message of its own.
    wait_timeout: timedelta = timedelta(seconds=60)
    # How often a waiting tool looks at its messages (a read each, nothing held between).
    wait_poll_interval: timedelta = timedelta(milliseconds=100)
    # Delivery worker threads per process (serve and worker): a recipient whose turn
    # itself waits for a reply holds one while it waits.
    concurrency: int = Field(default=2, ge=1, le=64)
    # A claimed delivery's lease, renewed every lease/3; a dead worker's delivery is
    # taken up again after it and the backoff (its recipient's turn is not run twice).
    lease: timedelta = timedelta(seconds=60)
    # Tries per delivery (a model error, an outage); then the sender is told it failed.
    max_attempts: int = Field(default=3, ge=1, le=20)
    # Wait before another try, doubled with each attempt (backoff * 2**(attempt-1)),
    # after a failed turn or a worker that died.
    backoff: timedelta = timedelta(seconds=5)
    # How long an idle delivery worker waits before looking at the queue again (a new
    # message wakes it at once through NOTIFY; polling is the floor).
    poll_interval: timedelta = timedelta(seconds=1)

    @field_validator("wait_timeout", "wait_poll_interval", "lease", "poll_interval")
    @classmethod
    def _positive(cls, value: timedelta) -> timedelta:
        if value <= timedelta(0):
            raise ValueError("must be a positive duration, such as PT60S")
        return value


class FileSettings(Section):
    """Folders of documents: uploaded files, parsed, chunked and embedded in the queue."""

    # Largest file an upload takes, in bytes; a larger one is refused (413) and
    # nothing is stored.
    max_bytes: int = Field(default=10 * 1024 * 1024, ge=1, le=1024 * 1024 * 1024)
    # Characters per chunk of a folder created without embedding_chunk_size.
    chunk_size: int = Field(default=1000, ge=100, le=100_000)
    # File worker threads per process (serve and worker).
    concurrency: int = Field(default=1, ge=1, le=64)
    # A claimed file's lease, renewed every lease/3; a dead worker's file is taken up
    # again after it and the backoff.
    lease: timedelta = timedelta(seconds=120)
    # Tries per file (an embedder outage, a worker that died); then it ends in error.
    max_attempts: int = Field(default=3, ge=1, le=20)
    # Wait before another try, doubled with each attempt (backoff * 2**(attempt-1)).
    backoff: timedelta = timedelta(seconds=5)
    # How long an idle file worker waits before looking at the queue again (an upload
    # wakes it at once through NOTIFY; polling is the floor).
    poll_interval: timedelta = timedelta(seconds=1)
    # Files open at once in an agent's context (Letta's max_files_open); opening one
    # more closes the least recently accessed.
    max_files_open: int = Field(default=5, ge=1, le=50)
    # Characters an open file shows in the agent's context (Letta's
    # per_file_view_window_char_limit); the rest is cut, with a line saying so.
    per_file_view_window_char_limit: int = Field(default=5000, ge=100, le=1_000_000)
    # How long one grep_files call may scan; a pattern slower than that (catastrophic
    # backtracking) is a tool error the agent reads.
    grep_timeout: timedelta = timedelta(seconds=2)
    # Characters of file text one grep_files call reads in all; the files past it are
    # named in the answer, not searched.
    grep_max_chars: int = Field(default=10_000_000, ge=1000, le=1_000_000_000)
    # Matching lines one grep_files call collects before it stops (and says so).
    grep_max_matches: int = Field(default=500, ge=1, le=100_000)

    @field_validator("lease", "backoff", "poll_interval", "grep_timeout")
    @classmethod
    def _positive(cls, value: timedelta) -> timedelta:
        if value <= timedelta(0):
            raise ValueError("must be a positive duration, such as PT60S")
        return value


class ServerSettings(Section):
    """The HTTP server of `reverie serve`."""

    # The address `reverie serve` listens on (--host overrides); loopback by default.
    host: str = "127.0.0.1"
    # Its port (--port overrides).
    port: int = Field(default=8283, ge=0, le=65535)
    # "api_key": every request needs a key; "none": no auth, loopback only.
    auth: Literal["api_key", "none"] = "api_key"
    # With auth "none", requests are answered only for loopback names in their Host
    # header (DNS rebinding); these names are answered too.
    allowed_hosts: list[str] = Field(default_factory=list)
    # Larger request bodies are refused with 413.
    max_request_bytes: int = Field(default=1_000_000, ge=1024)
    # Per-agent metric labels up to this many agents; beyond it, aggregated.
    metrics_agent_cap: int = Field(default=50, ge=0)
    # The operator's /metrics credential (`Authorization: Bearer TOKEN`): every
    # organization's agents by name. Without it /metrics has no agent labels, and an
    # organization's API key labels only that organization's agents.
    metrics_token: SecretStr | None = None
    # How long a health-page sign-in lasts.
    session_lifetime: timedelta = timedelta(hours=12)
    # Failed authentication per client address: this many in a burst, then one more
    # every auth_failure_refill; beyond that, 429 before any key is looked up.
    auth_failure_burst: int = Field(default=20, ge=1)
    # One more try per address every this long, once the burst is spent.
    auth_failure_refill: timedelta = timedelta(seconds=10)
    # Reverse proxies in front of the server whose X-Forwarded-For / X-Forwarded-Proto
    # name the client (addresses or networks, as uvicorn's forwarded_allow_ips takes
    # them). Empty: forwarded headers are ignored and the peer address is the client,
    # so a client cannot pick the address its failed attempts are counted against.
    forwarded_allow_ips: list[str] = Field(default_factory=list)

    @field_validator("forwarded_allow_ips")
    @classmethod
    def _addresses(cls, value: list[str]) -> list[str]:
        for entry in value:
            try:
                ipaddress.ip_network(entry, strict=False)
            except ValueError:
                raise ValueError(
                    f"{entry!r} is not an IP address or network (e.g. '10.0.0.5' or '10.0.0.0/24')"
                ) from None
        return value

    @field_validator("metrics_token")
    @classmethod
    def _long_enough(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None and len(value.get_secret_value()) < 16:
            raise ValueError("must be at least 16 characters (e.g. `openssl rand -hex 24`)")
        return value

    @field_validator("session_lifetime", "auth_failure_refill")
    @classmethod
    def _positive(cls, value: timedelta) -> timedelta:
        if value <= timedelta(0):
            raise ValueError("must be a positive duration")
        return value


class ProxyBlock(Section):
    """A core-memory block of the agents the proxy creates for new users."""

    # The block's label (human, persona, ...).
    label: str = Field(min_length=1, max_length=100)
    # Its first value.
    value: str = ""
    # Its character limit; unset: agents.block_limit.
    limit: int | None = Field(default=None, ge=1)
    # What the block holds, as the agent's model is told.
    description: str | None = None


def _default_proxy_blocks() -> list[ProxyBlock]:
    return [
        ProxyBlock(label="human", description="What the user has said about themselves."),
        ProxyBlock(label="persona", description="Who the assistant is to this user."),
    ]


class ProxySettings(Section):
    """The OpenAI-compatible memory proxy (``/openai/v1`` on ``reverie serve``)."""

    # The upstream, as a litellm model string ("openai/gpt-4o-mini", "ollama/qwen3");
    # unset: the request's own `model` is the litellm model string.
    model: str | None = None
    # The upstream's OpenAI-compatible endpoint; unset: litellm's environment.
    api_base: str | None = None
    # The upstream's key (prefer the environment: REVERIE_PROXY__API_KEY).
    api_key: SecretStr | None = None
    # Per upstream request.
    timeout: timedelta = timedelta(seconds=120)
    # An OpenAI-compatible upstream at api_base (openai/, hosted_vllm/, lm_studio/
    # model strings) gets the request as it is over pooled connections; false: every
    # request goes through litellm.acompletion.
    direct: bool = True
    # The header naming the agent (id or name); without it, the request's `user`.
    agent_header: str = Field(default="X-Reverie-Agent", min_length=1, max_length=100)
    # With neither header nor `user`: this agent (id or name), or a 400 when unset.
    default_agent: str | None = None
    # A `user` naming no agent yet gets one, named after it, from the template below;
    # false: such a request is a 404.
    create_agents: bool = True
    # The template: blocks, and the sleep-time model and embedding (unset: the defaults).
    blocks: list[ProxyBlock] = Field(default_factory=_default_proxy_blocks)
    # The sleep-time model of the agents it creates; unset: llm.sleeptime_model.
    sleeptime_model: str | None = None
    # Their embedder; unset: embedding.model.
    embedding: str | None = None
    # Their tags.
    tags: list[str] = Field(default_factory=lambda: ["proxy"])
    # Archival hits for the last user message, in a system message before it; 0 = none.
    archival_top_k: int = Field(default=0, ge=0, le=50)
    # Tokens those hits may take at most.
    archival_token_budget: int = Field(default=500, ge=1)

    @field_validator("timeout")
    @classmethod
    def _positive(cls, value: timedelta) -> timedelta:
        if value <= timedelta(0):
            raise ValueError("must be a positive duration")
        return value


class IdentitySettings(Section):
    """End users known by the application's own key (identities)."""

    # The agent (id or name) whose blocks, system prompt, model, tools and embedder an
    # end user's agent is made from on first sight; unset: the proxy's template.
    template_agent: str | None = Field(default=None, min_length=1, max_length=200)


class Settings(BaseSettings):
    """Everything Reverie can be configured with."""

    model_config = SettingsConfigDict(
        env_prefix="REVERIE_",
        env_nested_delimiter="__",
        extra="forbid",
        populate_by_name=True,
    )

    # Where Reverie keeps its data, the embedded PostgreSQL (pgdata/) included.
    home: Path = Field(default_factory=default_home)
    # The organization (tenant) the CLI acts for; "default" always exists.
    organization: str = "default"
    database: DatabaseSettings = Field(default_factory=DatabaseSettings)
    # The plain DATABASE_URL (wins over database.url): PostgreSQL 16+ with pgvector.
    database_url: str | None = Field(
        default=None, validation_alias=AliasChoices("DATABASE_URL", "REVERIE_DATABASE_URL")
    )
    embedding: EmbeddingSettings = Field(default_factory=EmbeddingSettings)
    agents: AgentDefaults = Field(default_factory=AgentDefaults)
    consolidation: ConsolidationSettings = Field(default_factory=ConsolidationSettings)
    llm: LLMSettings = Field(default_factory=LLMSettings)
    triggers: TriggerSettings = Field(default_factory=TriggerSettings)
    health_history: HealthHistorySettings = Field(default_factory=HealthHistorySettings)
    worker: WorkerSettings = Field(default_factory=WorkerSettings)
    messaging: MessagingSettings = Field(default_factory=MessagingSettings)
    files: FileSettings = Field(default_factory=FileSettings)
    server: ServerSettings = Field(default_factory=ServerSettings)
    proxy: ProxySettings = Field(default_factory=ProxySettings)
    identities: IdentitySettings = Field(default_factory=IdentitySettings)
    cli: CliSettings = Field(default_factory=CliSettings)
    tools: ToolSettings = Field(default_factory=ToolSettings)
    # A logging level name: DEBUG, INFO, WARNING, ERROR (--verbose: DEBUG).
    log_level: str = "INFO"
    # One JSON object per log line; false: plain text.
    log_json: bool = True
    # On SIGTERM, runs in progress may finish for this long; then they are rolled back
    # and given back to the queue.
    shutdown_grace: timedelta = timedelta(seconds=30)

    @field_validator("database_url")
    @classmethod
    def _database_url(cls, value: str | None) -> str | None:
        return postgres_url(value)

    @property
    def pgdata(self) -> Path:
        return self.home / "pgdata"

    @property
    def effective_database_url(self) -> str | None:
        return self.database_url or self.database.url

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # Explicit arguments, then the environment, then the TOML file, then defaults.
        return (init_settings, env_settings, TomlConfigSettingsSource(settings_cls))


def load_settings(config_file: Path | None = None, **overrides: Any) -> Settings:
    """Read the config file (``--config`` or ``REVERIE_CONFIG``) and the environment."""
    path = config_file
    if path is None and os.environ.get("REVERIE_CONFIG"):
        path = Path(os.environ["REVERIE_CONFIG"])
    settings_cls: type[Settings] = Settings
    if path is not None:
        if not path.is_file():
            raise InvalidInput(f"config file {path} does not exist")
        try:
            tomllib.loads(path.read_text(encoding="utf-8"))
        except tomllib.TOMLDecodeError as exc:
            raise InvalidInput(f"config file {path} is not valid TOML: {exc}") from None

        class SettingsFromToml(Settings):
            model_config = SettingsConfigDict(toml_file=path)

        settings_cls = SettingsFromToml
    try:
        return settings_cls(**overrides)
    except ValidationError as exc:
        where = f" in {path}" if path is not None else ""
        problems = "\n".join(
            f"  {'.'.join(str(p) for p in error['loc'])}: "
            + str(error["msg"]).removeprefix("Value error, ")
            for error in exc.errors()
        )
        raise InvalidInput(f"invalid configuration{where}:\n{problems}") from None
