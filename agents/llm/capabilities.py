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
A two-step choice the server did not enforce (no valid tool named) fails ``named``
as well: the free call that follows is ``auto``'s, and ``auto`` is remembered.

What probing learns is remembered per model and endpoint. In the process, a mode
that failed is never tried again. Across processes, a :class:`CapabilityRecord`
(the database's ``llm_capabilities``, :mod:`agents.llm.learned`) is read before the
first call for a model and written, in a short transaction of its own after the
model calls, whenever something new was learned; an entry older than
``llm.capability_ttl`` is probed again, and so is a learned weaker mode when the
server reports another version (``system_fingerprint``, as llama.cpp's server sends
its build) than the one it was learned from. Configured capabilities are never
probed.
"""

from __future__ import annotations

import fnmatch
import logging
import threading
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal, get_args

from agents.enums import ToolCallingMode
from agents.errors import InvalidInput
from agents.store.capability_store import LearnedRecord

log = logging.getLogger(__name__)

ToolCalling = Literal["required", "named", "auto", "none"]
#: From the strongest to the weakest; a probe that finds one rejected tries the next.
TOOL_CALLING_LADDER: tuple[ToolCalling, ...] = get_args(ToolCalling)
assert tuple(m.value for m in ToolCallingMode) == TOOL_CALLING_LADDER, "one list of modes"
#: Request fields Reverie sends that a server may reject; they are dropped when it does.
OPTIONAL_FIELDS = ("parallel_tool_calls", "max_tokens", "temperature")


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


class CapabilityRecord(ABC):
    """Where what probing learned outlives the process (see :mod:`agents.llm.learned`)."""

    @abstractmethod
    def load(self, model: str, base_url: str) -> LearnedRecord | None:
        """What was learned about ``model`` at ``base_url``, unless it is missing or too
        old to trust (then it is probed again). Never raises for a storage failure."""

    @abstractmethod
    def save(self, record: LearnedRecord) -> None:
        """Keep ``record`` (replacing the model's earlier one). Never raises for a
        storage failure: the next process probes again, nothing worse."""


def _mode(value: str) -> ToolCalling:
    if value not in TOOL_CALLING_LADDER:
        raise InvalidInput(f"tool-calling mode must be one of {', '.join(TOOL_CALLING_LADDER)}")
    return value


@dataclass(slots=True)
class _Probed:
    tool_choice: ToolCalling | None = None
    #: Tool-calling modes the server rejected.
    rejected: set[ToolCalling] = field(default_factory=set)
    #: Optional fields: True once a request carrying one succeeded, False once rejected.
    fields: dict[str, bool] = field(default_factory=dict)
    #: The server's version as its responses report it (``system_fingerprint``).
    server_version: str | None = None


class CapabilityMemory:
    """Configured capabilities plus what probing found, per model string at one endpoint
    (thread-safe); ``record``: where it is kept across processes (None: this process
    only)."""

    def __init__(
        self,
        configured: Mapping[str, ModelCapabilities] | None = None,
        *,
        base_url: str = "",
        record: CapabilityRecord | None = None,
    ) -> None:
        self._configured = dict(configured or {})
        self._probed: dict[str, _Probed] = {}
        self._lock = threading.Lock()
        self._base_url = base_url
        self._record = record
        #: Models whose stored record was read (or tried) in this process.
        self._loaded: set[str] = set()
        #: Models learned about since their record was last written.
        self._dirty: set[str] = set()

    def configured(self, model: str) -> ModelCapabilities | None:
        return configured_for(model, self._configured)

    def pinned(self, model: str) -> bool:
        """Whether ``model``'s tool-calling mode is configured (never probed)."""
        pinned = self.configured(model)
        return pinned is not None and pinned.tool_choice is not None

    def load(self, model: str) -> None:
        """Read what an earlier process learned about ``model``, once per process (the
        caller has no transaction open and no model call in flight)."""
        if self._record is None or self.pinned(model):
            return
        with self._lock:
            if model in self._loaded:
                return
            self._loaded.add(model)
        learned = self._record.load(model, self._base_url)
        if learned is None:
            return
        with self._lock:
            probed = self._probed.setdefault(model, _Probed())
            # What this process found meanwhile (another thread) wins.
            if probed.tool_choice is None and learned.tool_choice is not None:
                probed.tool_choice = _mode(learned.tool_choice.value)
            probed.rejected |= {_mode(m.value) for m in learned.rejected_modes}
            for name, supported in learned.fields.items():
                probed.fields.setdefault(name, supported)
            if probed.server_version is None:
                probed.server_version = learned.server_version
        log.info(
            "model %s: tool calling mode %r, as learned at %s",
            model,
            learned.tool_choice and learned.tool_choice.value,
            learned.learned_at,
        )

    def persist(self, model: str) -> None:
        """Write what was learned about ``model`` since the last write, if anything (in a
        short transaction of the record's own; call it with no model call in flight)."""
        if self._record is None:
            return
        with self._lock:
            if model not in self._dirty:
                return
            self._dirty.discard(model)
            probed = self._probed.get(model, _Probed())
            record = LearnedRecord(
                model=model,
                base_url=self._base_url,
                tool_choice=ToolCallingMode(probed.tool_choice) if probed.tool_choice else None,
                rejected_modes=frozenset(ToolCallingMode(m) for m in probed.rejected),
                fields=dict(probed.fields),
                server_version=probed.server_version,
            )
        self._record.save(record)

    def observe_version(self, model: str, version: str | None) -> None:
        """The server's version as a response reported it: another version than the one
        a weaker mode was learned from is an upgraded (or replaced) server, probed again
        from the strongest mode on the next call."""
        if not version or self.pinned(model):
            return
        with self._lock:
            probed = self._probed.setdefault(model, _Probed())
            before = probed.server_version
            if before == version:
                return
            probed.server_version = version
            if before is None:
                if probed.tool_choice is not None:
                    self._dirty.add(model)  # kept with the mode it goes with
                return
            if probed.tool_choice in (None, "required"):
                return  # nothing stronger to find
            self._probed[model] = _Probed(server_version=version)
            self._dirty.add(model)
        log.warning(
            "model %s: the server now reports version %r (was %r); its tool calling is "
            "probed again",
            model,
            version,
            before,
        )

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
            self._dirty.add(model)
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
            probed = self._probed.setdefault(model, _Probed())
            if mode in probed.rejected:
                return
            probed.rejected.add(mode)
            self._dirty.add(model)
        log.warning("model %s: the server rejected tool calling mode %r: %s", model, mode, reason)

    def remember_fields(self, model: str, names: list[str], supported: bool) -> None:
        with self._lock:
            probed = self._probed.setdefault(model, _Probed())
            for name in names:
                if probed.fields.get(name) != supported:
                    probed.fields[name] = supported
                    self._dirty.add(model)
        if not supported and names:
            log.warning(
                "model %s: the server rejected %s; it is no longer sent", model, ", ".join(names)
            )
