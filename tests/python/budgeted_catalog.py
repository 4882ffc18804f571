"""A client reading an abbreviated tool definition, fetching what it left out, and
calling the tool, through the gateway with the PyPI `mcp` client.

Usage: budgeted_catalog.py URL MODE TOOL
  MODE: "legacy" (initialize handshake) or "auto" (server/discover, falls back)
  TOOL: the catalog name of a tool listed abbreviated, whose input takes
        {"title": str, "record": {"part_0": {"part_1": {"part_2": {"part_3": int}}}}}

Prints one JSON object on the last stdout line; the Rust test makes the assertions.
"""

import asyncio
import json
import sys

from mcp import Client


async def main(url: str, mode: str, tool: str) -> dict:
    out: dict = {"mode": mode}
    async with Client(url, mode=mode, read_timeout_seconds=60) as client:
        out["protocol_version"] = client.protocol_version
        listed = {}
        cursor = None
        for _ in range(50):  # bounded pagination
            page = await client.list_tools(cursor=cursor)
            for t in page.tools:
                listed[t.name] = t.model_dump(mode="json", by_alias=True, exclude_none=True)
            cursor = page.next_cursor
            if not cursor:
                break
        out["tools"] = sorted(listed)
        out["definition"] = listed.get(tool)
        schema = await client.call_tool(
            "tool_schema", {"name": tool, "path": "/inputSchema/properties/record"}
        )
        out["schema"] = {
            "is_error": bool(schema.is_error),
            "structured": schema.structured_content,
        }
        good = {"title": "t", "record": {"part_0": {"part_1": {"part_2": {"part_3": 7}}}}}
        bad = {"title": "t", "record": {"part_0": {"part_1": {"part_2": {"part_3": "x"}}}}}
        for name, arguments in [("good", good), ("bad", bad)]:
            result = await client.call_tool(tool, arguments)
            out[name] = {
                "is_error": bool(result.is_error),
                "text": [c.text for c in result.content if getattr(c, "type", None) == "text"],
            }
    return out


if __name__ == "__main__":
    url, mode, tool = sys.argv[1], sys.argv[2], sys.argv[3]
    result = asyncio.run(asyncio.wait_for(main(url, mode, tool), timeout=120))
    print(json.dumps(result))
