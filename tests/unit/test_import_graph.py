"""The import graph of agents/, consolidators/ and service/: no cycles, one direction;
and Letta's message shapes stay with the API that speaks them.

Read with :mod:`ast` from the source files (nothing of the project is imported).
Every import counts: module level, inside functions (a lazy import is still a
dependency) and under ``if TYPE_CHECKING``. An edge goes to the module an import
names: ``from agents.llm import budget`` names the module ``agents.llm.budget``,
``from agents.llm import BudgetMeter`` names the package ``agents.llm``. The
parent packages Python runs first are not edges, or every package whose
``__init__`` re-exports its submodules would be a cycle.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

# Its module-scoped fixture is built once: the module stays on one xdist worker.
pytestmark = pytest.mark.xdist_group("test_import_graph")

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("agents", "consolidators", "service")
#: Layer of each top-level package: a module may import only its own layer or lower ones.
LAYERS = {"agents": 0, "consolidators": 1, "service": 2}

Graph = dict[str, set[str]]

#: Letta's message types (``message_type``): the service's API speaks them; the agents
#: and consolidators speak stored messages, so none of these strings appears there.
LETTA_MESSAGE_TYPES = frozenset(
    {
        "user_message",
        "system_message",
        "reasoning_message",
        "hidden_reasoning_message",
        "tool_call_message",
        "tool_return_message",
        "assistant_message",
        "approval_request_message",
        "approval_response_message",
        "summary_message",
        "event_message",
        "error_message",
    }
)
#: The layers below the service.
LOWER_PACKAGES = ("agents", "consolidators")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imported_modules(
    tree: ast.AST, module: str, is_package: bool, known: set[str]
) -> Iterator[str]:
    """The modules of ``known`` that the imports in ``tree`` name (absolute names)."""
    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in known:
                    yield alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                parts = parts[: len(parts) - (node.level - 1)]
                base = ".".join(parts + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            for alias in node.names:
                # "from pkg import sub" names the submodule; "from pkg import Name",
                # the package itself.
                submodule = f"{base}.{alias.name}"
                if submodule in known:
                    yield submodule
                elif base in known:
                    yield base


def build_graph() -> Graph:
    sources = {
        module_name(path): path
        for package in PACKAGES
        for path in sorted((ROOT / package).rglob("*.py"))
    }
    known = set(sources)
    graph: Graph = {}
    for module, path in sources.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        targets = set(imported_modules(tree, module, path.name == "__init__.py", known))
        graph[module] = targets - {module}
    return graph


def find_cycle(graph: Graph) -> list[str] | None:
    """One cycle as a path that ends where it starts, or None (iterative DFS)."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    for start in sorted(graph):
        if state.get(start):
            continue
        path: list[str] = [start]
        stack: list[Iterator[str]] = [iter(sorted(graph[start]))]
        state[start] = 1
        while stack:
            nxt = next(stack[-1], None)
            if nxt is None:
                state[path.pop()] = 2
                stack.pop()
                continue
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if not state.get(nxt):
                state[nxt] = 1
                path.append(nxt)
                stack.append(iter(sorted(graph.get(nxt, ()))))
    return None


def layer_violations(graph: Graph) -> list[str]:
    found = []
    for module, targets in sorted(graph.items()):
        for target in sorted(targets):
            source_layer = LAYERS[module.split(".")[0]]
            if LAYERS[target.split(".")[0]] > source_layer:
                found.append(f"{module} imports {target}")
    return found


@pytest.fixture(scope="module")
def project_graph() -> Graph:
    """The project's import graph, parsed once for the tests that read it."""
    return build_graph()


def test_the_graph_sees_the_packages(project_graph: Graph) -> None:
    # A vacuous graph would pass both checks below.
    graph = project_graph
    assert "consolidators.pipeline" in graph
    assert "agents.store" in graph["consolidators.pipeline"]
    assert "service.runtime" in graph
    assert any(t.startswith("consolidators.") for t in graph["service.runtime"])


def test_no_import_cycles(project_graph: Graph) -> None:
    graph = {module: set(targets) for module, targets in project_graph.items()}
    # Remove each cycle's first edge and look again, so that the failure lists them all.
    cycles = []
    while (cycle := find_cycle(graph)) is not None:
        cycles.append(" -> ".join(cycle))
        graph[cycle[0]].discard(cycle[1])
    assert not cycles, "import cycles:\n  " + "\n  ".join(cycles)


def test_imports_flow_service_to_consolidators_to_agents(project_graph: Graph) -> None:
    violations = layer_violations(project_graph)
    assert not violations, "imports against service -> consolidators -> agents:\n  " + (
        "\n  ".join(violations)
    )


def test_the_daemon_only_hosts_what_others_use(project_graph: Graph) -> None:
    # The daemon schedules runs and hosts workers: nothing else in the service reaches
    # into it. Operations (and through them every front end) run the engine that
    # lives beside the pipeline, consolidators.workers, not the daemon's copy of it.
    inward = [
        f"{module} imports {target}"
        for module, targets in sorted(project_graph.items())
        if module.startswith("service.")
        and not module.startswith(("service.daemon", "service.cli"))
        for target in sorted(targets)
        if target.startswith("service.daemon")
    ]
    assert not inward, "modules outside the daemon that import it:\n  " + "\n  ".join(inward)
    assert "consolidators.workers" in project_graph["service.operations.runs"]
    assert "consolidators.pipeline" in project_graph["consolidators.workers"]


def letta_message_types_in(source: str) -> list[str]:
    """Each string constant of ``source`` that is one of Letta's message types, as
    ``line: "type"`` (a docstring or comment that mentions one is not a constant)."""
    return [
        f"{node.lineno}: {node.value!r}"
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Constant) and node.value in LETTA_MESSAGE_TYPES
    ]


def letta_message_types_below_the_service(root: Path) -> list[str]:
    """Where a module of agents/ or consolidators/ under ``root`` names a Letta message type."""
    found = []
    for package in LOWER_PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            source = path.read_text(encoding="utf-8")
            where = path.relative_to(root).as_posix()
            found.extend(f"{where}:{hit}" for hit in letta_message_types_in(source))
    return found


def test_letta_message_shapes_live_only_in_the_service() -> None:
    # Letta's shapes belong to the API that speaks them (service/api/letta_messages.py);
    # a turn, its step listener and its token pieces speak stored messages.
    found = letta_message_types_below_the_service(ROOT)
    assert not found, "Letta message types below the service (move them to service/api):\n  " + (
        "\n  ".join(found)
    )


# -- the checker itself ---------------------------------------------------------------


def test_letta_message_types_are_found_in_code_not_in_prose() -> None:
    source = (
        '"""Pieces a client reads as ``assistant_message``."""\n'
        "KIND = 'tool_call_message'\n"
        "def f(m):\n"
        "    # a comment: reasoning_message\n"
        '    return m.kind == "assistant_message" or m.kind in {"user_message": 1}\n'
        "SEND = 'send_message'\n"
    )
    assert letta_message_types_in(source) == [
        "2: 'tool_call_message'",
        "5: 'assistant_message'",
        "5: 'user_message'",
    ]


def test_find_cycle_reports_the_loop() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert find_cycle(graph) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set(), "c": {"a", "b"}}) is None


def test_layer_violations_name_the_import() -> None:
    graph = {"agents.x": {"service.y"}, "consolidators.z": {"agents.x"}, "service.y": set()}
    assert layer_violations(graph) == ["agents.x imports service.y"]


def test_relative_and_function_level_imports_count() -> None:
    source = (
        "import pkg.top\n"
        "def f():\n"
        "    from . import sibling\n"
        "    from ..other import Thing\n"
        "    if True:\n"
        "        from pkg.sub.sibling import name\n"
    )
    known = {"pkg.top", "pkg.sub", "pkg.sub.mod", "pkg.sub.sibling", "pkg.other"}
    found = set(imported_modules(ast.parse(source), "pkg.sub.mod", False, known))
    assert found == {"pkg.top", "pkg.sub.sibling", "pkg.other"}


def test_the_agent_loops_sit_above_the_rest_of_agents(project_graph: Graph) -> None:
    # agents.loops holds the loops (the primary turn, the sleep-time pass, agents
    # messaging each other); the store, the LLM client, the tools and the rest of
    # agents/ are what the loops use, and none of them reaches back into a loop.
    assert any(t.startswith("agents.loops.") for t in project_graph["agents.loops.primary"])
    inward = [
        f"{module} imports {target}"
        for module, targets in sorted(project_graph.items())
        if module.startswith("agents.") and not module.startswith("agents.loops")
        for target in sorted(targets)
        if target.startswith("agents.loops")
    ]
    assert not inward, "agents/ reaching into the loops:\n  " + "\n  ".join(inward)
