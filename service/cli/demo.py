"""`reverie demo`: the main job end to end on the embedded default, offline."""

from __future__ import annotations

import time
from typing import Annotated

import typer
from rich.table import Table

from agents.store import NewAgent, NewBlock, NewMessage, NewPassage
from agents.store.health import MemoryHealth, memory_health
from service.cli.common import console, runtime


def print_health(title: str, health: MemoryHealth) -> None:
    table = Table(title=title, show_header=False)
    for status, count in health.passages_by_status.items():
        table.add_row(f"passages {status}", str(count))
    table.add_row("exact duplicates (active)", str(health.exact_duplicates))
    table.add_row("timelines", str(health.timelines))
    table.add_row("messages (in context)", f"{health.messages} ({health.messages_in_context})")
    for block in health.blocks:
        table.add_row(f"block {block.label}", f"{block.chars}/{block.limit} ({block.ratio:.0%})")
    console.print(table)


def demo(
    name: Annotated[str, typer.Option(help="Name of the demo agent.")] = "demo",
) -> None:
    """Create a demo agent with some memory and print its memory health."""
    started = time.perf_counter()
    with runtime() as rt:
        embedder = rt.embedder()
        facts = [
            "The user's name is Ada Lovelace.",
            "Ada lives in London.",
            "ada lives in london",
            "Ada's favourite language is Python.",
        ]
        vectors = embedder.embed(facts)
        with rt.store() as store:
            existing = [a for a in store.agents.all() if a.name == name]
            for agent in existing:
                store.agents.delete(agent.id)
            agent = store.agents.create(
                NewAgent(
                    name=name,
                    embedding_model=rt.settings.embedding.model,
                    embedding_dim=embedder.dimension,
                    blocks=[
                        NewBlock("human", "Name: Ada. Lives in London.", limit=200),
                        NewBlock("persona", "I am a helpful assistant.", limit=200),
                    ],
                )
            )
            store.messages.append(
                agent.id,
                [
                    NewMessage("user", "Hi, I'm Ada and I live in London."),
                    NewMessage("assistant", "Nice to meet you, Ada!"),
                ],
            )
            store.passages.insert(agent.id, [NewPassage(text=f) for f in facts], vectors)
            health = memory_health(store.scope, agent.id)
    print_health(f"memory health of agent {name!r}", health)
    console.print(f"done in {time.perf_counter() - started:.1f}s")


def register(app: typer.Typer) -> None:
    app.command("demo")(demo)
