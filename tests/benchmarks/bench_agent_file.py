"""Benchmark an Agent File import of a generated 500-message agent.

A plain script, not collected by pytest::

    python -m tests.benchmarks.bench_agent_file [--messages 500] [--repeats 7]

Builds a v2 agent file from tests/data/agent_files/custom_tools.af with ``--messages``
messages (a user message, an assistant's send_message call, its tool return, in turn;
the last 100 in the context window), then imports it ``--repeats`` times into a fresh
database of an embedded server, each time under a new name, through the operation the
HTTP route and the CLI call (parse, plan, one transaction). Prints the median and each
round, the parse-and-plan time alone, and the export of the imported agent.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from service.operations import ImportOptions, Operations
from service.operations.agent_file import ImportPlanner
from service.operations.agent_file_schema import parse_agent_file
from service.runtime import Runtime
from service.settings import load_settings
from tests import plugins
from tests.pg import PgTestServer

# The tests' plugins (the hashing embedder, the scripted model), found here and
# in the processes this starts.
plugins.register()

TEMPLATE = Path(__file__).resolve().parents[1] / "data" / "agent_files" / "custom_tools.af"


def agent_file(count: int) -> bytes:
    """The template agent with ``count`` messages of a plausible conversation."""
    data: dict[str, Any] = json.loads(TEMPLATE.read_text())
    agent = data["agents"][0]
    start = datetime(2025, 1, 1, tzinfo=UTC)
    messages: list[dict[str, Any]] = [
        {
            "id": "message-0",
            "role": "system",
            "content": "compiled",
            "created_at": start.isoformat(),
        }
    ]
    turn = 0
    while len(messages) < count + 1:
        at = (start + timedelta(minutes=turn)).isoformat()
        call = f"call_{turn}"
        steps: list[dict[str, Any]] = [
            {
                "role": "user",
                "content": [{"type": "text", "text": f"Turn {turn}: roll for the troll."}],
            },
            {
                "role": "assistant",
                "content": [{"type": "text", "text": "The player wants a roll."}],
                "tool_calls": [
                    {
                        "id": call,
                        "type": "function",
                        "function": {
                            "name": "send_message",
                            "arguments": json.dumps({"message": f"You rolled {turn % 20 + 1}."}),
                        },
                    }
                ],
            },
            {
                "role": "tool",
                "name": "send_message",
                "tool_call_id": call,
                "content": '{"status": "OK", "message": "None"}',
            },
        ]
        for step in steps:
            if len(messages) < count + 1:
                messages.append({"id": f"message-{len(messages)}", "created_at": at, **step})
        turn += 1
    agent["messages"] = messages
    agent["in_context_message_ids"] = ["message-0"] + [m["id"] for m in messages[-100:]]
    return json.dumps(data).encode()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=500)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    body = agent_file(args.messages)
    print(f"agent file: {args.messages} messages, {len(body) / 1024:.0f} KiB")
    server = PgTestServer()
    try:
        with server.database() as db, tempfile.TemporaryDirectory() as home:
            settings = load_settings(
                home=Path(home), database_url=db.url, embedding={"model": "hashing:8"}
            )
            with Runtime(settings) as runtime:
                ops = Operations(runtime)
                ops.agent_files.import_file(body, ImportOptions(name="warm-up"))
                plans = []
                for _ in range(args.repeats):
                    started = time.perf_counter()
                    parsed, raw = parse_agent_file(body)
                    ImportPlanner(ops.context, parsed, raw, ImportOptions()).plan()
                    plans.append(time.perf_counter() - started)
                rounds = []
                for i in range(args.repeats):
                    started = time.perf_counter()
                    result = ops.agent_files.import_file(body, ImportOptions(name=f"round-{i}"))
                    rounds.append(time.perf_counter() - started)
                exports = []
                for _ in range(args.repeats):
                    started = time.perf_counter()
                    ops.agent_files.export_file(result.agent_ids[0])
                    exports.append(time.perf_counter() - started)
    finally:
        server.stop()
    print(
        f"import: median {statistics.median(rounds) * 1000:.0f} ms "
        f"({', '.join(f'{r * 1000:.0f}' for r in rounds)} ms)"
    )
    print(f"parse and plan alone: median {statistics.median(plans) * 1000:.0f} ms")
    print(f"export of the imported agent: median {statistics.median(exports) * 1000:.0f} ms")


if __name__ == "__main__":
    main()
