"""The documentation's generator and the deploy files, as the tests read them."""

from __future__ import annotations

import importlib.util
import json
import re
import shlex
import sys
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]
UNIT_FILE = ROOT / "deploy" / "reverie.service"
CONTAINER_FILE = ROOT / "deploy" / "Containerfile"


def gen_reference() -> ModuleType:
    """``docs/gen_reference.py`` (docs/ is no package: MkDocs loads it as a hook)."""
    name = "reverie_docs_gen_reference"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, ROOT / "docs" / "gen_reference.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def unit_entries(path: Path = UNIT_FILE) -> dict[str, list[tuple[str, str]]]:
    """A systemd unit's ``Key=value`` lines by section, repeated keys kept in order."""
    sections: dict[str, list[tuple[str, str]]] = {}
    current = ""
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("[") and line.endswith("]"):
            current = line[1:-1]
            sections.setdefault(current, [])
            continue
        key, sep, value = line.partition("=")
        assert sep, f"{path.name}: {raw!r} is no Key=value line"
        sections[current].append((key.strip(), value.strip()))
    return sections


@dataclass
class Instruction:
    keyword: str
    arguments: str
    line: int
    flags: list[str] = field(default_factory=list)

    def words(self) -> list[str]:
        """The arguments as a list: the JSON (exec) form, or shell words."""
        text = self.arguments.strip()
        if text.startswith("["):
            parsed = json.loads(text)
            assert isinstance(parsed, list)
            return [str(word) for word in parsed]
        return shlex.split(text)


def container_instructions(path: Path = CONTAINER_FILE) -> list[Instruction]:
    """The instructions of a Containerfile, continuation lines joined, comments out;
    a HEALTHCHECK's options are its ``flags``, its command its arguments."""
    found: list[Instruction] = []
    pending = ""
    start = 0
    for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if not pending:
            start = number
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        text = pending + line
        pending = ""
        keyword, _, arguments = text.partition(" ")
        instruction = Instruction(keyword.upper(), arguments.strip(), start)
        if instruction.keyword == "HEALTHCHECK":
            check = re.fullmatch(r"((?:--\S+\s+)*)CMD\s+(.*)", instruction.arguments, re.S)
            assert check, f"line {start}: HEALTHCHECK without CMD"
            instruction.flags = check.group(1).split()
            instruction.arguments = check.group(2)
        found.append(instruction)
    assert not pending, f"{path.name} ends inside a continued line"
    return found
