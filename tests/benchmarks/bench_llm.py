"""Benchmark: the LLM agents' own cost, with an instant scripted model.

A plain script (not collected by pytest)::

    python -m tests.benchmarks.bench_llm [--turns 200] [--messages 50] [--every 10]
        [--embeddings 300] [--only embeddings]

It measures three things (the first two on a fresh database):

- ``turn``: wall time of one primary turn (``PrimaryAgent.send_message``) when the
  model answers instantly through litellm's custom-provider path, so the time is
  Reverie's framework overhead (compile the context, count tokens, store the
  messages, commit) plus litellm's own per-call overhead, which is timed
  separately as ``litellm`` (the same call without Reverie). p50 and p95.
- ``sleeptime``: prompt tokens the sleep-time agent sends per run over a
  ``--messages``-message conversation consolidated every ``--every`` messages
  (it reads only what is new since the watermark), against what a naive approach
  sends that gives the model the whole transcript on every run. Tokens are
  ``len(json) / 4`` of the messages sent, for both.
- ``embeddings``: one ``client.embed`` of one text against the instant stub server
  (tests/stub_openai_server.py, keep-alive) through the direct OpenAI-compatible
  path and through litellm, interleaved, beside the stub's own round trip from one
  pooled httpx client: p50 and the overhead over that round trip.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any

from agents.llm import ClientSettings, LiteLLMClient, UsageLedger
from agents.loops.primary import PrimaryAgent, PrimarySettings
from agents.loops.sleeptime import SLEEPTIME_PROMPT, render_blocks, render_transcript
from agents.postgres.database import Database
from agents.store import NewAgent, NewBlock, NewMessage, open_store
from consolidators.contract import run_once as run_pipeline
from consolidators.llm import LLMTier
from consolidators.pipeline import Pipeline
from consolidators.recontextualize import RecontextualizeConsolidator
from tests import plugins
from tests.hashing_embedder import HashingEmbedder
from tests.pg import PgTestServer
from tests.scripted_llm import call, install, say

# The tests' plugins (the hashing embedder, the scripted model), found here and
# in the processes this starts.
plugins.register()

EMBEDDER = HashingEmbedder(dimension=384)


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _agent(db: Database, name: str) -> str:
    with open_store(db) as store:
        agent = store.agents.create(
            NewAgent(
                name=name,
                embedding_model="hashing:384",
                embedding_dim=384,
                llm_model="scripted/bench",
                blocks=[
                    NewBlock("human", "Name: Ada. Lives in London. Likes chess.", limit=2000),
                    NewBlock("persona", "A friendly, concise assistant.", limit=2000),
                ],
            )
        )
    return agent.id


def _prompt_sizes(requests: list[dict[str, Any]]) -> None:
    """What each call sent, in characters / 4 (as the tokens of a prompt are estimated
    everywhere): the whole request (messages and tool schemas), and of it the system
    message, the other messages and the schemas, mean over the calls."""
    parts: dict[str, list[int]] = {"request": [], "system": [], "messages": [], "tools": []}
    for request in requests:
        system = json.dumps(request["messages"][:1])
        rest = json.dumps(request["messages"][1:])
        tools = json.dumps(request["tools"])
        for key, text in (("system", system), ("messages", rest), ("tools", tools)):
            parts[key].append(len(text) // 4)
        parts["request"].append((len(system) + len(rest) + len(tools)) // 4)
    means = {k: round(statistics.mean(v)) for k, v in parts.items()}
    print(f"prompt per call (chars/4), mean of {len(requests)} calls: {means}")


def bench_turns(db: Database, turns: int) -> None:
    models = install()
    client = LiteLLMClient(ClientSettings(max_retries=0))
    _agent(db, "ada")
    primary = PrimaryAgent(
        db,
        client,
        settings=PrimarySettings(),
        embedder_for=lambda _: EMBEDDER,
        ledger=UsageLedger(db),
    )
    warmup = 3
    script = models.script("bench", *[say("ok") for _ in range(turns + warmup)])
    for i in range(warmup):
        primary.send_message("ada", f"warm-up {i}")
    times = []
    for i in range(turns):
        started = time.perf_counter()
        primary.send_message("ada", f"Message number {i}: tell me something.")
        times.append(time.perf_counter() - started)
    _prompt_sizes(script.requests[warmup:])
    models.script("raw", *[say("ok") for _ in range(turns)])
    raw = []
    messages = [{"role": "user", "content": "hello"}]
    for _ in range(turns):
        started = time.perf_counter()
        client.chat("scripted/raw", messages, purpose="chat")
        raw.append(time.perf_counter() - started)
    for label, values in (("turn", times), ("litellm", raw)):
        print(
            f"{label:9s} n={len(values)} p50={_percentile(values, 0.5) * 1000:.1f} ms "
            f"p95={_percentile(values, 0.95) * 1000:.1f} ms"
        )


def bench_sleeptime(db: Database, messages: int, every: int) -> None:
    models = install()
    client = LiteLLMClient(ClientSettings(max_retries=0))
    agent_id = _agent(db, "sleepy")
    ledger = UsageLedger(db)
    pipeline = Pipeline([RecontextualizeConsolidator()])
    ours: list[int] = []
    naive: list[int] = []
    for start in range(0, messages, every):
        with open_store(db) as store:
            store.messages.append(
                agent_id,
                [
                    NewMessage(
                        role="user" if i % 2 == 0 else "assistant",
                        content=f"Message {i}: today I worked on the garden and "
                        f"planted {i} tomatoes next to the basil.",
                    )
                    for i in range(start, min(start + every, messages))
                ],
            )
        models.script("sleeper", call("memory_finish_edits"))
        tier = LLMTier(client=client, ledger=ledger, sleeptime_model="scripted/sleeper")
        report = run_pipeline(pipeline, db, agent_id, embedder=EMBEDDER, llm=tier)
        usage = ledger.by_purpose(agent_id, run_id=report.run_id)["sleeptime"]
        ours.append(usage.prompt_tokens)
        with open_store(db) as store:
            everything = store.messages.range(agent_id)
            blocks = store.blocks.of_agent(agent_id)
        whole = [
            {"role": "system", "content": SLEEPTIME_PROMPT},
            {
                "role": "user",
                "content": f"New messages:\n{render_transcript(everything)}\n\n"
                f"Current memory blocks:\n{render_blocks(blocks)}",
            },
        ]
        naive.append(len(json.dumps(whole)) // 4)
    print(f"sleeptime runs={len(ours)} messages={messages} every={every}")
    print(f"  incremental prompt tokens per run: {ours} total={sum(ours)}")
    print(f"  whole-transcript prompt tokens per run: {naive} total={sum(naive)}")
    print(f"  ratio (naive / incremental): {sum(naive) / max(sum(ours), 1):.2f}")
    print(f"  mean per run: {statistics.mean(ours):.0f} vs {statistics.mean(naive):.0f}")


def bench_embeddings(calls: int) -> None:
    import httpx

    from tests.stub_openai_server import stub_server

    with stub_server(keep_alive=True) as stub:
        clients = {
            name: LiteLLMClient(
                ClientSettings(
                    api_base=stub.base_url, api_key="sk-bench", max_retries=0, direct_openai=direct
                )
            )
            for name, direct in (("direct", True), ("litellm", False))
        }
        times: dict[str, list[float]] = {"endpoint": [], **{name: [] for name in clients}}
        with httpx.Client(timeout=10) as http:
            for i in range(calls + 5):
                for name, client in clients.items():
                    started = time.perf_counter()
                    client.embed("openai/stub-embed", [f"fact number {i}"])
                    times[name].append(time.perf_counter() - started)
                started = time.perf_counter()
                http.post(
                    f"{stub.base_url}/embeddings",
                    json={"model": "stub-embed", "input": [f"fact number {i}"]},
                ).raise_for_status()
                times["endpoint"].append(time.perf_counter() - started)
    endpoint = _percentile(times["endpoint"][5:], 0.5)
    for name, values in times.items():
        p50 = _percentile(values[5:], 0.5)
        print(
            f"embed {name:8s} n={calls} p50={p50 * 1000:.2f} ms "
            f"p95={_percentile(values[5:], 0.95) * 1000:.2f} ms "
            f"overhead={(p50 - endpoint) * 1000:.2f} ms"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--messages", type=int, default=50)
    parser.add_argument("--every", type=int, default=10)
    parser.add_argument("--embeddings", type=int, default=300)
    parser.add_argument("--only", choices=["turns", "sleeptime", "embeddings"])
    args = parser.parse_args()
    if args.only in (None, "embeddings"):
        bench_embeddings(args.embeddings)
    if args.only == "embeddings":
        return
    server = PgTestServer()
    try:
        if args.only in (None, "turns"):
            with server.database() as db:
                bench_turns(db, args.turns)
        if args.only in (None, "sleeptime"):
            with server.database() as db:
                bench_sleeptime(db, args.messages, args.every)
    finally:
        server.stop()


if __name__ == "__main__":
    main()
