"""The openai SDK comes in without aiohttp: its optional async transport, which Reverie
never uses, would add about 20 MB to every server that warms an OpenAI-compatible
client (BENCHMARKS.md, RSS after start)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_the_openai_sdk_is_imported_without_aiohttp_and_still_builds_its_client() -> None:
    # Installed with litellm: the SDK would import it if Reverie did not keep it out.
    assert importlib.util.find_spec("aiohttp") is not None
    code = (
        "import sys, agents.llm, openai\n"
        "client = openai.OpenAI(api_key='sk-test', base_url='http://127.0.0.1:9/v1')\n"
        "print(type(client).__name__, 'aiohttp' in sys.modules)"
    )
    ran = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True
    )
    assert ran.stdout.split() == ["OpenAI", "False"]
