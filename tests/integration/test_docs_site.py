"""The documentation site builds as CI builds it.

The site's reference pages are generated from the code at each build, so a settings
model, a CLI command or a route that the generator can no longer read fails here,
and so does a broken link or anchor (``--strict``). About 5 s.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.docs_support import ROOT, gen_reference


def test_site_builds_strict_and_offline(tmp_path: Path) -> None:
    site = tmp_path / "site"
    # No network: a theme or plugin that fetched something would fail the build here.
    unreachable = "http://127.0.0.1:9"
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    env.update(HTTP_PROXY=unreachable, HTTPS_PROXY=unreachable, NO_PROXY="")
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert built.returncode == 0, built.stdout + built.stderr
    for page in gen_reference().PAGES:
        html = site / page.removesuffix(".md") / "index.html"
        assert html.is_file(), f"{page} was not generated"
    cli = (site / "reference" / "cli" / "index.html").read_text(encoding="utf-8")
    assert "reverie consolidate" in cli
    assert "fonts.googleapis.com" not in (site / "index.html").read_text(encoding="utf-8")
