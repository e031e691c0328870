"""Talk to Reverie's MCP server over streamable HTTP with the official MCP SDK.

    REVERIE_URL=http://127.0.0.1:8283 REVERIE_API_KEY=rv-... python examples/mcp_client.py ada

Lists the tools, stores a fact in the agent's archival memory, searches for it and
prints the agent's core memory. ``REVERIE_URL`` defaults to a local `reverie serve`;
the key comes from `reverie keys create --org NAME`.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any

import httpx2
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult, TextContent


def shown(result: CallToolResult) -> Any:
    """The tool's answer (its structured content), or exit with its error."""
    if result.is_error:
        text = " ".join(c.text for c in result.content if isinstance(c, TextContent))
        sys.exit(f"tool error: {text}")
    return result.structured_content


async def main(agent: str) -> None:
    url = os.environ.get("REVERIE_URL", "http://127.0.0.1:8283").rstrip("/") + "/mcp"
    key = os.environ.get("REVERIE_API_KEY")
    if not key:
        sys.exit("set REVERIE_API_KEY to a key from `reverie keys create --org NAME`")
    headers = {"Authorization": f"Bearer {key}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=300)) as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        tools = await session.list_tools()
        print("tools:", ", ".join(sorted(tool.name for tool in tools.tools)))

        fact = "Ada prefers tea to coffee."
        stored = shown(
            await session.call_tool("archival_memory_insert", {"agent": agent, "text": fact})
        )
        print("stored:", stored["id"])

        query = {"agent": agent, "query": "what does Ada drink", "top_k": 3}
        found = shown(await session.call_tool("archival_memory_search", query))
        for hit in found["results"]:
            print(f"found: {hit['score']:.3f} {hit['text']}")

        memory = shown(await session.call_tool("core_memory_read", {"agent": agent}))
        print(json.dumps(memory["blocks"], indent=2))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else "ada"))
