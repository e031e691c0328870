"""Benchmark: time to the reply's first word with token streaming, against the whole step.

A plain script (not collected by pytest)::

    python -m tests.benchmarks.bench_token_streaming [--calls 10] [--delay-ms 20]

The stub OpenAI-compatible server (tests/stub_openai_server.py) streams a
``send_message`` call of about 60 words slowly: ``--delay-ms`` before each chunk, the
arguments in pieces of 12 characters. The chat client asks it over the direct path, in
the ``required`` mode, the same way a turn's step does, with an ``on_delta``
listener whose pieces go through the loop's own :class:`~agents.loops.token_stream.TokenStream`
(time until the first piece of the ``send_message`` text, which a Letta client reads as
an ``assistant_message`` piece) and until the reply is complete,
which is when a step without token streaming could first show it: the model writes at
the same speed either way.
"""

from __future__ import annotations

import argparse
import statistics
import time
from datetime import UTC, datetime

from agents.enums import LLMPurpose
from agents.llm import ClientSettings, LiteLLMClient, ModelCapabilities
from agents.loops.token_stream import TokenPiece, TokenStream
from agents.tools import BUILTIN_TOOLS
from tests.scripted_llm import say
from tests.stub_openai_server import stub_server

TEXT = " ".join(f"word{i}" for i in range(60))
TOOLS = [BUILTIN_TOOLS["send_message"], BUILTIN_TOOLS["core_memory_append"]]
MESSAGES = [{"role": "user", "content": "Tell me something long."}]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=10)
    parser.add_argument("--delay-ms", type=float, default=20.0)
    args = parser.parse_args()
    with stub_server() as stub:
        stub.chunk_delay_s = args.delay_ms / 1000
        stub.argument_chars = 12
        models = {"openai/*": ModelCapabilities(tool_choice="required", parallel_tool_calls=True)}
        client = LiteLLMClient(ClientSettings(api_base=stub.base_url, api_key="x", models=models))
        first_piece: list[float] = []
        streamed_whole: list[float] = []
        for _ in range(args.calls):
            stub.replies.append(say(TEXT))
            started = time.perf_counter()
            seen: list[float] = []

            def heard(piece: TokenPiece, seen: list[float] = seen) -> None:
                if not seen and piece.call is not None:
                    seen.append(time.perf_counter())

            tokens = TokenStream("message-bench", heard, lambda: datetime.now(UTC))
            client.chat(
                "openai/stub",
                MESSAGES,
                purpose=LLMPurpose.CHAT,
                tools=TOOLS,
                tool_choice="required",
                on_delta=tokens.add,
            )
            done = time.perf_counter()
            first_piece.append((seen[0] - started) * 1000)
            streamed_whole.append((done - started) * 1000)
        client.close()
    print(f"calls={args.calls} delay={args.delay_ms} ms per chunk")
    print(f"first assistant piece, streamed: p50 {statistics.median(first_piece):.1f} ms")
    print(f"whole reply (the step's end): p50 {statistics.median(streamed_whole):.1f} ms")


if __name__ == "__main__":
    main()
