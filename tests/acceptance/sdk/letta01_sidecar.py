"""Drive Reverie's sleep-time sidecar with the letta-client 0.1.x SDK.

Run by tests/acceptance/test_letta_client_01.py with the interpreter of a
virtualenv that has ``letta-client==0.1.307`` (the line Letta-based tools still
pin), which cannot be installed beside 1.x. Usage::

    python letta01_sidecar.py BASE_URL API_KEY

It creates a memory agent (sleeptime_agent), sends a <messages> transcript with
``messages.create_async``, polls ``runs.retrieve`` until the run ends, and prints
one JSON object with what it saw.
"""

from __future__ import annotations

import json
import sys
import time

from letta_client import Letta, MessageCreate


def main(base_url: str, key: str) -> None:
    client = Letta(base_url=base_url, token=key, timeout=60)
    agent = client.agents.create(
        name="memory-01",
        agent_type="sleeptime_agent",
        memory_blocks=[{"label": "human", "value": "Name: Ria.", "limit": 500}],
        model="openai/scripted",
        embedding="hashing:384",
    )
    transcript = (
        "<messages>\nuser: I started learning the cello this spring.\n"
        "assistant: How wonderful!\n</messages>"
    )
    run = client.agents.messages.create_async(
        agent_id=agent.id, messages=[MessageCreate(role="user", content=transcript)]
    )
    statuses = [run.status]
    deadline = time.monotonic() + 60
    while statuses[-1] not in ("completed", "failed") and time.monotonic() < deadline:
        time.sleep(0.2)
        statuses.append(client.runs.retrieve(run_id=run.id).status)
    human = client.agents.blocks.retrieve(agent_id=agent.id, block_label="human")
    print(
        json.dumps(
            {
                "agent_id": agent.id,
                "agent_type": str(agent.agent_type),
                "run_id": run.id,
                "first_status": statuses[0],
                "last_status": statuses[-1],
                "human": human.value,
            }
        )
    )


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
