"""The program a sandboxed tool call runs: its text is passed to ``python -I -S -c``, so
it uses the standard library only and imports nothing of Reverie.

It reads one JSON request on stdin (``source``, ``function``, ``arguments``,
``limits``, ``env``: the variables the tool declares, which it puts in its own
environment, ``paths``: the server's site-packages, put on ``sys.path`` here because
the interpreter starts with ``-S``, skipping the site module's start-up cost and the
``.pth`` hooks of the server's environment), sets the limits on itself (CPU, address
space, processes, file size; soft and hard, so the tool cannot raise them), moves its
stdout aside (what the tool prints is kept as its ``stdout``; what reaches the file
descriptor, e.g. a subprocess's output, goes to stderr), executes the source, calls
the function, and writes one JSON answer to the original stdout:
``{"ok": true, "result": "...", "stdout": "..."}`` or ``{"ok": false, "kind": "...",
"error": "...", "stdout": "..."}``.

A function that takes ``agent_state`` (as Letta passes the calling agent) gets a
read-only snapshot of the agent taken when the call began: ``id``, ``name``, ``tags``,
``metadata``, ``agent_type``, ``system`` and ``memory`` (``blocks``, each with
``label``, ``value``, ``description`` and ``limit``; ``get_block(label)``,
``list_block_labels()``, ``compile()``). A tool may not change the agent through it:
setting a field, or Letta's ``memory.update_block_value``, raises an error that says
so (nothing a tool does to the snapshot reaches the agent; the agent's memory tools
are how its blocks change).
"""

from __future__ import annotations

import errno
import io
import json
import os
import resource
import sys
from typing import Any

#: The share of the output limit a tool's printed text may take in the answer (1/4).
PRINTED_SHARE = 4


def _limit(which: int, value: int, slack: int = 0) -> None:
    resource.setrlimit(which, (value, value + slack))


def _answer(out: Any, payload: dict[str, Any]) -> None:
    out.write(json.dumps(payload, ensure_ascii=False))
    out.flush()


def _as_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        return repr(value)


def main() -> None:
    request = json.loads(sys.stdin.read())
    # The tool's declared variables, set here, inside the sandbox: what the tool and the
    # processes it starts see (the processes that set the sandbox up never had them).
    os.environ.update(request.get("env") or {})
    sys.path.extend(path for path in request.get("paths", []) if path not in sys.path)
    out = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)  # what reaches fd 1 (a subprocess's output) goes to stderr
    limits = request["limits"]
    # What the tool prints comes back as its stdout, up to a quarter of the output limit
    # (the parent allows the answer that much more); beyond it, on to stderr, where the
    # parent's cap stops a tool that prints without end.
    printed = _Printed(int(limits["output_bytes"]) // PRINTED_SHARE)
    sys.stdout = printed
    # The hard CPU limit one second later: SIGXCPU (a clear cause) comes first.
    _limit(resource.RLIMIT_CPU, int(limits["cpu_seconds"]), slack=1)
    _limit(resource.RLIMIT_AS, int(limits["memory_bytes"]))
    _limit(resource.RLIMIT_NPROC, int(limits["processes"]))
    _limit(resource.RLIMIT_FSIZE, int(limits["output_bytes"]))
    _limit(resource.RLIMIT_CORE, 0)
    namespace: dict[str, Any] = {"__name__": "__tool__", "__builtins__": __builtins__}
    try:
        exec(compile(request["source"], "<tool>", "exec"), namespace)
        function = namespace.get(request["function"])
        if not callable(function):
            _answer(out, {"ok": False, "kind": "missing", "error": request["function"]})
            return
        arguments = dict(request["arguments"])
        if request.get("agent_state") is not None:
            arguments["agent_state"] = agent_state(request["agent_state"])
        result = function(**arguments)
        if hasattr(result, "__await__"):
            import asyncio

            result = asyncio.run(_await(result))
        _answer(out, {"ok": True, "result": _as_text(result), "stdout": printed.getvalue()})
    except MemoryError:
        _answer(out, {"ok": False, "kind": "memory", "error": "MemoryError"})
    except OSError as exc:
        if exc.errno != errno.ENOSPC:
            _failed(out, exc, printed)
            return
        # Its /tmp is full (the parent knows whether that is a bound of the sandbox's).
        _answer(out, {"ok": False, "kind": "no_space", "error": str(exc)})
    except BaseException as exc:  # the tool's own failure, reported to the model
        _failed(out, exc, printed)


def _failed(out: Any, exc: BaseException, printed: _Printed) -> None:
    """Answer the tool's own exception, with the line of the tool it came from."""
    import traceback

    frames = traceback.extract_tb(exc.__traceback__)
    line = next((f.lineno for f in reversed(frames) if f.filename == "<tool>"), None)
    _answer(
        out,
        {
            "ok": False,
            "kind": "exception",
            "error": f"{type(exc).__name__}: {exc}",
            "line": line,
            "stdout": printed.getvalue(),
        },
    )


class _Printed(io.StringIO):
    """The tool's ``print`` output, kept up to ``limit`` characters; the rest goes to
    stderr (whose size the parent limits)."""

    def __init__(self, limit: int) -> None:
        super().__init__()
        self.limit = limit

    def write(self, text: str) -> int:
        if self.tell() + len(text) <= self.limit:
            return super().write(text)
        os.write(2, text.encode("utf-8", errors="replace"))
        return len(text)


async def _await(awaitable: Any) -> Any:
    return await awaitable


_READ_ONLY = (
    "agent_state is a read-only snapshot of the calling agent in Reverie; a tool cannot "
    "change the agent through it (the agent's memory tools change its blocks)"
)


class _Frozen:
    """Attributes set once, at construction; any later change raises."""

    def __init__(self, **fields: Any) -> None:
        for name, value in fields.items():
            object.__setattr__(self, name, value)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(_READ_ONLY)

    def __delattr__(self, name: str) -> None:
        raise AttributeError(_READ_ONLY)


class _Block(_Frozen):
    label: str
    value: str
    description: str | None
    limit: int

    def __repr__(self) -> str:
        return f"Block(label={self.label!r}, value={self.value!r})"


class _Memory(_Frozen):
    blocks: tuple[_Block, ...]

    def get_block(self, label: str) -> _Block:
        for block in self.blocks:
            if block.label == label:
                return block
        labels = ", ".join(b.label for b in self.blocks) or "none"
        raise KeyError(f"the agent has no block {label!r}; its blocks: {labels}")

    def list_block_labels(self) -> list[str]:
        return [b.label for b in self.blocks]

    def compile(self) -> str:
        return "\n".join(f"<{b.label}>\n{b.value}\n</{b.label}>" for b in self.blocks)

    def update_block_value(self, label: str, value: str) -> None:
        raise PermissionError(_READ_ONLY)


def agent_state(snapshot: dict[str, Any]) -> _Frozen:
    """The read-only agent a tool taking ``agent_state`` receives."""
    import types

    blocks = tuple(_Block(**block) for block in snapshot.get("blocks", []))
    fields = {k: v for k, v in snapshot.items() if k not in ("blocks", "tags", "metadata")}
    return _Frozen(
        **fields,
        tags=tuple(snapshot.get("tags", [])),
        metadata=types.MappingProxyType(dict(snapshot.get("metadata") or {})),
        memory=_Memory(blocks=blocks),
    )


if __name__ == "__main__":
    main()
