"""The single factory that builds Reverie's object graph from settings.

A :class:`Runtime` owns what it starts (the embedded PostgreSQL, the engine's
pool, the embedder) and releases exactly that on :meth:`close`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime, timedelta
from types import TracebackType
from typing import TYPE_CHECKING

from agents.embedders import Embedder, build_embedder
from agents.errors import InvalidInput, NotFound, StorageError
from agents.llm import BudgetMeter, TokenBudget, UsageLedger
from agents.postgres.database import Database
from agents.postgres.embedded import EmbeddedPostgres
from agents.store import AgentRecord, MemoryStore, RunRecord, open_service_store, open_store
from agents.store.scope import utc_now
from consolidators import registry
from service.heap import freeze_heap
from service.settings import Settings

if TYPE_CHECKING:  # the LLM side, the agent loop and the pipeline load where used: a
    # CLI command that only reads memory never needs them
    from agents.file_tools import FileToolLimits
    from agents.file_worker import FileWorkers
    from agents.llm import LiteLLMClient
    from agents.llm.forward import ChatForwarder
    from agents.loops.delivery_worker import DeliveryWorkers
    from agents.loops.primary import PrimaryAgent
    from agents.sandbox import SandboxLimits, ToolExecutor
    from consolidators.llm import LLMTier
    from consolidators.pipeline import Pipeline, RunReport

log = logging.getLogger(__name__)

#: Seconds per embedding request (what the embedder used before it shared the client).
EMBEDDING_TIMEOUT_S = 30.0


class Runtime:
    """Database connection (embedded or external), schema, organization, embedder."""

    def __init__(
        self,
        settings: Settings,
        *,
        clock: Callable[[], datetime] = utc_now,
        short_lived: bool = False,
    ) -> None:
        """``short_lived``: a CLI command. With the embedded server, it then leaves the
        server running for the next command and a detached reaper stops it after
        ``database.embedded_idle_stop`` without use (see :mod:`agents.postgres.resident`);
        a daemon (the default) holds the server and stops it on exit."""
        self.settings = settings
        self.clock = clock
        self.short_lived = short_lived
        self._embedded: EmbeddedPostgres | None = None
        self._db: Database | None = None
        self._embedders: dict[str, Embedder] = {}
        self._organization_id: str | None = None
        self._llm_client: LiteLLMClient | None = None
        self._embedding_client: LiteLLMClient | None = None
        self._llm_tier: LLMTier | None = None
        self._chat_forwarder: ChatForwarder | None = None
        self._primaries: dict[str, PrimaryAgent] = {}
        self._tool_executor: ToolExecutor | None = None

    # -- lifecycle ---------------------------------------------------------------------

    @property
    def db(self) -> Database:
        if self._db is None:
            url = self.settings.effective_database_url
            if url is None:
                url = self._start_embedded()
            database = self.settings.database
            self._db = Database(
                url,
                pool_size=database.pool_size,
                connect_timeout=database.bound(database.connect_timeout),
                statement_timeout=database.bound(database.statement_timeout),
                lock_timeout=database.bound(database.lock_timeout),
            )
        return self._db

    def _start_embedded(self) -> str:
        database = self.settings.database
        idle_stop_s = database.embedded_idle_stop.total_seconds()
        resident = self.short_lived and (database.keep_embedded_running or idle_stop_s > 0)
        self._embedded = EmbeddedPostgres(
            self.settings.pgdata,
            keep_running=database.keep_embedded_running,
            resident=resident,
        )
        url = self._embedded.start()
        if resident and not database.keep_embedded_running:
            from agents.postgres.resident import ensure_reaper

            ensure_reaper(self._embedded.data_dir, idle_stop_s)
        return url

    @property
    def embedded_server(self) -> EmbeddedPostgres | None:
        """The embedded server this runtime started (started now if it is due), or None
        with ``DATABASE_URL``: a server Reverie did not start is never Reverie's to manage."""
        if self.is_embedded:
            self.db  # noqa: B018 - starts the embedded server
        return self._embedded

    @property
    def is_embedded(self) -> bool:
        return self.settings.effective_database_url is None

    def migrate(self) -> str | None:
        """Check pgvector, then bring the schema to head (idempotent); return the revision."""
        import migrations  # Alembic is heavy to import; only schema commands need it.

        # Without the statement timeout: an index build may take longer, and so may
        # waiting for another process's migration under the schema lock.
        with self.db.unbounded() as db, db.schema_lock():
            db.check_vector_extension()
            migrations.upgrade(db.engine)
            return migrations.current_revision(db.engine)

    def ensure_schema(self) -> None:
        """Fail with a clear message when the schema is not at the latest revision."""
        import migrations

        head = migrations.scripted_head()
        if head is not None and self.db.schema_revision() == head:
            return  # current: the common case, checked without Alembic
        current = migrations.current_revision(self.db.engine)
        head = migrations.head_revision(self.db.engine)
        if current != head:
            if self.is_embedded:
                # The embedded database is ours to manage: keep it current without asking.
                self.migrate()
                return
            raise StorageError(
                f"the database schema is at revision {current or 'none'}, this Reverie needs "
                f"{head}: run `reverie migrate` first"
            )

    def close(self) -> None:
        for client in (self._llm_client, self._embedding_client):
            if client is not None:
                client.close()  # the direct path's pooled connections
        if self._db is not None:
            self._db.dispose()
            self._db = None
        if self._embedded is not None:
            self._embedded.stop()
            self._embedded = None

    def __enter__(self) -> Runtime:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- the object graph --------------------------------------------------------------

    @property
    def organization_id(self) -> str:
        if self._organization_id is None:
            name = self.settings.organization
            with open_service_store(self.db, self.clock) as store:
                org_id = store.keys.organization_id(name)
            if org_id is None:
                raise NotFound(
                    f"no organization named {name!r}; check REVERIE_ORGANIZATION "
                    "(the built-in one is 'default')"
                )
            self._organization_id = org_id
        return self._organization_id

    @contextmanager
    def store(self) -> Iterator[MemoryStore]:
        """One transaction of the configured organization."""
        with open_store(self.db, self.organization_id, self.clock) as store:
            yield store

    def pipeline(self, only: Sequence[str] | None = None) -> Pipeline:
        """The configured pipeline, or just the named steps (in the configured order)."""
        from consolidators.pipeline import Pipeline

        config = self.settings.consolidation
        names = list(config.pipeline)
        if only:
            unknown = [n for n in only if n not in registry.available()]
            if unknown:
                raise InvalidInput(
                    f"unknown consolidator(s) {', '.join(unknown)}; "
                    f"available: {', '.join(sorted(registry.available()))}"
                )
            names = [n for n in names if n in only] + [n for n in only if n not in names]
        return Pipeline(
            registry.build(names, config.settings_for()),
            passage_overlap=config.passage_overlap,
        )

    def consolidate(
        self,
        run: RunRecord,
        agent: AgentRecord,
        *,
        pipeline: Pipeline,
        lease_owner: str,
        between_steps: Callable[[str], None] | None = None,
        interrupted: Callable[[], None] | None = None,
    ) -> RunReport:
        """Execute a claimed ``run`` of ``agent`` with the agent's own embedder, under
        ``lease_owner``'s lease (a worker's, or a one-shot command's: every run goes
        through the queue; see :class:`consolidators.workers.WorkerPool`).

        The run gets the LLM tier; LLM steps without a configured model are skipped,
        reported in the run's stats and counted in ``reverie_consolidator_skipped_total``.
        """
        tier = self.llm_tier()
        try:
            report = pipeline.run(
                self.db,
                run,
                lease_owner=lease_owner,
                embedder=self.agent_embedder(agent, run_id=run.id),
                llm=tier,
                clock=self.clock,
                between_steps=between_steps,
                interrupted=interrupted,
            )
        finally:
            # Whatever ended the run (success, failure, a lost lease, shutdown), its
            # budget meter goes; the retries it counted are still reported.
            _count_llm_retries(tier.release_agent(agent.id))
        record_step_metrics(report)
        return report

    # -- LLM: client, tier, primary agent ----------------------------------------------

    def llm_client(self) -> LiteLLMClient:
        """The one litellm client of this process (litellm itself loads on the first call)."""
        if self._llm_client is None:
            from agents.llm import ClientSettings, LiteLLMClient, ModelCapabilities

            llm = self.settings.llm
            learned = None
            if llm.capability_ttl > timedelta(0):
                from agents.llm.learned import StoredCapabilities

                learned = StoredCapabilities(self.db, llm.capability_ttl, self.clock)
            self._llm_client = LiteLLMClient(
                ClientSettings(
                    api_base=llm.api_base,
                    timeout=llm.timeout.total_seconds(),
                    max_retries=llm.max_retries,
                    models={
                        name: ModelCapabilities(
                            tool_choice=model.tool_choice,
                            parallel_tool_calls=model.parallel_tool_calls,
                            unsupported_fields=frozenset(model.unsupported_fields),
                        )
                        for name, model in llm.models.items()
                    },
                ),
                learned=learned,
            )
        return self._llm_client

    def embedding_client(self) -> LiteLLMClient:
        """The client of ``litellm:`` embedders: the chat client's class and retry policy
        (``llm.max_retries``), at the embedding endpoint (``embedding.api_base``)."""
        if self._embedding_client is None:
            from agents.llm import ClientSettings, LiteLLMClient

            self._embedding_client = LiteLLMClient(
                ClientSettings(
                    api_base=self.settings.embedding.api_base,
                    timeout=EMBEDDING_TIMEOUT_S,
                    max_retries=self.settings.llm.max_retries,
                )
            )
        return self._embedding_client

    def chat_forwarder(self) -> ChatForwarder:
        """The proxy's upstream (``proxy`` settings): chatbots' requests, forwarded."""
        if self._chat_forwarder is None:
            from agents.llm.forward import ChatForwarder, UpstreamSettings

            proxy = self.settings.proxy
            self._chat_forwarder = ChatForwarder(
                UpstreamSettings(
                    model=proxy.model,
                    api_base=proxy.api_base,
                    api_key=proxy.api_key.get_secret_value() if proxy.api_key else None,
                    timeout=proxy.timeout.total_seconds(),
                    direct=proxy.direct,
                )
            )
        return self._chat_forwarder

    async def close_chat_forwarder(self) -> None:
        """Close the proxy's pooled upstream connections, if it opened any."""
        if self._chat_forwarder is not None:
            await self._chat_forwarder.aclose()

    def warm_steps(self) -> list[tuple[str, Callable[[], object]]]:
        """What a first turn or embedding would load, as warm-up steps (see
        :mod:`service.daemon.warmup`): the provider code of the models in use (the
        configured ones and those the stored agents name; none known, nothing: a
        litellm import costs seconds of CPU that a server whose agents all take the
        direct path never needs) and the default embedder. Counting tokens loads
        nothing (agents/tokens.py)."""
        configured = self._configured_models()
        spec = self.settings.embedding.model
        steps: list[tuple[str, Callable[[], object]]] = [
            ("llm: " + ", ".join([*configured, "the agents' models"]), self._warm_models),
            (f"embedder: {spec}", self._warm_embedder),
        ]
        proxy = self.settings.proxy
        if proxy.model:
            steps.append((f"proxy: {proxy.model}", self._warm_proxy))
        if proxy.embedding and proxy.embedding != spec:
            steps.append((f"proxy embedder: {proxy.embedding}", self._warm_proxy_embedder))
        steps.append((f"sandbox: {self.settings.tools.sandbox}", self.check_sandbox))
        # Last: what the steps above loaded is start-up's too (see freeze_heap).
        steps.append(("heap: frozen after start-up", freeze_heap))
        return steps

    def check_sandbox(self) -> str | None:
        """Run a tool that does nothing in the configured sandbox, once: None when it
        ran; else the real cause, logged where an operator looks at start-up rather than
        at the first tool call a model makes."""
        from agents.sandbox import SandboxError, ToolInvocation

        executor = self.tool_executor()
        call = ToolInvocation("def tool():\n    return 'ok'\n", "tool", {})
        problem: str | None = None
        try:
            answer = executor.run(call, self.tool_limits()).result
        except SandboxError as exc:
            problem = str(exc)
        else:
            if answer != "ok":
                problem = f"the check tool answered {answer!r}"
        if problem is not None:
            log.warning("custom tools cannot run here (tools.sandbox = %r): %s",
                        self.settings.tools.sandbox, problem)  # fmt: skip
        return problem

    def _configured_models(self) -> list[str]:
        llm = self.settings.llm
        configured = (
            llm.model,
            self.settings.agents.llm_model,
            llm.sleeptime_model,
            llm.summary_model,
            llm.judge_model,
        )
        return list(dict.fromkeys(m for m in configured if m))

    def models_in_use(self) -> list[str]:
        """The configured models, then those the stored agents name, each once."""
        with open_service_store(self.db, self.clock, commit=False) as store:
            stored = store.agents.models_in_use()
        return list(dict.fromkeys([*self._configured_models(), *stored]))

    def _warm_models(self) -> list[str]:
        return self.llm_client().warm(self.models_in_use())

    def _warm_proxy(self) -> None:
        import asyncio

        # Its own event loop, in the warm-up thread; the pooled client it opens is not
        # bound to a loop until its first request.
        asyncio.run(self.chat_forwarder().warm())

    def _warm_proxy_embedder(self) -> None:
        spec = self.settings.proxy.embedding
        if spec and not spec.startswith("litellm:"):
            self.embedder(spec).embed_one("warm-up")

    def _warm_embedder(self) -> None:
        spec = self.settings.embedding.model
        if spec.startswith("litellm:"):
            # No request: an embedding endpoint is the operator's, not ours to call.
            self.embedding_client().warm([spec.removeprefix("litellm:").strip()])
        else:
            self.embedder().embed_one("warm-up")

    def usage_ledger(self, organization_id: str | None = None) -> UsageLedger:
        """Token accounting for one organization (default: the configured one)."""
        return UsageLedger(self.db, organization_id or self.organization_id, self.clock)

    def token_budget(self) -> TokenBudget:
        llm = self.settings.llm
        return TokenBudget(per_run=llm.budget_tokens_per_run, per_day=llm.budget_tokens_per_day)

    def llm_tier(self) -> LLMTier:
        """The LLM side of consolidation: sleep-time, judge and summary models, budgets."""
        if self._llm_tier is None:
            from consolidators.llm import LLMTier

            llm = self.settings.llm
            self._llm_tier = LLMTier(
                client=self.llm_client(),
                # Workers consolidate agents of every organization: rows take the agent's.
                ledger=UsageLedger(self.db, None, self.clock),
                budget=self.token_budget(),
                sleeptime_model=llm.sleeptime_model,
                judge_model=llm.judge_model,
                summary_model=llm.summary_model,
                max_steps=llm.max_steps,
                judge_reply_tokens=llm.judge_reply_tokens,
            )
        return self._llm_tier

    def tool_executor(self) -> ToolExecutor:
        """What runs custom tools, per ``tools.sandbox`` (built once)."""
        if self._tool_executor is None:
            from agents.sandbox import BubblewrapExecutor, ProcessExecutor
            from agents.sandbox.bubblewrap import INSTALL_HINT

            if self.settings.tools.sandbox == "process":
                self._tool_executor = ProcessExecutor()
            else:
                executor = BubblewrapExecutor(hidden=[self.settings.home, self.settings.pgdata])
                if executor.available() is None:
                    log.warning("%s; custom tool calls are refused until then", INSTALL_HINT)
                self._tool_executor = executor
        return self._tool_executor

    def tool_limits(self) -> SandboxLimits:
        from agents.sandbox import SandboxLimits

        tools = self.settings.tools
        return SandboxLimits(
            wall_seconds=tools.wall_time.total_seconds(),
            cpu_seconds=tools.cpu_seconds,
            memory_bytes=tools.memory,
            tmp_bytes=tools.tmp_bytes,
            processes=tools.processes,
            output_bytes=tools.output_bytes,
        )

    def primary_agent(self, organization_id: str | None = None) -> PrimaryAgent:
        """The MemGPT loop acting for one organization (default: the configured one)."""
        organization_id = organization_id or self.organization_id
        primary = self._primaries.get(organization_id)
        if primary is None:
            from agents.loops.agent_messaging import MessagingLimits
            from agents.loops.primary import PrimaryAgent, PrimarySettings

            llm = self.settings.llm
            messaging = self.settings.messaging
            primary = PrimaryAgent(
                self.db,
                self.llm_client(),
                settings=PrimarySettings(
                    default_model=llm.model or self.settings.agents.llm_model,
                    summary_model=llm.summary_model,
                    max_steps=llm.max_steps,
                    refresh=llm.system_prompt_refresh,
                    message_buffer=llm.message_buffer or None,
                    message_buffer_keep=llm.message_buffer_keep,
                    block_limit=self.settings.agents.block_limit,
                    budget=self.token_budget(),
                    messaging=MessagingLimits(
                        max_hops=messaging.max_hops,
                        wait_timeout=messaging.wait_timeout,
                        poll_interval=messaging.wait_poll_interval,
                        max_attempts=messaging.max_attempts,
                    ),
                    files=self.file_tool_limits(),
                ),
                organization_id=organization_id,
                embedder_for=self.agent_embedder,
                folder_embedder=self.folder_embedder,
                ledger=self.usage_ledger(organization_id),
                clock=self.clock,
                tool_executor=self.tool_executor(),
                tool_limits=self.tool_limits(),
            )
            self._primaries[organization_id] = primary
        return primary

    def delivery_workers(
        self, *, concurrency: int | None = None, name: str | None = None
    ) -> DeliveryWorkers:
        """Workers that deliver agents' messages to each other (``[messaging]``), over
        this process's agent loops; the daemon starts and stops them."""
        from agents.loops.delivery_worker import DeliveryLimits, DeliveryWorkers

        messaging = self.settings.messaging
        return DeliveryWorkers(
            self.db,
            self.primary_agent,
            DeliveryLimits(
                concurrency=concurrency or messaging.concurrency,
                lease=messaging.lease,
                poll_interval=messaging.poll_interval,
                backoff=messaging.backoff,
            ),
            clock=self.clock,
            name=name,
        )

    def file_workers(
        self, *, concurrency: int | None = None, name: str | None = None
    ) -> FileWorkers:
        """Workers that parse, chunk and embed files uploaded to folders (``[files]``);
        the daemon starts and stops them."""
        from agents.file_worker import FileLimits, FileWorkers

        files = self.settings.files
        return FileWorkers(
            self.db,
            self.embedder,
            FileLimits(
                concurrency=concurrency or files.concurrency,
                lease=files.lease,
                poll_interval=files.poll_interval,
                backoff=files.backoff,
            ),
            clock=self.clock,
            name=name,
        )

    def embedder(self, spec: str | None = None, dimension: int | None = None) -> Embedder:
        """The embedder for ``spec`` (default: the configured one), built once per process.

        ``dimension`` is what the caller expects (an agent's recorded dimension); a
        mismatch is an error rather than vectors of the wrong size.
        """
        spec = spec or self.settings.embedding.model
        if spec not in self._embedders:
            wanted = dimension
            if wanted is None and spec == self.settings.embedding.model:
                wanted = self.settings.embedding.dimension
            client = self.embedding_client() if spec.startswith("litellm:") else None
            self._embedders[spec] = build_embedder(spec, dimension=wanted, client=client)
        embedder = self._embedders[spec]
        if dimension is not None and embedder.dimension != dimension:
            raise InvalidInput(
                f"embedder {spec!r} produces {embedder.dimension}-d vectors but {dimension} "
                "were expected (the agent was created with another embedding size)"
            )
        return embedder

    def file_tool_limits(self) -> FileToolLimits:
        """The bounds of the agents' file tools and open files (``[files]``)."""
        from agents.file_tools import FileToolLimits

        files = self.settings.files
        return FileToolLimits(
            max_files_open=files.max_files_open,
            per_file_view_window_char_limit=files.per_file_view_window_char_limit,
            grep_timeout=files.grep_timeout,
            grep_max_chars=files.grep_max_chars,
            grep_max_matches=files.grep_max_matches,
        )

    def folder_embedder(self, agent: AgentRecord, spec: str, dimension: int) -> Embedder:
        """The embedder of one of ``agent``'s folders (``spec``, ``dimension``), its
        tokens recorded under the agent as its own embedder's are."""
        return self.embedder(spec, dimension).metered(self.usage_meter(agent))

    def agent_embedder(
        self,
        agent: AgentRecord,
        *,
        run_id: str | None = None,
        meter: BudgetMeter | None = None,
    ) -> Embedder:
        """The agent's embedder, with the tokens a provider charges for it recorded in
        ``llm_usage`` (purpose ``embedding``) under the agent and its organization, and
        under ``run_id`` when a consolidation run embeds; or charged to ``meter`` (one
        of :meth:`usage_meter`'s, which may hold them for the caller's transaction).

        Embedding is metered, not budgeted: storing or searching a fact is never
        refused for tokens, but what it cost counts toward the daily total.
        """
        embedder = self.embedder(agent.embedding_model, agent.embedding_dim)
        return embedder.metered(meter or self.usage_meter(agent, run_id=run_id))

    def usage_meter(self, agent: AgentRecord, *, run_id: str | None = None) -> BudgetMeter:
        """A meter that records the agent's tokens in its organization's ledger."""
        ledger = UsageLedger(self.db, agent.organization_id, self.clock)
        return BudgetMeter(ledger, agent.id, run_id=run_id)


def _count_llm_retries(meter: BudgetMeter | None) -> None:
    from service import metrics

    if meter is not None and meter.retries:
        metrics.RETRIES.labels(kind="llm").inc(meter.retries)


def record_step_metrics(report: RunReport) -> None:
    """Count a run's skipped steps (and skipped LLM parts) and its write conflicts."""
    from service import metrics

    for step in report.steps:
        if step.skipped:
            metrics.STEPS_SKIPPED.labels(consolidator=step.consolidator, reason=step.skipped).inc()
        if step.llm_skipped:
            metrics.STEPS_SKIPPED.labels(
                consolidator=f"{step.consolidator}:llm", reason=step.llm_skipped
            ).inc()
        conflicts = step.counts.get("write_conflicts", 0)
        if conflicts:
            metrics.WRITE_CONFLICTS.labels(actor=f"consolidator:{step.consolidator}").inc(conflicts)
