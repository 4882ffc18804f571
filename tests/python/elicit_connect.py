"""Call a tool of a per-user OAuth upstream with the PyPI `mcp` client, as a user who
has not connected yet and whose client takes URL-mode elicitations.

Usage: elicit_connect.py URL API_KEY MODE TOOL USER
  MODE: "legacy" (a session, 2025-11-25 `elicitation/create`) or "auto" (2026-07-28,
  the same request embedded in an input-required result)

The elicitation callback accepts a URL elicitation and then, as a user would in the
browser, opens the link: the gateway's connect page, its button, and each redirect
(the test's authorization server, signed in as USER by a cookie, then the gateway's
callback). Prints one JSON object on the last stdout line (what was elicited, whether
connecting worked, the call's result); the Rust test makes the assertions.
"""

import asyncio
import json
import sys

import httpx2 as httpx  # the HTTP client the `mcp` SDK itself uses
from mcp import Client, types
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client


async def connect_in_browser(link: str, user: str) -> str:
    """What a browser signed in at the authorization server as USER does with LINK."""
    async with httpx.AsyncClient(follow_redirects=False, timeout=30) as browser:
        page = await browser.get(link)
        if page.status_code != 200:
            return f"connect page: HTTP {page.status_code}"
        answer = await browser.post(link)
        for _ in range(4):  # the authorization server, then the callback
            if not answer.is_redirect:
                ok = answer.status_code == 200 and "is connected" in answer.text
                return "connected" if ok else f"HTTP {answer.status_code}"
            answer = await browser.get(answer.headers["location"], headers={"Cookie": f"user={user}"})
        return "too many redirects"


async def main(url: str, key: str, mode: str, tool: str, user: str) -> dict:
    out: dict = {"mode": mode, "elicited": [], "connected": None}
    pending: list[asyncio.Task] = []

    async def on_elicit(_ctx, params):
        out["elicited"].append(
            {
                "mode": getattr(params, "mode", None),
                "url": getattr(params, "url", None),
                "elicitation_id": getattr(params, "elicitation_id", None),
                "message": params.message,
            }
        )
        if getattr(params, "mode", None) != "url":
            return types.ElicitResult(action="decline")

        async def later():
            await asyncio.sleep(0.5)  # the user reads, then opens the link
            out["connected"] = await connect_in_browser(params.url, user)

        pending.append(asyncio.create_task(later()))
        return types.ElicitResult(action="accept")

    http_client = create_mcp_http_client(headers={"Authorization": f"Bearer {key}"})
    async with http_client:
        transport = streamable_http_client(url, http_client=http_client)
        async with Client(
            transport, mode=mode, read_timeout_seconds=60, elicitation_callback=on_elicit
        ) as client:
            out["protocol_version"] = client.protocol_version
            try:
                res = await client.call_tool(tool, {"expect": user})
            except Exception as e:  # noqa: BLE001 - the test looks at what happened
                out.update(raised=True, error=repr(e))
                return out
            out.update(
                raised=False,
                is_error=bool(res.is_error),
                text=[c.text for c in res.content if getattr(c, "type", None) == "text"],
                meta=res.meta,
            )
    for task in pending:
        await task
    return out


if __name__ == "__main__":
    url, key, mode, tool, user = sys.argv[1:6]
    result = asyncio.run(asyncio.wait_for(main(url, key, mode, tool, user), timeout=100))
    print(json.dumps(result, default=str))
