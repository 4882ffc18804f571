"""2025-11-25 Tasks against the pinned server-everything (stdio, no network): its
`simulate-research-query` tool (execution.taskSupport "required") run as a task with
PyPI `mcp` 2.3 (same calls as legacy_client.py).

Usage: everything_task.py WORKSPACE_ROOT   -> prints one JSON object on the last line.
"""

import asyncio
import json
import sys
from typing import Any

import mcp_types as types
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError

from legacy_client import cancel_task, create_task, get_task, list_tasks, poll, task_result


async def main(root: str) -> dict[str, Any]:
    params = StdioServerParameters(
        command=f"{root}/node_modules/.bin/node",
        args=[f"{root}/node_modules/@modelcontextprotocol/server-everything/dist/index.js", "stdio"],
    )
    out: dict[str, Any] = {}
    async with Client(params, mode="legacy", read_timeout_seconds=30) as client:
        out["protocol_version"] = client.protocol_version
        caps = client.server_capabilities
        out["tasks_capability"] = caps.tasks.model_dump(by_alias=True, exclude_none=True) if caps.tasks else None
        await asyncio.sleep(0.5)  # its task tools are registered after initialization
        tools = (await client.list_tools()).tools
        out["task_support"] = {t.name: t.execution.task_support for t in tools if t.execution and t.execution.task_support}
        created = await create_task(client, "simulate-research-query", {"topic": "gateways"}, ttl_ms=60_000)
        out["created"] = created.model_dump(by_alias=True, mode="json", exclude_none=True)
        final, seen = await poll(client, created.task.task_id, timeout_s=30)
        out["polled"] = sorted(set(seen))
        res = await task_result(client, created.task.task_id)
        out["result_head"] = res.content[0].text[:80] if res.content else None
        c2 = await create_task(client, "simulate-research-query", {"topic": "cancel me"}, ttl_ms=60_000)
        await asyncio.sleep(0.3)
        out["cancel"] = (await cancel_task(client, c2.task.task_id)).status
        out["list"] = [t.status for t in (await list_tasks(client)).tasks]
        try:
            await client.call_tool("simulate-research-query", {"topic": "plain"})
        except MCPError as e:
            out["plain_call_of_required_tool"] = [e.code, e.message[:80]]
        try:
            await get_task(client, "nope")
        except MCPError as e:
            out["unknown_id"] = e.code
    return out


if __name__ == "__main__":
    print(json.dumps(asyncio.run(asyncio.wait_for(main(sys.argv[1]), 90))))
