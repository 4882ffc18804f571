"""List and call through the gateway with the PyPI `mcp` client.

Usage: catalog_calls.py TARGET MODE PREFIX[,PREFIX...]
  TARGET: the gateway's /mcp URL, or a JSON list [command, arg...] to run the gateway's
          stdio front door as a child process
  MODE: "legacy" (initialize handshake) or "auto" (server/discover, falls back)

For each upstream PREFIX, calls PREFIX__echo and PREFIX__get-sum. Prints one JSON
object on the last stdout line; the Rust test makes the assertions.
"""

import asyncio
import json
import sys

from mcp import Client, StdioServerParameters


async def main(target: str, mode: str, prefixes: list[str]) -> dict:
    out: dict = {"mode": mode, "calls": {}}
    server: str | StdioServerParameters = target
    if target.startswith("["):
        command = json.loads(target)
        server = StdioServerParameters(command=command[0], args=command[1:])
    async with Client(server, mode=mode, read_timeout_seconds=60) as client:
        out["protocol_version"] = client.protocol_version
        # The gateway answers before its upstreams are up: their tools join the list
        # as each answers (bounded wait, 60 s).
        wanted = {f"{p}__{n}" if p else n for p in prefixes for n in ("echo", "get-sum")}
        for _ in range(120):
            names: list[str] = []
            cursor = None
            for _ in range(50):  # bounded pagination
                page = await client.list_tools(cursor=cursor)
                names.extend(t.name for t in page.tools)
                cursor = page.next_cursor
                if not cursor:
                    break
            if wanted <= set(names):
                break
            await asyncio.sleep(0.5)
        out["tools"] = names
        for prefix in prefixes:
            calls = {}
            # An empty prefix calls the bare names (the script run directly on an upstream).
            tool = (lambda n: f"{prefix}__{n}") if prefix else (lambda n: n)
            echo = await client.call_tool(tool("echo"), {"message": f"hello from {prefix}"})
            calls["echo"] = {
                "is_error": bool(echo.is_error),
                "text": [c.text for c in echo.content if getattr(c, "type", None) == "text"],
            }
            total = await client.call_tool(tool("get-sum"), {"a": 19, "b": 23})
            calls["get-sum"] = {
                "is_error": bool(total.is_error),
                "text": [c.text for c in total.content if getattr(c, "type", None) == "text"],
            }
            out["calls"][prefix] = calls
        # An unknown tool must come back as an error, not hang or crash the client.
        try:
            res = await client.call_tool("no_such_upstream__nothing", {})
            out["unknown_tool"] = {"raised": False, "is_error": bool(res.is_error)}
        except Exception as e:  # noqa: BLE001 - any MCP error shape is acceptable here
            out["unknown_tool"] = {"raised": True, "error": str(e)}
    return out


if __name__ == "__main__":
    url, mode, prefixes = sys.argv[1], sys.argv[2], sys.argv[3].split(",")
    result = asyncio.run(asyncio.wait_for(main(url, mode, prefixes), timeout=120))
    print(json.dumps(result))
