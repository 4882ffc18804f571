"""2025-11-25 Tasks with PyPI `mcp` 2.3's Client (mode="legacy": initialize handshake, session).

mcp 2.3 has task *types* (`mcp_types.CreateTaskResult`, `GetTaskRequest`, ...) but no task
API, and its 2025 result surface rejects a CreateTaskResult on `tools/call` (it validates
`tools/call` results as CallToolResult: "content: Field required"). So:
  - create: the `tools/call` with `params.task` goes through the session's dispatcher
    (`client.session._dispatcher.send_raw_request`, private; the only unvalidated path),
    and the raw dict is parsed with `mcp_types.CreateTaskResult`;
  - tasks/get, tasks/result, tasks/list, tasks/cancel: `client.session.send_request(<typed
    request>, <result type>)` works as is (tasks/* are not in the SDK's method tables, so
    no surface validation applies; the result model validates).

Usage: legacy_client.py URL [API_KEY]   -> prints one JSON object on the last line.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from typing import Any

import mcp_types as types
from mcp import Client
from mcp.client.extension import ClientExtension, NotificationBinding
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError

TERMINAL = {"completed", "failed", "cancelled"}


async def create_task(client: Client, name: str, args: dict[str, Any], ttl_ms: int) -> types.CreateTaskResult:
    params = {"name": name, "arguments": args, "task": {"ttl": ttl_ms}}
    raw = await client.session._dispatcher.send_raw_request("tools/call", params, {"timeout": 30})  # noqa: SLF001
    return types.CreateTaskResult.model_validate(raw, by_name=False)


async def get_task(client: Client, task_id: str) -> types.GetTaskResult:
    return await client.session.send_request(
        types.GetTaskRequest(params=types.GetTaskRequestParams(task_id=task_id)), types.GetTaskResult
    )


async def poll(client: Client, task_id: str, timeout_s: float = 30) -> tuple[types.GetTaskResult, list[str]]:
    seen: list[str] = []
    deadline = time.monotonic() + timeout_s
    while True:
        t = await get_task(client, task_id)
        seen.append(f"{t.status}:{t.status_message}")
        if t.status in TERMINAL or t.status == "input_required" or time.monotonic() > deadline:
            return t, seen
        await asyncio.sleep((t.poll_interval or 1000) / 1000)


async def task_result(client: Client, task_id: str) -> types.CallToolResult:
    # tasks/result blocks until the task is terminal, then answers exactly what tools/call would have.
    return await client.session.send_request(
        types.GetTaskPayloadRequest(params=types.GetTaskPayloadRequestParams(task_id=task_id)),
        types.CallToolResult,
        request_read_timeout_seconds=60,
    )


async def cancel_task(client: Client, task_id: str) -> types.CancelTaskResult:
    return await client.session.send_request(
        types.CancelTaskRequest(params=types.CancelTaskRequestParams(task_id=task_id)), types.CancelTaskResult
    )


async def list_tasks(client: Client) -> types.ListTasksResult:
    return await client.session.send_request(types.ListTasksRequest(), types.ListTasksResult)


async def main(url: str, key: str | None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    notes: list[types.TaskStatusNotificationParams] = []

    async def on_status(params: types.TaskStatusNotificationParams) -> None:
        notes.append(params)

    class TaskStatusObserver(ClientExtension):
        # The 2025 notification tables lack notifications/tasks/status, so the session drops it
        # unless an extension binds it; a binding receives it validated.
        identifier = "example.test/task-status"

        def notifications(self) -> list[NotificationBinding[Any]]:
            return [NotificationBinding(method="notifications/tasks/status", params_type=types.TaskStatusNotificationParams, handler=on_status)]

    headers = {"Authorization": f"Bearer {key}"} if key else {}
    async with create_mcp_http_client(headers=headers) as http:
        async with Client(
            streamable_http_client(url, http_client=http), mode="legacy", read_timeout_seconds=30, extensions=[TaskStatusObserver()]
        ) as client:
            out["protocol_version"] = client.protocol_version
            caps = client.server_capabilities
            out["server_tasks_capability"] = caps.tasks.model_dump(by_alias=True, exclude_none=True) if caps.tasks else None
            tools = await client.list_tools()
            out["task_support"] = {
                t.name: (t.execution.task_support if t.execution else None) for t in tools.tools
            }

            # 1. create -> poll -> result
            created = await create_task(client, "sleep", {"seconds": 1.0}, ttl_ms=60_000)
            out["created"] = created.model_dump(by_alias=True, mode="json", exclude_none=True)
            final, seen = await poll(client, created.task.task_id)
            out["polled"] = seen
            res = await task_result(client, created.task.task_id)
            out["result"] = res.model_dump(by_alias=True, mode="json", exclude_none=True)

            # 2. cancel a running task; cancelling it again is -32602
            c2 = await create_task(client, "sleep", {"seconds": 10}, ttl_ms=60_000)
            await asyncio.sleep(0.3)
            out["cancel"] = (await cancel_task(client, c2.task.task_id)).model_dump(by_alias=True, exclude_none=True)
            out["after_cancel"] = (await get_task(client, c2.task.task_id)).status
            try:
                await cancel_task(client, c2.task.task_id)
            except MCPError as e:
                out["cancel_again_error"] = e.code

            # 3. a failing tool -> failed; tasks/result returns the JSON-RPC error
            c3 = await create_task(client, "sleep", {"seconds": 0.2, "fail": True}, ttl_ms=60_000)
            out["failed"] = (await poll(client, c3.task.task_id))[0].model_dump(by_alias=True, exclude_none=True)
            try:
                await task_result(client, c3.task.task_id)
            except MCPError as e:
                out["failed_result_error"] = [e.code, e.message]

            # 4. list; unknown id; required tool called plainly; forbidden tool as a task
            out["list"] = [t.status for t in (await list_tasks(client)).tasks]
            try:
                await get_task(client, "no-such-task")
            except MCPError as e:
                out["unknown_id_error"] = e.code
            try:
                await client.call_tool("sleep_required", {"seconds": 0.1})
            except MCPError as e:
                out["required_plain_error"] = e.code
            try:
                await create_task(client, "echo", {"message": "x"}, ttl_ms=1000)
            except MCPError as e:
                out["forbidden_as_task_error"] = e.code
            out["plain_call"] = (await client.call_tool("sleep", {"seconds": 0.1})).content[0].text
            await asyncio.sleep(0.2)
            out["status_notifications"] = [f"{n.task_id[:6]}:{n.status}" for n in notes]
    return out


if __name__ == "__main__":
    result = asyncio.run(asyncio.wait_for(main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else None), 120))
    print(json.dumps(result))
