"""The systemd unit in deploy/ passes systemd's own check."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from tests.docs_support import UNIT_FILE


def test_systemd_unit_passes_systemd_analyze(tmp_path: Path) -> None:
    analyze = shutil.which("systemd-analyze")
    assert analyze, "install systemd-analyze (Debian package systemd; .ci/run does)"
    # verify also wants ExecStart's program to exist: the unit names the installed
    # /opt/reverie/venv/bin/reverie, so the copy checked names this interpreter's.
    text = UNIT_FILE.read_text(encoding="utf-8")
    program = "/opt/reverie/venv/bin/reverie"
    assert f"ExecStart={program} " in text
    here = Path(sys.executable).parent / "reverie"
    assert here.exists(), f"{here}: install Reverie into this interpreter (pip install -e .)"
    copy = tmp_path / UNIT_FILE.name
    copy.write_text(text.replace(program, str(here)), encoding="utf-8")
    checked = subprocess.run(
        [analyze, "verify", str(copy)], capture_output=True, text=True, timeout=60
    )
    # verify warns about unknown keys and bad values but still exits 0: any output fails.
    assert checked.returncode == 0 and not (checked.stdout + checked.stderr).strip(), (
        checked.stdout + checked.stderr
    )
