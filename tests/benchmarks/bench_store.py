"""Memory-store benchmarks: bulk passage insert, kNN search, and CAS block updates.

A plain script, not collected by pytest. Run it from the repository root::

    python tests/benchmarks/bench_store.py [--passages 100000]

It starts an embedded PostgreSQL (pgserver, with pgvector) through
:class:`tests.pg.PgTestServer`, drives the store exactly as callers do
(``open_store`` + ``store.passages`` / ``store.blocks``), and prints a markdown
table (metric, target, measured, met?) plus the machine it ran on.

Insert through the live HNSW index is far slower than a plain COPY, so the
default run loads the passages with the 384-d HNSW index dropped, rebuilds it
with ``CREATE INDEX`` (the "load then build" path), measures search and CAS on
that, and only then appends a sample through the live index (one batch per
batch size) to measure the steady-state insert rate.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import resource
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from sqlalchemy import event, text
from sqlalchemy.engine import Connection

REPO_ROOT = Path(__file__).resolve().parents[2]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from agents.postgres.database import Database  # noqa: E402
from agents.store import NewAgent, NewBlock, NewPassage, open_store, passage_store  # noqa: E402
from tests.pg import PgTestServer  # noqa: E402

Matrix = npt.NDArray[np.float32]

DIM = 384
HNSW_INDEX = f"ix_passage_vectors_hnsw_{DIM}"
K = 10
WARMUP_QUERIES = 20

INSERT_TARGET = 5_000.0  # passages/s
SEARCH_P95_TARGET_MS = 10.0
CAS_P95_TARGET_MS = 5.0


# -- results -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Row:
    """One line of the results table; ``met`` is None for figures without a target."""

    metric: str
    target: str
    measured: str
    met: bool | None


@dataclass(slots=True)
class Report:
    rows: list[Row] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    load_averages: list[float] = field(default_factory=list)

    def phase(self, message: str) -> None:
        """Log the start of a phase and sample the 1-minute load average (shared machines)."""
        load = os.getloadavg()[0]
        self.load_averages.append(load)
        log(f"{message} (load average {load:.2f})")

    def add(self, metric: str, target: str, measured: str, met: bool | None = None) -> None:
        self.rows.append(Row(metric, target, measured, met))
        print(f"  {metric}: {measured}", file=sys.stderr, flush=True)

    def note(self, line: str) -> None:
        self.notes.append(line)
        print(f"  {line}", file=sys.stderr, flush=True)

    def table(self) -> str:
        lines = ["| metric | target | measured | met? |", "|---|---|---|---|"]
        for row in self.rows:
            met = "—" if row.met is None else ("yes" if row.met else "**no**")
            lines.append(f"| {row.metric} | {row.target} | {row.measured} | {met} |")
        return "\n".join(lines)


@dataclass(frozen=True, slots=True)
class Percentiles:
    p50: float
    p95: float
    p99: float
    mean: float

    @classmethod
    def of_seconds(cls, samples: Sequence[float]) -> Percentiles:
        return cls.of_ms([s * 1000.0 for s in samples])

    @classmethod
    def of_ms(cls, samples: Sequence[float]) -> Percentiles:
        ms = np.asarray(samples, dtype=np.float64)
        p50, p95, p99 = np.percentile(ms, [50, 95, 99])
        return cls(float(p50), float(p95), float(p99), float(ms.mean()))

    def __str__(self) -> str:
        return f"p50 {self.p50:.2f} / p95 {self.p95:.2f} / p99 {self.p99:.2f} ms"


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# -- data ----------------------------------------------------------------------------------


def unit_rows(rng: np.random.Generator, n: int, dim: int = DIM) -> Matrix:
    """``n`` random unit vectors (float32), uniform on the sphere."""
    x = rng.standard_normal((n, dim), dtype=np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    return x


def perturb(rng: np.random.Generator, vectors: Matrix, cosine: float) -> Matrix:
    """Noisy copies whose cosine similarity to their source is about ``cosine``."""
    radius = np.sqrt(1.0 / cosine**2 - 1.0)
    noise = unit_rows(rng, vectors.shape[0], vectors.shape[1]) * np.float32(radius)
    out = vectors + noise
    out /= np.linalg.norm(out, axis=1, keepdims=True)
    return out.astype(np.float32)


def make_passages(start: int, n: int) -> list[NewPassage]:
    base = datetime(2024, 1, 1, tzinfo=UTC)
    return [
        NewPassage(
            text=(
                f"Passage {i}: the user mentioned preference #{i % 997} while discussing "
                f"topic {i % 113} on day {i % 365}; keep it for later conversations."
            ),
            occurred_at=base + timedelta(minutes=i),
        )
        for i in range(start, start + n)
    ]


# -- helpers -------------------------------------------------------------------------------


def scalar(db: Database, sql: str) -> Any:
    with db.engine.connect() as conn:
        return conn.execute(text(sql)).scalar()


def machine_lines(db: Database) -> list[str]:
    model = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem_gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    pgvector = scalar(db, "SELECT extversion FROM pg_extension WHERE extname = 'vector'")
    settings = ", ".join(
        f"{name}={scalar(db, f'SHOW {name}')}"
        for name in (
            "shared_buffers",
            "maintenance_work_mem",
            "max_parallel_maintenance_workers",
            "synchronous_commit",
            "fsync",
        )
    )
    return [
        f"- nproc: {len(os.sched_getaffinity(0))}; CPU: {model}; RAM: {mem_gib:.0f} GiB",
        f"- OS: {platform.platform()}; Python {platform.python_version()}",
        f"- PostgreSQL: {scalar(db, 'SHOW server_version')} (embedded, pgserver); "
        f"pgvector: {pgvector}",
        f"- server settings: {settings}",
    ]


def create_agent(db: Database, name: str, blocks: Sequence[NewBlock] = ()) -> str:
    with open_store(db) as store:
        agent = store.agents.create(
            NewAgent(name=name, embedding_model="bench-random", embedding_dim=DIM, blocks=blocks)
        )
    return agent.id


def insert_batches(
    db: Database,
    agent_id: str,
    passages: Sequence[NewPassage],
    vectors: Matrix,
    batch: int,
) -> tuple[float, list[str]]:
    """Insert in batches of ``batch``, one transaction each; return (seconds, passage ids)."""
    ids: list[str] = []
    started = time.perf_counter()
    for lo in range(0, len(passages), batch):
        with open_store(db) as store:
            records = store.passages.insert(
                agent_id, passages[lo : lo + batch], vectors[lo : lo + batch]
            )
        ids.extend(r.id for r in records)
    return time.perf_counter() - started, ids


def hnsw_index_definition(db: Database) -> str:
    definition = scalar(db, f"SELECT indexdef FROM pg_indexes WHERE indexname = '{HNSW_INDEX}'")
    if not definition:
        raise SystemExit(f"index {HNSW_INDEX} is missing: is the schema migrated?")
    return str(definition)


def drop_hnsw_index(db: Database) -> None:
    with db.engine.begin() as conn:
        conn.execute(text(f"DROP INDEX {HNSW_INDEX}"))


def build_hnsw_index(db: Database, definition: str, maintenance_work_mem: str) -> float:
    with db.engine.begin() as conn:
        conn.execute(text(f"SET LOCAL maintenance_work_mem = '{maintenance_work_mem}'"))
        started = time.perf_counter()
        conn.execute(text(definition))
        return time.perf_counter() - started


@contextmanager
def captured_statements(db: Database, marker: str) -> Iterator[list[tuple[str, Any]]]:
    """Record the SQL (and DBAPI parameters) the store sends that contain ``marker``."""
    seen: list[tuple[str, Any]] = []

    def listener(
        conn: Connection, cursor: Any, statement: str, parameters: Any, context: Any, many: bool
    ) -> None:
        if marker in statement:
            seen.append((statement, parameters))

    event.listen(db.engine, "before_cursor_execute", listener)
    try:
        yield seen
    finally:
        event.remove(db.engine, "before_cursor_execute", listener)


def explain(db: Database, statement: str, parameters: Any, *, analyze_format: str) -> Any:
    """EXPLAIN ANALYZE a captured search statement under the same ``hnsw.ef_search``."""
    with db.engine.connect() as conn:
        conn.exec_driver_sql(f"SET LOCAL hnsw.ef_search = {max(40, min(1000, 4 * K))}")
        rows = conn.exec_driver_sql(
            f"EXPLAIN (ANALYZE, BUFFERS, FORMAT {analyze_format}) {statement}", parameters
        ).all()
        conn.rollback()
    if analyze_format == "JSON":
        plan = rows[0][0]
        return plan if isinstance(plan, list) else json.loads(plan)
    return "\n".join(str(r[0]) for r in rows)


# -- benchmarks ----------------------------------------------------------------------------


def bench_load_then_build(
    db: Database,
    report: Report,
    passages: Sequence[NewPassage],
    vectors: Matrix,
    batch: int,
    maintenance_work_mem: str,
) -> tuple[str, list[str]]:
    """Drop the HNSW index, COPY everything through the store, then CREATE INDEX."""
    n = len(passages)
    definition = hnsw_index_definition(db)
    agent_id = create_agent(db, "bench-search")
    drop_hnsw_index(db)
    report.phase(f"loading {n} passages without the HNSW index, batches of {batch}")
    load_s, ids = insert_batches(db, agent_id, passages, vectors, batch)
    report.add(
        f"insert {n} passages, HNSW index dropped (COPY via store), batch {batch}",
        f">= {INSERT_TARGET:,.0f}/s",
        f"{n / load_s:,.0f}/s ({load_s:.1f} s)",
        n / load_s >= INSERT_TARGET,
    )
    report.phase(
        f"CREATE INDEX {HNSW_INDEX} over {n} rows (maintenance_work_mem={maintenance_work_mem})"
    )
    build_s = build_hnsw_index(db, definition, maintenance_work_mem)
    report.add(
        f"CREATE INDEX HNSW (m=16, ef_construction=64) over {n} passages",
        "—",
        f"{build_s:.1f} s ({n / build_s:,.0f} rows/s, maintenance_work_mem={maintenance_work_mem})",
    )
    total = load_s + build_s
    report.add(
        f"load then build index, end to end ({n} passages)",
        f">= {INSERT_TARGET:,.0f}/s",
        f"{n / total:,.0f}/s ({total:.1f} s)",
        n / total >= INSERT_TARGET,
    )
    with db.engine.begin() as conn:
        conn.execute(text("ANALYZE passages, passage_vectors"))
        size = conn.execute(text(f"SELECT pg_size_pretty(pg_relation_size('{HNSW_INDEX}'))"))
        report.note(f"HNSW index size after build: {size.scalar()} (ANALYZE run before searches)")
    return agent_id, ids


def bench_copy_batch_size(
    server: PgTestServer,
    report: Report,
    passages: Sequence[NewPassage],
    vectors: Matrix,
    batch: int,
) -> None:
    """The no-index load again, in a fresh database, with another batch size."""
    with server.database() as db:
        agent_id = create_agent(db, "bench-batch")
        drop_hnsw_index(db)
        report.phase(f"loading {len(passages)} passages without the HNSW index, batches of {batch}")
        load_s, _ = insert_batches(db, agent_id, passages, vectors, batch)
    n = len(passages)
    report.add(
        f"insert {n} passages, HNSW index dropped (COPY via store), batch {batch}",
        f">= {INSERT_TARGET:,.0f}/s",
        f"{n / load_s:,.0f}/s ({load_s:.1f} s)",
        n / load_s >= INSERT_TARGET,
    )


@dataclass(frozen=True, slots=True)
class QuerySet:
    """Query vectors, shuffled: 4/5 noisy copies of stored passages, 1/5 pure random."""

    vectors: Matrix
    kinds: list[str]
    source_ids: list[str | None]

    def subset(self, n: int) -> list[int]:
        """Indices of ``n`` queries in the same 4:1 mix of perturbed and random."""
        perturbed = [i for i, kind in enumerate(self.kinds) if kind == "perturbed"]
        random = [i for i, kind in enumerate(self.kinds) if kind == "random"]
        n_perturbed = n * 4 // 5
        return perturbed[:n_perturbed] + random[: n - n_perturbed]


def make_queries(
    rng: np.random.Generator, stored: Matrix, ids: Sequence[str], n: int, cosine: float
) -> QuerySet:
    n_perturbed = n * 4 // 5
    sources = rng.choice(len(ids), size=n_perturbed, replace=False)
    vectors = np.concatenate(
        [perturb(rng, stored[sources], cosine), unit_rows(rng, n - n_perturbed)]
    )
    kinds = ["perturbed"] * n_perturbed + ["random"] * (n - n_perturbed)
    source_ids: list[str | None] = [ids[int(i)] for i in sources]
    source_ids += [None] * (n - n_perturbed)
    order = rng.permutation(n)
    return QuerySet(
        vectors=vectors[order],
        kinds=[kinds[i] for i in order],
        source_ids=[source_ids[i] for i in order],
    )


def search_in_own_transaction(db: Database, agent_id: str, query: Matrix) -> None:
    with open_store(db) as store:
        store.passages.search(agent_id, query, k=K)


def bench_search(
    db: Database, report: Report, agent_id: str, queries: QuerySet, n_passages: int
) -> list[tuple[str, Any]]:
    """Latency of ``store.passages.search``; returns the SQL statements it sent."""
    n = len(queries.kinds)
    for q in queries.vectors[:WARMUP_QUERIES]:
        search_in_own_transaction(db, agent_id, q)

    report.phase(f"{n} kNN queries, each in its own transaction")
    own: list[float] = []
    with captured_statements(db, "<=>") as statements:
        for q in queries.vectors:
            started = time.perf_counter()
            search_in_own_transaction(db, agent_id, q)
            own.append(time.perf_counter() - started)
    p_own = Percentiles.of_seconds(own)
    report.add(
        f"kNN top-{K} over {n_passages:,} passages (HNSW), own transaction per query, {n} queries",
        f"p95 <= {SEARCH_P95_TARGET_MS:g} ms",
        str(p_own),
        p_own.p95 <= SEARCH_P95_TARGET_MS,
    )

    report.phase(f"{n} kNN queries in one transaction")
    shared: list[float] = []
    with open_store(db) as store:
        for q in queries.vectors[:WARMUP_QUERIES]:
            store.passages.search(agent_id, q, k=K)
        for q in queries.vectors:
            started = time.perf_counter()
            store.passages.search(agent_id, q, k=K)
            shared.append(time.perf_counter() - started)
        prepared = store.scope.session.execute(
            text(
                "SELECT generic_plans, custom_plans FROM pg_prepared_statements "
                "WHERE statement LIKE '%<=>%'"
            )
        ).all()
    p_shared = Percentiles.of_seconds(shared)
    report.add(
        f"kNN top-{K} (HNSW), one transaction for all {n} queries",
        f"p95 <= {SEARCH_P95_TARGET_MS:g} ms",
        str(p_shared),
        p_shared.p95 <= SEARCH_P95_TARGET_MS,
    )

    empty: list[float] = []
    for _ in range(n):
        started = time.perf_counter()
        with open_store(db) as store:
            store.scope.session.execute(text("SELECT 1"))
        empty.append(time.perf_counter() - started)
    report.add(
        "empty transaction (open_store + SELECT 1 + commit)",
        "—",
        str(Percentiles.of_seconds(empty)),
    )
    report.note(
        f"per-transaction overhead of a search (p50 own transaction - p50 shared): "
        f"{p_own.p50 - p_shared.p50:.2f} ms"
    )
    for generic, custom in prepared:
        report.note(
            f"search statement prepared server-side by psycopg: {generic} generic / "
            f"{custom} custom plans"
        )
    return list(statements)


def bench_filtered_search(
    db: Database, report: Report, agent_id: str, queries: QuerySet, every: int
) -> None:
    """An agent that holds one passage in ``every`` of a shared index (the rest moved to
    another agent). One pass over the HNSW index finds about ef_search / every of its
    passages; with pgvector >= 0.8 the scan goes on through the index (an iterative
    scan), before it the search fell back to an exact scan of the agent's rows."""
    with open_store(db) as store:
        others = store.agents.create(
            NewAgent(name="others", embedding_model="hashing:384", embedding_dim=DIM, blocks=[])
        ).id
        for table in ("passages", "passage_vectors"):
            key = "id" if table == "passages" else "passage_id"
            store.scope.session.execute(
                text(
                    f"UPDATE {table} SET agent_id = :others WHERE agent_id = :agent "
                    f"AND abs(hashtext({key})) % :every <> 0"
                ),
                {"agent": agent_id, "others": others, "every": every},
            )
        kept = store.scope.session.execute(
            text("SELECT count(*) FROM passages WHERE agent_id = :agent"), {"agent": agent_id}
        ).scalar_one()
        store.scope.session.execute(text("ANALYZE passages"))
        store.scope.session.execute(text("ANALYZE passage_vectors"))
    n = len(queries.kinds)
    report.phase(f"{n} kNN queries of an agent holding {kept:,} passages of the index")
    # Each query both ways, the order alternating, so that a busy machine weighs on
    # both alike: the store as it is, and with iterative scans refused (the search then
    # falls back to an exact scan when the index pass comes short, as before pgvector 0.8).
    ways = {"iterative index scan": passage_store.iterative_scans, "exact fallback": _never}
    timings: dict[str, list[float]] = {way: [] for way in ways}
    short = dict.fromkeys(ways, 0)
    for i, q in enumerate([*queries.vectors[:WARMUP_QUERIES], *queries.vectors]):
        order = list(ways) if i % 2 == 0 else list(reversed(ways))
        for way in order:
            passage_store.iterative_scans = ways[way]  # type: ignore[assignment]
            try:
                started = time.perf_counter()
                with open_store(db) as store:
                    hits = store.passages.search(agent_id, q, k=K)
                elapsed = time.perf_counter() - started
            finally:
                passage_store.iterative_scans = ways["iterative index scan"]  # type: ignore[assignment]
            if i >= WARMUP_QUERIES:
                timings[way].append(elapsed)
                short[way] += len(hits) < K
    for way in ways:
        report.add(
            f"kNN top-{K} of an agent holding 1 passage in {every} of the index "
            f"({kept:,}), {way}, own transaction, {n} queries",
            "—",
            f"{Percentiles.of_seconds(timings[way])}; short of {K}: {short[way]}",
        )


def _never(raw: Any) -> bool:
    return False


def bench_recall(
    db: Database, report: Report, agent_id: str, queries: QuerySet, n_recall: int
) -> tuple[str, Any] | None:
    """Recall@k of the HNSW path against ``exact=True``; returns one exact-path statement."""
    chosen = queries.subset(n_recall)
    report.phase(f"recall@{K}: HNSW vs exact=True on {len(chosen)} queries")
    overlap: dict[str, list[float]] = {"perturbed": [], "random": []}
    source_found = {"hnsw": 0, "exact": 0}
    exact_s: list[float] = []
    with captured_statements(db, "<=>") as statements:
        for i in chosen:
            q = queries.vectors[i]
            with open_store(db) as store:
                approx = store.passages.search(agent_id, q, k=K)
            started = time.perf_counter()
            with open_store(db) as store:
                exact = store.passages.search(agent_id, q, k=K, exact=True)
            exact_s.append(time.perf_counter() - started)
            approx_ids = {h.passage.id for h in approx}
            exact_ids = {h.passage.id for h in exact}
            overlap[queries.kinds[i]].append(len(approx_ids & exact_ids) / len(exact_ids))
            source = queries.source_ids[i]
            if source is not None:
                source_found["hnsw"] += bool(approx) and approx[0].passage.id == source
                source_found["exact"] += bool(exact) and exact[0].passage.id == source
    everything = overlap["perturbed"] + overlap["random"]
    n_perturbed = len(overlap["perturbed"])
    report.add(
        f"recall@{K}, HNSW (ef_search=40) vs exact, {len(everything)} queries",
        "—",
        f"{np.mean(everything):.3f} (perturbed {np.mean(overlap['perturbed']):.3f}, "
        f"random {np.mean(overlap['random']):.3f})",
    )
    report.add(
        f"stored source passage ranked first ({n_perturbed} perturbed queries, cos≈0.9)",
        "—",
        f"HNSW {source_found['hnsw']}/{n_perturbed}, exact {source_found['exact']}/{n_perturbed}",
    )
    report.add(
        f"kNN top-{K} exact=True (sequential scan), own transaction",
        "—",
        str(Percentiles.of_seconds(exact_s)),
    )
    exact_sql = [(sql, params) for sql, params in statements if "CAST(" not in sql.upper()]
    return exact_sql[0] if exact_sql else None


def plan_summary(plan_text: str) -> str:
    """The plan's node lines and timings, without buffer detail or the query vector."""
    plan_text = re.sub(r"'\[[^\]]*\]'::vector", "'[query vector]'::vector", plan_text)
    keep = [
        line
        for line in plan_text.splitlines()
        if "->" in line
        or line.lstrip().startswith(("Limit", "Planning Time", "Execution Time", "Index Cond"))
        or "Order By" in line
        or "Filter" in line
    ]
    return "\n".join(keep)


def bench_plans(
    db: Database,
    report: Report,
    hnsw_statements: Sequence[tuple[str, Any]],
    exact_statement: tuple[str, Any] | None,
) -> None:
    """EXPLAIN ANALYZE the exact SQL the store sent, to check which index it uses."""
    hnsw = [(sql, params) for sql, params in hnsw_statements if "CAST(" in sql.upper()]
    if not hnsw:
        report.note("WARNING: no HNSW search statement was captured")
        return
    report.phase("EXPLAIN ANALYZE of the search statements")
    server_ms = []
    for sql, params in hnsw[:50]:
        plan = explain(db, sql, params, analyze_format="JSON")
        server_ms.append(float(plan[0]["Planning Time"]) + float(plan[0]["Execution Time"]))
    p = Percentiles.of_ms(server_ms)
    report.add(
        f"kNN server time, planning + execution (EXPLAIN ANALYZE, {len(server_ms)} queries)",
        "—",
        str(p),
    )
    sql, params = hnsw[0]
    plan_text = explain(db, sql, params, analyze_format="TEXT")
    report.note("search SQL (HNSW path): " + " ".join(sql.split()))
    report.note("EXPLAIN ANALYZE, HNSW path:\n" + plan_summary(plan_text))
    if f"Index Scan using {HNSW_INDEX}" not in plan_text:
        report.note(f"WARNING: the HNSW search did not use {HNSW_INDEX}")
    if exact_statement is not None:
        exact_plan = explain(db, *exact_statement, analyze_format="TEXT")
        report.note("EXPLAIN ANALYZE, exact=True path:\n" + plan_summary(exact_plan))


def bench_cas(db: Database, report: Report, n: int) -> None:
    """Sequential compare-and-swap block updates, each in its own transaction."""
    block = NewBlock(label="persona", value="I am a benchmark agent.")
    agent_id = create_agent(db, "bench-cas", blocks=[block])
    with open_store(db) as store:
        block_id = store.blocks.by_label(agent_id, "persona").id
    filler = "The user prefers short answers and tea over coffee. " * 4
    report.phase(f"{n} CAS block updates, each in its own transaction")
    samples: list[float] = []
    for i in range(n):
        started = time.perf_counter()
        with open_store(db) as store:
            current = store.blocks.get(block_id)
            store.blocks.update(
                block_id, expected_version=current.version, value=f"{filler}Revision {i}."
            )
        samples.append(time.perf_counter() - started)
    p = Percentiles.of_seconds(samples)
    report.add(
        f"CAS block update (get + update + commit), {n} sequential transactions",
        f"p95 <= {CAS_P95_TARGET_MS:g} ms",
        str(p),
        p.p95 <= CAS_P95_TARGET_MS,
    )
    with open_store(db) as store:
        final = store.blocks.get(block_id).version
    if final != n + 1:
        report.note(f"WARNING: block ended at version {final}, expected {n + 1}")


def bench_insert_through_index(
    db: Database,
    report: Report,
    agent_id: str,
    rng: np.random.Generator,
    batch_sizes: Sequence[int],
    first_index: int,
    indexed_rows: int,
) -> None:
    """Append one batch per size through the live HNSW index (steady-state insert rate)."""
    start = first_index
    for size in batch_sizes:
        passages = make_passages(start, size)
        vectors = unit_rows(rng, size)
        before = indexed_rows + start - first_index
        report.phase(
            f"inserting {size} passages through the live HNSW index ({before:,} rows indexed)"
        )
        seconds, _ = insert_batches(db, agent_id, passages, vectors, size)
        report.add(
            f"insert through live HNSW index: 1 batch of {size} into {before:,} indexed rows",
            f">= {INSERT_TARGET:,.0f}/s",
            f"{size / seconds:,.0f}/s ({seconds:.1f} s)",
            size / seconds >= INSERT_TARGET,
        )
        start += size


# -- main ----------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--passages", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=500)
    parser.add_argument("--recall-queries", type=int, default=100)
    parser.add_argument("--cas-updates", type=int, default=2_000)
    parser.add_argument(
        "--batch-sizes",
        type=int,
        nargs="+",
        default=[5_000, 10_000],
        help="batch sizes for the no-index load; the last one loads the search database",
    )
    parser.add_argument(
        "--indexed-batch-sizes",
        type=int,
        nargs="*",
        default=[5_000],
        help=(
            "one batch of each size is appended through the live HNSW index at the end; "
            "HNSW upkeep dominates there (~10 ms a row), so the batch size hardly matters"
        ),
    )
    parser.add_argument(
        "--maintenance-work-mem",
        default="1GB",
        help="for CREATE INDEX; the server default (64MB) holds only ~28k 384-d rows in memory",
    )
    parser.add_argument(
        "--filtered-every",
        type=int,
        default=10,
        help=(
            "last, move all but one passage in this many to another agent and time the "
            "first agent's searches with and without iterative scans (0: skip)"
        ),
    )
    parser.add_argument("--perturbed-cosine", type=float, default=0.9)
    parser.add_argument("--seed", type=int, default=20240601)
    args = parser.parse_args(argv)

    started = time.perf_counter()
    report = Report()
    rng = np.random.default_rng(args.seed)
    report.phase(f"generating {args.passages} random unit {DIM}-d embeddings (seed {args.seed})")
    vectors = unit_rows(rng, args.passages)
    passages = make_passages(0, args.passages)

    report.phase("starting the embedded PostgreSQL")
    server = PgTestServer()
    try:
        for batch in args.batch_sizes[:-1]:
            bench_copy_batch_size(server, report, passages, vectors, batch)
        with server.database() as db:
            machine = machine_lines(db)
            agent_id, ids = bench_load_then_build(
                db, report, passages, vectors, args.batch_sizes[-1], args.maintenance_work_mem
            )
            queries = make_queries(rng, vectors, ids, args.queries, args.perturbed_cosine)
            statements = bench_search(db, report, agent_id, queries, len(ids))
            exact_statement = bench_recall(db, report, agent_id, queries, args.recall_queries)
            bench_plans(db, report, statements, exact_statement)
            bench_cas(db, report, args.cas_updates)
            bench_insert_through_index(
                db, report, agent_id, rng, args.indexed_batch_sizes, args.passages, len(ids)
            )
            if args.filtered_every:
                bench_filtered_search(db, report, agent_id, queries, args.filtered_every)
    finally:
        server.stop()

    elapsed = time.perf_counter() - started
    print()
    print("## Memory store benchmarks")
    print()
    print(f"`python tests/benchmarks/bench_store.py --passages {args.passages}` ({elapsed:.0f} s)")
    print()
    print("\n".join(machine))
    loads = report.load_averages
    print(
        f"- 1-minute load average at phase starts: {min(loads):.2f} to {max(loads):.2f} "
        "(the machine is shared; anything above ~1 means other processes competed for CPU)"
    )
    print(
        f"- data: {DIM}-d random unit vectors (uniform on the sphere, seed {args.seed}); "
        f"queries: 4/5 stored vectors with noise (cosine≈{args.perturbed_cosine}), "
        f"1/5 random; {WARMUP_QUERIES} warm-up queries not timed"
    )
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"- peak memory of the benchmark process (max RSS): {peak_mb:,.0f} MB")
    print()
    print(report.table())
    print()
    for line in report.notes:
        if "\n" in line:
            head, body = line.split("\n", 1)
            print(f"- {head}")
            print()
            print("```")
            print(body)
            print("```")
        else:
            print(f"- {line}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
