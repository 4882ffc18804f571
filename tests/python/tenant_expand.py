"""Expand a tool through the gateway with the PyPI `mcp` client, as one tenant.

Usage: tenant_expand.py URL API_KEY MODE TOOL
  MODE: "legacy" (initialize handshake, a session) or "auto" (must pick 2026-07-28)

Lists the tools, calls TOOL before expanding it, calls `tool_expand_tools` with it,
waits (legacy) for `notifications/tools/list_changed` on the message handler, lists
again and calls TOOL (an `echo`). The API key travels as `Authorization: Bearer` on an
httpx client given to `streamable_http_client`. Prints one JSON object on the last
stdout line; the Rust test makes the assertions.
"""

import asyncio
import json
import sys

from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client


def texts(result) -> list[str]:
    return [c.text for c in result.content if getattr(c, "type", None) == "text"]


async def list_names(client: Client) -> list[str]:
    names: list[str] = []
    cursor = None
    for _ in range(50):  # bounded pagination
        # Bypass the client's response cache: the test wants the server's answer.
        page = await client.list_tools(cursor=cursor, cache_mode="bypass")
        names.extend(t.name for t in page.tools)
        cursor = page.next_cursor
        if not cursor:
            break
    return names


async def call(client: Client, name: str, args: dict) -> dict:
    try:
        res = await client.call_tool(name, args)
    except Exception as e:  # noqa: BLE001 - the test looks at what happened
        return {"raised": True, "is_error": True, "error": repr(e)}
    return {
        "raised": False,
        "is_error": bool(res.is_error),
        "text": texts(res),
        "structured": res.structured_content,
    }


async def main(url: str, key: str, mode: str, tool: str) -> dict:
    out: dict = {"mode": mode}
    changed = asyncio.Event()
    seen: list[str] = []

    async def on_message(message) -> None:
        method = getattr(message, "method", None)
        seen.append(str(method if method is not None else type(message).__name__))
        if method == "notifications/tools/list_changed":
            changed.set()

    http_client = create_mcp_http_client(headers={"Authorization": f"Bearer {key}"})
    async with http_client:
        transport = streamable_http_client(url, http_client=http_client)
        async with Client(
            transport, mode=mode, read_timeout_seconds=60, message_handler=on_message
        ) as client:
            out["protocol_version"] = client.protocol_version
            out["tools_before"] = await list_names(client)
            if mode == "legacy":
                out["early_call"] = await call(client, tool, {"message": "too early"})
            out["expand"] = await call(client, "tool_expand_tools", {"tool_names": [tool]})
            if mode == "legacy":
                try:
                    await asyncio.wait_for(changed.wait(), timeout=20)
                except TimeoutError:
                    pass
            out["list_changed"] = changed.is_set()
            out["tools_after"] = await list_names(client)
            out["call"] = await call(client, tool, {"message": "hello after expand"})
    out["notifications"] = seen
    return out


if __name__ == "__main__":
    url, key, mode, tool = sys.argv[1:5]
    result = asyncio.run(asyncio.wait_for(main(url, key, mode, tool), timeout=100))
    print(json.dumps(result, default=str))
