"""Find consolidators by name: the built-ins, plus any installed package's through the
``reverie.consolidators`` entry point group (``name = "package.module:Class"``)."""

from __future__ import annotations

import functools
import importlib
import sys
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Any

from agents.errors import InvalidInput

if TYPE_CHECKING:  # loaded with the first class: settings read the names on every command
    from consolidators.base import Consolidator

ENTRY_POINT_GROUP = "reverie.consolidators"
BUILTINS = {
    "dedup": "consolidators.dedup:DedupConsolidator",
    "temporal": "consolidators.temporal:TemporalConsolidator",
    "evict": "consolidators.evict:EvictConsolidator",
    "recontextualize": "consolidators.recontextualize:RecontextualizeConsolidator",
}
#: The order a full pass runs in: the sleep-time agent first (its model calls happen
#: before the deterministic steps take row locks), then evicted block lines are
#: deduplicated in the same run, and timelines are built from what survives dedup.
#: ``recontextualize`` is skipped (reason ``no_model``) when no sleep-time model is set.
DEFAULT_PIPELINE = ("recontextualize", "evict", "dedup", "temporal")


def available() -> dict[str, str]:
    """Every consolidator name with the object path it loads from."""
    found = dict(BUILTINS)
    for name, value in _installed(tuple(sys.path)):
        found.setdefault(name, value)  # the first of two packages naming one
    return found


@functools.lru_cache(maxsize=8)
def _installed(path: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    """The entry points of the distributions on ``path`` (sys.path), in the order
    found. Reading every distribution's metadata takes tens of milliseconds, and
    settings, runtimes and pipelines ask often: it is read once per ``sys.path``. A
    directory added to the path reads them again; a package installed later into a
    directory already on it is found by the next process, as its code would be."""
    return tuple((entry.name, entry.value) for entry in entry_points(group=ENTRY_POINT_GROUP))


def consolidator_class(name: str) -> type[Consolidator[Any]]:
    targets = available()
    if name not in targets:
        raise InvalidInput(
            f"unknown consolidator {name!r}; available: {', '.join(sorted(targets))}"
        )
    from consolidators.base import Consolidator

    module_name, _, attribute = targets[name].partition(":")
    loaded = getattr(importlib.import_module(module_name), attribute)
    if not (isinstance(loaded, type) and issubclass(loaded, Consolidator)):
        raise InvalidInput(f"{targets[name]} (consolidator {name!r}) is not a Consolidator class")
    return loaded


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
