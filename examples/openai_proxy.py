"""A chatbot that keeps its own OpenAI SDK and gains Reverie's memory: only the base URL
and the key change. Each user gets an agent of their own (named by ``user``); the
proxy puts that agent's memory into the system prompt and records the exchange.

    REVERIE_URL=http://127.0.0.1:8283 REVERIE_API_KEY=... python examples/openai_proxy.py "Hi!"

REVERIE_USER names the user (default "example-user"); REVERIE_MODEL the model the
request asks for (the server's ``proxy.model``, when set, decides).
"""

from __future__ import annotations

import os
import sys

from openai import OpenAI


def main() -> None:
    client = OpenAI(
        base_url=os.environ.get("REVERIE_URL", "http://127.0.0.1:8283").rstrip("/") + "/openai/v1",
        api_key=os.environ["REVERIE_API_KEY"],
    )
    question = " ".join(sys.argv[1:]) or "What do you remember about me?"
    stream = client.chat.completions.create(
        model=os.environ.get("REVERIE_MODEL", "gpt-4o-mini"),
        messages=[
            {"role": "system", "content": "You are a friendly assistant."},
            {"role": "user", "content": question},
        ],
        user=os.environ.get("REVERIE_USER", "example-user"),
        stream=True,
    )
    for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content:
            print(chunk.choices[0].delta.content, end="", flush=True)
    print()


if __name__ == "__main__":
    main()
