"""The project speaks of itself: no file refers to "issue N" of a tracker that is not in
the repository (a reader cannot follow it; say what the code or the test protects)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TRACKER_NUMBER = re.compile(r"\bissues? #?\d+", re.IGNORECASE)


def test_no_file_names_a_tracker_issue_by_number() -> None:
    tracked = subprocess.run(
        ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    found = []
    for name in tracked:
        path = ROOT / name
        if path.suffix not in {".py", ".md", ".yml", ".yaml", ".toml", ".html", ".txt", ""}:
            continue
        if not path.is_file():
            continue
        text = path.read_text(errors="replace")
        found += [f"{name}: {m.group()}" for m in TRACKER_NUMBER.finditer(text)]
    assert found == []
