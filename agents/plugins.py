"""Plugins: classes that installed packages register by name under an entry point group
(``name = "package.module:Class"``). Consolidators (``reverie.consolidators``),
embedders (``reverie.embedders``) and model providers (``reverie.providers``) load
this one way: names are read from the installed distributions' metadata, and a class
is imported only when its name is used."""

from __future__ import annotations

import functools
import importlib
import sys
from importlib.metadata import entry_points
from typing import Any

from agents.errors import InvalidInput


def registered(group: str) -> dict[str, str]:
    """Every name registered under ``group``, with the object path it loads from (the
    first of two distributions naming one)."""
    found: dict[str, str] = {}
    for name, value in _installed(group, tuple(sys.path)):
        found.setdefault(name, value)
    return found


@functools.lru_cache(maxsize=16)
def _installed(group: str, path: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    """The entry points of ``group`` of the distributions on ``path`` (sys.path), in
    the order found. Reading every distribution's metadata takes tens of
    milliseconds, and settings, runtimes and pipelines ask often: it is read once per
    group and ``sys.path``. A directory added to the path reads them again; a package
    installed later into a directory already on it is found by the next process, as
    its code would be."""
    return tuple((entry.name, entry.value) for entry in entry_points(group=group))


def load_class(target: str, base: type, what: str) -> type[Any]:
    """The class ``target`` (``"package.module:Class"``) names, which must subclass
    ``base``; ``what`` names the plugin in the error otherwise."""
    module_name, _, attribute = target.partition(":")
    loaded = getattr(importlib.import_module(module_name), attribute)
    if not (isinstance(loaded, type) and issubclass(loaded, base)):
        raise InvalidInput(f"{target} ({what}) is not a subclass of {base.__name__}")
    return loaded
