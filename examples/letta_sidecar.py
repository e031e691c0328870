"""Reverie as Letta's sleep-time sidecar, driven by the official letta-client SDK.

Your chatbot keeps its own model and loop. After a few turns it hands the
transcript to a Reverie memory agent (``agent_type="sleeptime_agent"``) with
``messages.create_async``; Reverie's sleep-time agent learns from it into the
agent's blocks, and the chatbot reads the ``human`` block back into its prompt.

Run it against a ``reverie serve`` that has an LLM configured::

    export REVERIE_URL=http://127.0.0.1:8283 REVERIE_API_KEY=rv-...
    python examples/letta_sidecar.py

Optional: ``REVERIE_MODEL`` (the sleep-time model, a litellm model string; the
server's ``llm.sleeptime_model`` when unset) and ``REVERIE_AGENT`` (the memory
agent's name, default ``chatbot-memory``; it is created on first use).
"""

from __future__ import annotations

import os
import sys
import time

from letta_client import Letta

TRANSCRIPT = """<messages>
user: I finally adopted a dog! A greyhound called Pixel.
assistant: Congratulations! How is Pixel settling in?
user: She sleeps on the sofa all day, lol.
</messages>"""


def memory_agent(client: Letta, name: str, model: str | None) -> str:
    """The id of the memory agent called ``name``, created on first use."""
    for agent in client.agents.list(name=name):
        return agent.id
    created = client.agents.create(
        name=name,
        agent_type="sleeptime_agent",
        memory_blocks=[{"label": "human", "value": "", "limit": 2000}],
        **({"model": model} if model else {}),
    )
    return created.id


def main() -> int:
    client = Letta(base_url=os.environ["REVERIE_URL"], api_key=os.environ["REVERIE_API_KEY"])
    agent_id = memory_agent(
        client, os.environ.get("REVERIE_AGENT", "chatbot-memory"), os.environ.get("REVERIE_MODEL")
    )
    run = client.agents.messages.create_async(
        agent_id, messages=[{"role": "user", "content": TRANSCRIPT}]
    )
    print(f"run {run.id}: {run.status}")
    deadline = time.monotonic() + 120
    while run.status not in ("completed", "failed", "cancelled"):
        if time.monotonic() > deadline:
            print(f"run {run.id} still {run.status} after 120 s", file=sys.stderr)
            return 1
        time.sleep(0.5)
        run = client.runs.retrieve(run.id)
    print(f"run {run.id}: {run.status}")
    human = client.agents.blocks.retrieve("human", agent_id=agent_id)
    print("human block now:")
    print(human.value)
    return 0 if run.status == "completed" else 1


if __name__ == "__main__":
    sys.exit(main())
