"""Call one tool through the gateway with the PyPI `mcp` client, as one caller.

Usage: call_as.py URL API_KEY MODE TOOL
  MODE: "legacy" (initialize handshake, a session) or "auto" (2026-07-28)

Calls TOOL with no arguments; the API key travels as `Authorization: Bearer` on an
httpx client given to `streamable_http_client`. Prints one JSON object on the last
stdout line (the protocol version, whether the SDK raised, the result's `is_error`,
texts and `_meta`); the Rust test makes the assertions.
"""

import asyncio
import json
import sys

from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client


async def main(url: str, key: str, mode: str, tool: str) -> dict:
    out: dict = {"mode": mode}
    http_client = create_mcp_http_client(headers={"Authorization": f"Bearer {key}"})
    async with http_client:
        transport = streamable_http_client(url, http_client=http_client)
        async with Client(transport, mode=mode, read_timeout_seconds=60) as client:
            out["protocol_version"] = client.protocol_version
            try:
                res = await client.call_tool(tool, {})
            except Exception as e:  # noqa: BLE001 - the test looks at what happened
                out.update(raised=True, error=repr(e))
                return out
            out.update(
                raised=False,
                is_error=bool(res.is_error),
                text=[c.text for c in res.content if getattr(c, "type", None) == "text"],
                meta=res.meta,
            )
    return out


if __name__ == "__main__":
    url, key, mode, tool = sys.argv[1:5]
    result = asyncio.run(asyncio.wait_for(main(url, key, mode, tool), timeout=100))
    print(json.dumps(result, default=str))
