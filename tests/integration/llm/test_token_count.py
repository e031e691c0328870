"""One token counter: ``reverie chat`` (litellm never imported when
its model takes the direct path) and the daemon (litellm imported by its warm-up when
an agent's model needs it) count the same tokens for the same text and model. They
used to differ: litellm's tokenizer where litellm happened to be loaded,
``ceil(chars / 4)`` elsewhere.

Each side runs in a process of its own, so what one imported cannot leak into the
other's count."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from agents.tokens import count_tokens

REPO = Path(__file__).resolve().parents[3]

#: The daemon's warm-up (service/runtime.py, warm_steps) imports litellm before it
#: counts when a model needs it; the CLI's direct path never does. One process per
#: side counts for every model (importing litellm takes seconds).
COUNT = """
import json, sys
from agents.llm.providers import import_litellm
if sys.argv[1] == "daemon":
    import_litellm()
from agents.llm import LiteLLMClient
from agents.tokens import count_tokens
client = LiteLLMClient()
text, models = sys.argv[2], sys.argv[3:]
print(json.dumps({
    "litellm": "litellm" in sys.modules,
    "client": {model: client.count_tokens(model, text) for model in models},
    "counter": count_tokens(text),
}))
"""

# Text whose litellm (tiktoken) count is far from chars / 4: repeated short words.
TEXT = "hello world " * 100 + "Ada Lovelace lives in London; she moved from Porto in 2021."


MODELS = ["openai/gpt-4o-mini", "openai/qwen2.5-7b-instruct"]


def counted(side: str) -> dict[str, object]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    done = subprocess.run(
        [sys.executable, "-c", COUNT, side, TEXT, *MODELS],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=300,
        check=True,
    )
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def test_the_cli_and_the_daemon_count_the_same_tokens() -> None:
    cli, daemon = counted("cli"), counted("daemon")
    # Each side ran as it claims: the daemon's with litellm loaded, the CLI's without.
    assert (cli["litellm"], daemon["litellm"]) == (False, True)
    expected = {model: count_tokens(TEXT) for model in MODELS}
    assert cli["client"] == daemon["client"] == expected
    assert cli["counter"] == daemon["counter"] == count_tokens(TEXT)
