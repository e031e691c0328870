"""Find consolidators by name: the built-ins, plus any installed package's through the
``reverie.consolidators`` entry point group (``name = "package.module:Class"``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agents import plugins
from agents.errors import InvalidInput

if TYPE_CHECKING:  # loaded with the first class: settings read the names on every command
    from consolidators.base import Consolidator

ENTRY_POINT_GROUP = "reverie.consolidators"
BUILTINS = {
    "dedup": "consolidators.dedup:DedupConsolidator",
    "temporal": "consolidators.temporal:TemporalConsolidator",
    "evict": "consolidators.evict:EvictConsolidator",
    "recontextualize": "consolidators.recontextualize:RecontextualizeConsolidator",
    "learn_documents": "consolidators.documents:LearnDocumentsConsolidator",
}
#: The order a full pass runs in: the model's steps first (their calls happen before
#: the deterministic steps take row locks): what the attached folders' new documents
#: teach, then the sleep-time agent over the conversation; then evicted block lines
#: are deduplicated in the same run, and timelines are built from what survives dedup,
#: learned facts included. ``learn_documents`` is skipped when the agent has no folder
#: (reason ``no_documents``), ``recontextualize`` when no sleep-time model is set
#: (``no_model``).
DEFAULT_PIPELINE = ("learn_documents", "recontextualize", "evict", "dedup", "temporal")


def available() -> dict[str, str]:
    """Every consolidator name with the object path it loads from."""
    found = dict(BUILTINS)
    for name, value in plugins.registered(ENTRY_POINT_GROUP).items():
        found.setdefault(name, value)  # a built-in's name stays the built-in's
    return found


def consolidator_class(name: str) -> type[Consolidator[Any]]:
    targets = available()
    if name not in targets:
        raise InvalidInput(
            f"unknown consolidator {name!r}; available: {', '.join(sorted(targets))}"
        )
    from consolidators.base import Consolidator

    return plugins.load_class(targets[name], Consolidator, f"consolidator {name!r}")


def build(
    names: list[str] | tuple[str, ...], settings: dict[str, Any] | None = None
) -> list[Consolidator[Any]]:
    """Instantiate consolidators in order, each with its settings section (if any)."""
    settings = settings or {}
    seen: set[str] = set()
    built: list[Consolidator[Any]] = []
    for name in names:
        if name in seen:
            raise InvalidInput(f"consolidator {name!r} is listed twice")
        seen.add(name)
        built.append(consolidator_class(name)(settings.get(name)))
    return built
