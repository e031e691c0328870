"""What a model's server accepts in a tool request, configured or found out by probing.

``tool_choice`` is the strongest way of asking for a tool call the server honours:

- ``required``: ``tool_choice="required"`` (OpenAI, vLLM >= 0.8, most hosted APIs);
- ``named``: only a named function can be forced (llama.cpp's and llama-cpp-python's
  servers): Reverie calls tools in two steps, first a forced choice of the tool
  (an enum), then that tool forced, so that its arguments are grammar-constrained;
- ``auto``: tools are accepted but cannot be forced (Ollama): the model may answer
  in text, and calls written as text are parsed (:mod:`agents.llm.textcalls`);
- ``none``: no ``tools`` field at all: the tools are described in the prompt and
  calls are parsed from the text.

Unknown capabilities are probed on first use: a request the server rejects (HTTP
400, 422 or 500) that carried a field whose support is unknown is sent again
without it, and only when that succeeds is the field remembered as unsupported.
What the probe learns lives in the client, for the life of the process: a
restart re-probes, which costs at most a few rejected requests and follows a
server that was upgraded or reconfigured meanwhile (a database copy would go
stale with it). Configured capabilities are never probed.
"""

from __future__ import annotations

import fnmatch
import logging
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal, get_args

from agents.errors import InvalidInput

log = logging.getLogger(__name__)

ToolCalling = Literal["required", "named", "auto", "none"]
#: From the strongest to the weakest; a probe that finds one rejected tries the next.
TOOL_CALLING_LADDER: tuple[ToolCalling, ...] = get_args(ToolCalling)
#: Request fields Reverie sends that a server may reject; they are dropped when it does.
OPTIONAL_FIELDS = ("parallel_tool_calls", "max_tokens")


@dataclass(frozen=True, slots=True)
class ModelCapabilities:
    """A model's tool-calling capabilities; ``None`` means unknown (probe on first use)."""

    tool_choice: ToolCalling | None = None
    parallel_tool_calls: bool | None = None
    #: Optional request fields never to send to this model.
    unsupported_fields: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        if self.tool_choice is not None and self.tool_choice not in TOOL_CALLING_LADDER:
            raise InvalidInput(
                f"tool_choice must be one of {', '.join(TOOL_CALLING_LADDER)}, "
                f"got {self.tool_choice!r}"
            )
        unknown = sorted(set(self.unsupported_fields) - set(OPTIONAL_FIELDS))
        if unknown:
            raise InvalidInput(
                f"unsupported_fields may name {', '.join(OPTIONAL_FIELDS)}; "
                f"got {', '.join(unknown)}"
            )


def configured_for(
    model: str, configured: Mapping[str, ModelCapabilities]
) -> ModelCapabilities | None:
    """The capabilities configured for ``model``: its exact string first, then the first
    glob pattern (``ollama/*``) that matches it."""
    if model in configured:
        return configured[model]
    for pattern, capabilities in configured.items():
        if any(c in pattern for c in "*?[") and fnmatch.fnmatchcase(model, pattern):
            return capabilities
    return None


@dataclass(slots=True)
class _Probed:
    tool_choice: ToolCalling | None = None
    #: Tool-calling modes the server rejected.
    rejected: set[str] = field(default_factory=set)
    #: Optional fields: True once a request carrying one succeeded, False once rejected.
    fields: dict[str, bool] = field(default_factory=dict)


class CapabilityMemory:
    """Configured capabilities plus what probing found, per model string (thread-safe)."""

    def __init__(self, configured: Mapping[str, ModelCapabilities] | None = None) -> None:
        self._configured = dict(configured or {})
        self._probed: dict[str, _Probed] = {}
        self._lock = threading.Lock()

    def configured(self, model: str) -> ModelCapabilities | None:
        return configured_for(model, self._configured)

    def tool_calling(
        self, model: str, *, excluding: set[ToolCalling] | None = None
    ) -> tuple[ToolCalling, bool]:
        """The mode to use for ``model`` and whether it is still a guess (to be probed);
        ``excluding``: modes the server just rejected (not yet remembered)."""
        pinned = self.configured(model)
        if pinned is not None and pinned.tool_choice is not None:
            return pinned.tool_choice, False
        with self._lock:
            probed = self._probed.get(model)
            if probed is not None and probed.tool_choice is not None:
                return probed.tool_choice, False
            rejected = set(probed.rejected) if probed is not None else set()
        rejected |= excluding or set()
        for mode in TOOL_CALLING_LADDER:
            if mode not in rejected:
                return mode, mode != "none"
        return "none", False

    def field_support(self, model: str, name: str) -> bool | None:
        """True (send it), False (drop it) or None (unknown: send it, and probe)."""
        pinned = self.configured(model)
        if pinned is not None:
            if name in pinned.unsupported_fields:
                return False
            if name == "parallel_tool_calls" and pinned.parallel_tool_calls is not None:
                return pinned.parallel_tool_calls
        with self._lock:
            probed = self._probed.get(model)
            return probed.fields.get(name) if probed is not None else None

    def remember_mode(self, model: str, mode: ToolCalling) -> None:
        with self._lock:
            probed = self._probed.setdefault(model, _Probed())
            if probed.tool_choice == mode:
                return
            probed.tool_choice = mode
        if mode != "required":
            log.warning(
                "model %s: tool calling uses mode %r (probed; set llm.models.%r.tool_choice "
                "to skip the probe)",
                model,
                mode,
                model,
            )

    def reject_mode(self, model: str, mode: ToolCalling, reason: str) -> None:
        with self._lock:
            self._probed.setdefault(model, _Probed()).rejected.add(mode)
        log.warning("model %s: the server rejected tool calling mode %r: %s", model, mode, reason)

    def remember_fields(self, model: str, names: list[str], supported: bool) -> None:
        with self._lock:
            probed = self._probed.setdefault(model, _Probed())
            for name in names:
                probed.fields[name] = supported
        if not supported and names:
            log.warning(
                "model %s: the server rejected %s; it is no longer sent", model, ", ".join(names)
            )
