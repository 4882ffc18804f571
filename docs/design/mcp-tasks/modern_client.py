"""2026-07-28 Tasks extension (SEP-2663, `io.modelcontextprotocol/tasks`) with PyPI `mcp` 2.3.

mcp 2.3 has no tasks extension of its own, but its client extension surface is built for
one: a `ClientExtension` whose `ResultClaim(result_type="task")` (a) puts the identifier in
every request's `_meta["io.modelcontextprotocol/clientCapabilities"].extensions` and (b)
lets `tools/call` answer `{resultType: "task", ...}`. Then:
  - transparent: `await client.call_tool(...)` -> the claim's `resolve` polls `tasks/get`
    and returns the final CallToolResult;
  - manual: `await client.session.call_tool(..., allow_claimed=True)` -> the CreateTaskResult
    model; `tasks/get` / `tasks/update` / `tasks/cancel` via `client.session.send_request`
    with small request models (`name_param = "taskId"` makes the SDK send `Mcp-Name: <taskId>`).

Usage: modern_client.py URL [API_KEY]   -> prints one JSON object on the last line.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from typing import Any, Literal

import mcp_types as types
from mcp import Client
from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError

EXT = "io.modelcontextprotocol/tasks"
TERMINAL = {"completed", "failed", "cancelled"}
Status = Literal["working", "input_required", "completed", "failed", "cancelled"]


class TaskFields(types.Result):
    task_id: str
    status: Status
    status_message: str | None = None
    created_at: str
    last_updated_at: str
    ttl_ms: int | None = None
    poll_interval_ms: int | None = None


class CreateTaskResult(TaskFields):
    """`tools/call` answered by reference (resultType "task")."""

    result_type: Literal["task"] = "task"


class DetailedTask(TaskFields):
    """`tasks/get` result: status-specific payload inlined."""

    result: dict[str, Any] | None = None  # status completed: the CallToolResult
    error: dict[str, Any] | None = None  # status failed: the JSON-RPC error
    input_requests: dict[str, Any] | None = None  # status input_required


class TaskIdParams(types.RequestParams):
    task_id: str


class UpdateTaskParams(TaskIdParams):
    input_responses: dict[str, Any]


class GetTask(types.Request[TaskIdParams, Literal["tasks/get"]]):
    method: Literal["tasks/get"] = "tasks/get"
    params: TaskIdParams
    name_param = "taskId"  # SEP-2663: Mcp-Name carries the task id on tasks/*


class CancelTask(types.Request[TaskIdParams, Literal["tasks/cancel"]]):
    method: Literal["tasks/cancel"] = "tasks/cancel"
    params: TaskIdParams
    name_param = "taskId"


class UpdateTask(types.Request[UpdateTaskParams, Literal["tasks/update"]]):
    method: Literal["tasks/update"] = "tasks/update"
    params: UpdateTaskParams
    name_param = "taskId"


async def get_task(session: Any, task_id: str) -> DetailedTask:
    return await session.send_request(GetTask(params=TaskIdParams(task_id=task_id)), DetailedTask)


async def cancel_task(session: Any, task_id: str) -> None:
    await session.send_request(CancelTask(params=TaskIdParams(task_id=task_id)), types.EmptyResult)


async def update_task(session: Any, task_id: str, responses: dict[str, Any]) -> None:
    await session.send_request(
        UpdateTask(params=UpdateTaskParams(task_id=task_id, input_responses=responses)), types.EmptyResult
    )


async def wait_task(session: Any, task_id: str, first_poll_ms: int | None, timeout_s: float = 60) -> DetailedTask:
    interval = (first_poll_ms or 1000) / 1000
    deadline = time.monotonic() + timeout_s
    while True:
        await asyncio.sleep(interval)
        t = await get_task(session, task_id)
        if t.status in TERMINAL or t.status == "input_required":
            return t
        if time.monotonic() > deadline:
            raise TimeoutError(f"task {task_id} still {t.status}")
        interval = (t.poll_interval_ms or 1000) / 1000


async def resolve(created: CreateTaskResult, ctx: ClaimContext) -> types.CallToolResult:
    t = await wait_task(ctx.session, created.task_id, created.poll_interval_ms)
    if t.status == "completed" and t.result is not None:
        return types.CallToolResult.model_validate(t.result, by_name=False)
    if t.status == "failed" and t.error is not None:
        raise MCPError(code=t.error.get("code", -32603), message=t.error.get("message", "task failed"))
    raise RuntimeError(f"task {created.task_id} ended {t.status}")


class Tasks(ClientExtension):
    identifier = EXT

    def claims(self) -> list[ResultClaim[Any]]:
        return [ResultClaim(result_type="task", model=CreateTaskResult, resolve=resolve)]


async def main(url: str, key: str | None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    async with create_mcp_http_client(headers=headers) as http:
        async with Client(
            streamable_http_client(url, http_client=http), mode="auto", read_timeout_seconds=30, extensions=[Tasks()]
        ) as client:
            out["protocol_version"] = client.protocol_version
            caps = client.server_capabilities
            out["server_extensions"] = caps.extensions
            # 1. transparent: call_tool returns the final CallToolResult
            r = await client.call_tool("sleep", {"seconds": 0.5})
            out["transparent"] = r.content[0].text
            # 2. manual: create, poll, result inlined on tasks/get
            created = await client.session.call_tool("sleep", {"seconds": 1.0}, allow_claimed=True)
            out["created"] = created.model_dump(by_alias=True, mode="json", exclude_none=True)
            seen = []
            for _ in range(100):
                t = await get_task(client.session, created.task_id)
                seen.append(f"{t.status}:{t.status_message}")
                if t.status in TERMINAL:
                    break
                await asyncio.sleep((t.poll_interval_ms or 1000) / 1000)
            out["polled"] = seen
            out["final"] = t.model_dump(by_alias=True, mode="json", exclude_none=True)
            # 3. cancel (an empty ack), then observe
            c = await client.session.call_tool("sleep", {"seconds": 10}, allow_claimed=True)
            await cancel_task(client.session, c.task_id)
            out["after_cancel"] = (await get_task(client.session, c.task_id)).status
            await update_task(client.session, c.task_id, {})  # acknowledged; unknown keys ignored
            # 4. failure: status failed, error inlined
            f = await client.session.call_tool("sleep", {"seconds": 0.2, "fail": True}, allow_claimed=True)
            ft = await wait_task(client.session, f.task_id, f.poll_interval_ms)
            out["failed"] = [ft.status, ft.error]
            # 5. errors: unknown id -32602; tasks/result gone (-32601)
            try:
                await get_task(client.session, "no-such-task")
            except MCPError as e:
                out["unknown_id_error"] = e.code
            try:
                await client.session.send_request(
                    types.GetTaskPayloadRequest(params=types.GetTaskPayloadRequestParams(task_id=c.task_id)),
                    types.EmptyResult,
                )
            except MCPError as e:
                out["tasks_result_error"] = e.code
        # 6. a client that does not declare the extension: plain results, tasks/* -> -32021
        async with Client(streamable_http_client(url, http_client=http), mode="auto", read_timeout_seconds=30) as plain:
            out["undeclared_call"] = (await plain.call_tool("sleep", {"seconds": 0.1})).content[0].text
            try:
                await get_task(plain.session, created.task_id)
            except MCPError as e:
                out["undeclared_tasks_get_error"] = e.code
    return out


if __name__ == "__main__":
    result = asyncio.run(asyncio.wait_for(main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else None), 120))
    print(json.dumps(result))
