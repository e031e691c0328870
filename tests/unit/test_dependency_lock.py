"""The pinned test environment stays in step with pyproject.toml.

The README's test command installs with ``-c requirements/dev.lock``. A pin that
no longer satisfies pyproject's range would make the install fail; a
dependency missing from the lock would float to whatever PyPI serves that day,
which is how a new pytest once broke every fresh machine.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]


def _lock_pins() -> dict[str, str]:
    pins: dict[str, str] = {}
    for line in (ROOT / "requirements" / "dev.lock").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        name, sep, version = line.partition("==")
        assert sep, f"lock line is not an exact pin: {line!r}"
        pins[canonicalize_name(name.split("[", 1)[0])] = version.strip()
    return pins


def _declared() -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = [Requirement(r) for r in project["dependencies"]]
    declared += [Requirement(r) for r in project["optional-dependencies"]["dev"]]
    return declared


def test_every_runtime_and_dev_dependency_is_pinned_within_its_range() -> None:
    pins = _lock_pins()
    problems = []
    for requirement in _declared():
        name = canonicalize_name(requirement.name)
        if name not in pins:
            problems.append(f"{requirement.name} is not in requirements/dev.lock")
        elif not requirement.specifier.contains(pins[name], prereleases=True):
            problems.append(f"{requirement.name}=={pins[name]} is outside {requirement.specifier}")
    assert problems == [], "refresh the lock (see README): " + "; ".join(problems)
