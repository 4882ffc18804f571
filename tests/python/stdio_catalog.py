"""Drive `toolgate stdio` with the PyPI `mcp` client over stdio.

Usage: stdio_catalog.py TOOLGATE_BIN CONFIG_PATH UPSTREAM

Launches `TOOLGATE_BIN stdio --config CONFIG_PATH` with `stdio_client`, initializes,
lists every tool (bounded pagination) once UPSTREAM's have joined, calls UPSTREAM__echo, and prints one JSON
object on the last stdout line; the Rust test makes the assertions. The gateway's
stderr (its logs) goes to this script's stderr.
"""

import asyncio
import json
import sys

import mcp_types
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client


async def main(binary: str, config: str, upstream: str) -> dict:
    out: dict = {}
    params = StdioServerParameters(command=binary, args=["stdio", "--config", config])
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write, read_timeout_seconds=60) as session:
            init = await session.initialize()
            out["protocol_version"] = init.protocol_version
            out["server_name"] = init.server_info.name
            # The gateway answers before its upstreams are up: their tools join the
            # list as they answer (bounded wait, 60 s).
            for _ in range(120):
                tools = []
                cursor = None
                for _ in range(50):  # bounded pagination
                    page = await session.list_tools(
                        params=None if cursor is None else mcp_types.PaginatedRequestParams(cursor=cursor)
                    )
                    tools.extend(page.tools)
                    cursor = page.next_cursor
                    if not cursor:
                        break
                if any(t.name == f"{upstream}__echo" for t in tools):
                    break
                await asyncio.sleep(0.5)
            out["tools"] = [t.name for t in tools]
            # The full definitions as the client parsed them (aliases, no nulls).
            out["definitions"] = {
                t.name: t.model_dump(by_alias=True, mode="json", exclude_none=True) for t in tools
            }
            echo = await session.call_tool(f"{upstream}__echo", {"message": "hello over stdio"})
            out["echo"] = {
                "is_error": bool(echo.is_error),
                "text": [c.text for c in echo.content if getattr(c, "type", None) == "text"],
            }
    return out


if __name__ == "__main__":
    binary, config, upstream = sys.argv[1], sys.argv[2], sys.argv[3]
    result = asyncio.run(asyncio.wait_for(main(binary, config, upstream), timeout=120))
    print(json.dumps(result))
