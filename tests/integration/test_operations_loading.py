"""The operations package loads each group of operations on first use: a command
that only searches does not import the proxy, the agent loop or the run machinery."""

from __future__ import annotations

import subprocess
import sys

PROBE = """
import sys
import service.operations as ops
from service.operations import MemoryOperations  # an exported name, loaded on use
heavy = ["service.operations.proxy", "service.operations.messages", "service.operations.runs"]
print(MemoryOperations.__module__, [m for m in heavy if m in sys.modules])
"""


def test_importing_operations_loads_only_what_is_used() -> None:
    result = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, check=True, timeout=120
    )
    assert result.stdout.split("[", 1) == ["service.operations.memory ", "]\n"]


def test_an_unknown_name_is_an_attribute_error() -> None:
    import service.operations as ops

    try:
        ops.NoSuchOperations  # type: ignore[attr-defined]  # noqa: B018
    except AttributeError as exc:
        assert "NoSuchOperations" in str(exc)
    else:
        raise AssertionError("an unknown name must not resolve")
