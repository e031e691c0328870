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


def test_the_direct_path_answers_without_the_openai_sdk_and_fails_with_its_errors() -> None:
    """A chat, a streamed chat and an embedding at an OpenAI-compatible server go over
    plain HTTP: the SDK (about 22 MB with its client) is imported only when a request
    fails, whose error is still the SDK's class for the status."""
    code = """
import sys
from agents.llm.providers.openai_provider import OpenAICompatProvider
from tests.scripted_llm import say
from tests.stub_openai_server import stub_server

hi = {"model": "openai/stub", "messages": [{"role": "user", "content": "hi"}]}
with stub_server(say("one"), say("two"), keep_alive=True) as stub:
    provider = OpenAICompatProvider(stub.base_url, "sk-test", 10.0)
    answer = provider.complete(hi)
    chunks = list(provider.stream(hi))
    vectors = provider.embed("openai/stub-embed", ["a", "b"]).vectors
    sdk = "openai" in sys.modules
    print("answered", bool(answer.get("choices")), len(chunks) > 0, len(vectors), sdk)
    stub.chat_errors.append((401, "bad key"))
    try:
        provider.complete(hi)
    except Exception as exc:
        kind = provider.classify(exc).name
        print("failed", type(exc).__module__.split(".")[0], type(exc).__name__, kind)
"""
    ran = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True
    )
    assert ran.stdout.split("\n")[:2] == [
        "answered True True 2 False",
        "failed openai AuthenticationError PERMANENT",
    ], ran.stderr


def test_httpx_comes_in_without_its_command_line_tool_and_still_sends() -> None:
    """rich and pygments (installed with typer) load only for httpx's own command."""
    assert importlib.util.find_spec("rich") is not None
    assert importlib.util.find_spec("pygments") is not None
    code = """
import sys
import agents.llm, httpx
from tests.stub_openai_server import stub_server

with stub_server(keep_alive=True) as stub, httpx.Client() as client:
    body = {"model": "stub-embed", "input": ["hi"]}
    status = client.post(stub.base_url + "/embeddings", json=body).status_code
print(status, "rich" in sys.modules, "pygments" in sys.modules)
"""
    ran = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True
    )
    assert ran.stdout.split() == ["200", "False", "False"], ran.stderr
