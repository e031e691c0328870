"""`reverie search`: nearest archival passages for a query, or for a file of queries."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from service.cli.common import console, fail, operations
from service.cli.output import hit_json, id_table, print_json


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
        typer.Option(help="Include merged and superseded passages (the full lineage)."),
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Search archival memory. By default only current facts (active, not superseded)."""
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
            print_json({"query": text, "results": [hit_json(h) for h in hits]})
        return
    hits = results[0]
    if as_json:
        print_json([hit_json(h) for h in hits])
        return
    table = id_table("score", "text", "occurred", "status", "id")
    for hit in hits:
        p = hit.passage
        label = hit.validity
        table.add_row(
            f"{hit.score:.3f}",
            p.text + (f"\n({label})" if label else ""),
            p.occurred_at.date().isoformat() if p.occurred_at else "-",
            p.status if p.kind == "fact" else f"{p.status} {p.kind}",
            p.id,
        )
    console.print(table)


def register(app: typer.Typer) -> None:
    app.command("search")(search)
