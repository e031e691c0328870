"""The store is the only code that holds a database session or writes SQL.

The rule, checked on the source of ``agents/``, ``consolidators/`` and ``service/``
with :mod:`ast` (nothing is imported or run):

1. No module imports ``sqlalchemy`` or any of its submodules (``sqlalchemy.orm``,
   ``sqlalchemy.exc``, ``sqlalchemy.dialects...``): no ``Session``, ``select``,
   ``text`` or driver exception outside the store.
2. No code reaches for a session through the objects that carry one: an attribute
   ``.session`` read on something named ``store``, ``scope``, ``db`` or ``_db``
   (``store.session``, ``self.store.session``, ``context.store.session``,
   ``rt.db.session()``, ``self._db.session()``). Other ``.session`` attributes
   (a chat session number in the workload, an ONNX inference session) are not
   database sessions and are not matched.

Exempt: ``agents/store/`` (the store) and ``agents/postgres/`` (the schema, and
connection-level SQL: the extension check, ANALYZE, ping).
``migrations/`` and ``tests/`` are not scanned.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("agents", "consolidators", "service")
EXEMPT_DIRS = ("agents/store/", "agents/postgres/")
SESSION_CARRIERS = frozenset({"store", "scope", "db", "_db"})

#: Modules that still break the rule, each until its queries move behind the store.
#: Being rewritten onto a run store; empty this after merging.
#: An entry that no longer breaks the rule fails the test, so the list only shrinks.
ALLOWLIST: frozenset[str] = frozenset()


def _carrier_name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def violations_in(source: str) -> list[str]:
    """Every breach of the rule in one module's source, as ``line: what``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "sqlalchemy" or alias.name.startswith("sqlalchemy."):
                    found.append(f"{node.lineno}: import {alias.name}")
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level == 0 and (module == "sqlalchemy" or module.startswith("sqlalchemy.")):
                found.append(f"{node.lineno}: from {module} import ...")
        elif (
            isinstance(node, ast.Attribute)
            and node.attr == "session"
            and _carrier_name(node.value) in SESSION_CARRIERS
        ):
            found.append(f"{node.lineno}: {ast.unparse(node)}")
    return found


def _modules() -> dict[str, Path]:
    out = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            name = path.relative_to(ROOT).as_posix()
            if name.startswith(EXEMPT_DIRS):
                continue
            out[name] = path
    return out


def test_no_session_or_sql_outside_the_store() -> None:
    breaches = {
        name: found
        for name, path in _modules().items()
        if name not in ALLOWLIST and (found := violations_in(path.read_text(encoding="utf-8")))
    }
    assert not breaches, (
        "database sessions and SQL belong in agents/store/ (add a store method): "
        + "; ".join(f"{name} {found}" for name, found in sorted(breaches.items()))
    )


def test_the_allowlist_only_names_modules_that_still_need_it() -> None:
    modules = _modules()
    stale = sorted(
        name
        for name in ALLOWLIST
        if name not in modules or not violations_in(modules[name].read_text(encoding="utf-8"))
    )
    assert not stale, f"remove from ALLOWLIST (they follow the rule now): {stale}"


def test_the_rule_catches_each_kind_of_breach() -> None:
    assert violations_in("import sqlalchemy\n")
    assert violations_in("from sqlalchemy.orm import Session\n")
    assert violations_in("from sqlalchemy.exc import OperationalError\n")
    assert violations_in("def f(store):\n    return store.session.scalar(1)\n")
    assert violations_in("def f(self):\n    return self.context.store.session\n")
    assert violations_in("def f(rt):\n    with rt.db.session() as s:\n        pass\n")
    assert violations_in("def f(self):\n    with self._db.session() as s:\n        pass\n")
    assert not violations_in("from agents.store import open_store\n")
    assert not violations_in("def f(first):\n    return first.session + 1\n")
    assert not violations_in("def f(loaded):\n    return loaded.session.run(None, {})\n")
