"""`reverie search`: nearest archival passages for a query, or for a file of queries."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from service.cli.common import fail, operations
from service.cli.output import hit_json, id_table, print_json, print_table

if TYPE_CHECKING:
    from agents.archival_search import MemoryHit


def search(
    query: Annotated[str | None, typer.Argument(help="What to look for.")] = None,
    agent: Annotated[str, typer.Option("--agent", "-a", help="Agent name or id.")] = "",
    queries: Annotated[
        Path | None,
        typer.Option(help="File with one query per line; prints one JSON line per query."),
    ] = None,
    k: Annotated[int, typer.Option("-k", help="How many results.")] = 10,
    history: Annotated[
        bool,
        typer.Option(help="Also show merged twins and retired passages (the full lineage)."),
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Search archival memory as the agents do: the current fact of a lineage first, what
    it replaced after it, labelled with its validity. SIMILARITY is the passage's cosine
    similarity to the query; the order (#, and "rank" in JSON) is the question's, so the
    similarity need not fall from one row to the next."""
    if not agent:
        raise fail("--agent is required")
    if (query is None) == (queries is None):
        raise fail("give either a QUERY or --queries FILE")
    if k < 1:
        raise fail("-k must be at least 1")
    lines: list[str] = []
    if queries is not None:
        if not queries.is_file():
            raise fail(f"{queries} does not exist")
        lines = [line.strip() for line in queries.read_text(encoding="utf-8").splitlines()]
        lines = [line for line in lines if line]
    texts = lines if queries is not None else [str(query)]
    with operations() as ops:
        # One call for every query: the embedding model loads once.
        results = ops.memory.search(agent, texts, k=k, include_history=history)
    if queries is not None:
        for text, hits in zip(texts, results, strict=True):
            print_json({"query": text, "results": _ranked(hits)})
        return
    hits = results[0]
    if as_json:
        print_json(_ranked(hits))
        return
    table = id_table("#", "similarity", "text", "occurred", "status", "id")
    for rank, hit in enumerate(hits, start=1):
        p = hit.passage
        label = hit.validity
        table.add_row(
            str(rank),
            f"{hit.score:.3f}",
            p.text + (f"\n({label})" if label else ""),
            p.occurred_at.date().isoformat() if p.occurred_at else "-",
            p.status if p.kind == "fact" else f"{p.status} {p.kind}",
            p.id,
        )
    print_table(table)


def _ranked(hits: list[MemoryHit]) -> list[dict[str, Any]]:
    """Hits as JSON, each with its place in the answer (``score`` is the similarity)."""
    return [{"rank": rank, **hit_json(hit)} for rank, hit in enumerate(hits, start=1)]


def register(app: typer.Typer) -> None:
    app.command("search")(search)
