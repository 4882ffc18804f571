"""Background tool calls (MCP Tasks) through the gateway with PyPI `mcp` 2.3.

Usage: mcp_tasks.py URL API_KEY MODE PREFIX
  MODE: "legacy" (2025-11-25 session, core tasks) or "modern" (2026-07-28, the
        `io.modelcontextprotocol/tasks` extension declared per request), or "relay":
        both generations calling server-everything's `simulate-research-query`, a
        tool that server runs only as its own task (PREFIX: its upstream name), or
        "input": a 2025-11-25 session runs that tool with `ambiguous: true`, sees the
        task `input_required`, and answers the server's elicitation when it arrives on
        `tasks/result` (the 2025 spec's input round trip)
  PREFIX: the upstream's name in the catalog; its tools are `slow` (taskSupport
        optional; progress in steps; `fail` answers isError), `slow_required`
        (required), `echo` (forbidden) and `cancelled` (how many calls the upstream
        saw cancelled).

mcp 2.3 ships task *types* only (see docs/design/mcp-tasks.md): the legacy side
creates tasks through the session's dispatcher (its tools/call result check rejects
a CreateTaskResult) and uses the typed tasks/* requests; the modern side is a
`ClientExtension` with a `ResultClaim(result_type="task")`, which also stamps the
extension into every request's client capabilities. Prints one JSON object on the
last stdout line; the Rust test (tests/mcp_tasks.rs) makes the assertions.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from typing import Any, Literal

import mcp_types as types
from mcp import Client
from mcp.client.extension import ClaimContext, ClientExtension, NotificationBinding, ResultClaim
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError

TERMINAL = {"completed", "failed", "cancelled"}
EXT = "io.modelcontextprotocol/tasks"


def texts(result: Any) -> list[str]:
    return [c.text for c in result.content if getattr(c, "type", None) == "text"]


async def error_of(awaitable: Any) -> list[Any] | str:
    """[code, message] of the JSON-RPC error the request answers, or what it answered."""
    try:
        answered = await awaitable
    except MCPError as e:
        return [e.code, e.message]
    return f"no error: {answered!r}"


# ---------------------------------------------------------------------------------
# 2025-11-25


async def create_task(client: Client, name: str, args: dict[str, Any]) -> dict[str, Any]:
    params = {"name": name, "arguments": args, "task": {"ttl": 60_000}}
    return await client.session._dispatcher.send_raw_request("tools/call", params, {"timeout": 30})  # noqa: SLF001


async def get_task(client: Client, task_id: str) -> types.GetTaskResult:
    return await client.session.send_request(
        types.GetTaskRequest(params=types.GetTaskRequestParams(task_id=task_id)), types.GetTaskResult
    )


async def poll(client: Client, task_id: str, timeout_s: float = 60) -> tuple[types.GetTaskResult, list[str]]:
    seen: list[str] = []
    deadline = time.monotonic() + timeout_s
    for _ in range(1000):  # bounded in count and time
        t = await get_task(client, task_id)
        seen.append(f"{t.status}:{t.status_message}")
        if t.status in TERMINAL or time.monotonic() > deadline:
            return t, seen
        await asyncio.sleep((t.poll_interval or 1000) / 1000)
    return t, seen


async def task_result(client: Client, task_id: str) -> types.CallToolResult:
    return await client.session.send_request(
        types.GetTaskPayloadRequest(params=types.GetTaskPayloadRequestParams(task_id=task_id)),
        types.CallToolResult,
        request_read_timeout_seconds=60,
    )


async def cancel_task(client: Client, task_id: str) -> types.CancelTaskResult:
    return await client.session.send_request(
        types.CancelTaskRequest(params=types.CancelTaskRequestParams(task_id=task_id)), types.CancelTaskResult
    )


async def legacy(url: str, key: str, prefix: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    notes: list[types.TaskStatusNotificationParams] = []

    async def on_status(params: types.TaskStatusNotificationParams) -> None:
        notes.append(params)

    class TaskStatusObserver(ClientExtension):
        # The 2025 notification tables lack notifications/tasks/status: without a
        # binding the session drops it.
        identifier = "example.test/task-status"

        def notifications(self) -> list[NotificationBinding[Any]]:
            return [
                NotificationBinding(
                    method="notifications/tasks/status", params_type=types.TaskStatusNotificationParams, handler=on_status
                )
            ]

    slow, required, echo = f"{prefix}__slow", f"{prefix}__slow_required", f"{prefix}__echo"
    async with create_mcp_http_client(headers={"Authorization": f"Bearer {key}"}) as http:
        async with Client(
            streamable_http_client(url, http_client=http),
            mode="legacy",
            read_timeout_seconds=30,
            extensions=[TaskStatusObserver()],
        ) as client:
            out["protocol_version"] = client.protocol_version
            caps = client.server_capabilities
            out["tasks_capability"] = caps.tasks.model_dump(by_alias=True, exclude_none=True) if caps.tasks else None
            tools = await client.list_tools()
            out["task_support"] = {
                t.name: (t.execution.task_support if t.execution else None)
                for t in tools.tools
                if t.name.startswith(f"{prefix}__")
            }

            # 1. create -> poll (progress as statusMessage) -> tasks/result
            raw = await create_task(client, slow, {"seconds": 3, "steps": 3})
            out["created_raw"] = raw
            created = types.CreateTaskResult.model_validate(raw, by_name=False)
            task_id = created.task.task_id
            final, seen = await poll(client, task_id)
            out["polled"] = seen
            out["final"] = final.model_dump(by_alias=True, mode="json", exclude_none=True)
            result = await task_result(client, task_id)
            out["result"] = result.model_dump(by_alias=True, mode="json", exclude_none=True)

            # 2. cancel a running task: the Task, cancelled; again: -32602; its result: an error
            running = await create_task(client, slow, {"seconds": 30, "steps": 30})
            running_id = running["task"]["taskId"]
            await asyncio.sleep(1.0)
            out["cancel"] = (await cancel_task(client, running_id)).model_dump(by_alias=True, exclude_none=True)
            out["after_cancel"] = (await get_task(client, running_id)).status
            out["cancel_again"] = await error_of(cancel_task(client, running_id))
            out["cancelled_result"] = await error_of(task_result(client, running_id))

            # 3. a tool that answers isError: the task fails, tasks/result gives that result
            failing = await create_task(client, slow, {"seconds": 0.2, "steps": 1, "fail": True})
            failed, _ = await poll(client, failing["task"]["taskId"])
            out["failed"] = failed.model_dump(by_alias=True, mode="json", exclude_none=True)
            failed_result = await task_result(client, failing["task"]["taskId"])
            out["failed_result"] = failed_result.model_dump(by_alias=True, mode="json", exclude_none=True)

            # 4. a required tool: plainly -32601, as a task it runs
            out["required_plain"] = await error_of(client.call_tool(required, {"seconds": 0.1, "steps": 1}))
            req = await create_task(client, required, {"seconds": 0.2, "steps": 1})
            out["required_task"] = (await poll(client, req["task"]["taskId"]))[0].status
            # 5. a forbidden tool as a task: -32601; an unknown tool: -32602, as a plain call
            out["forbidden_task"] = await error_of(create_task(client, echo, {"message": "x"}))
            out["unknown_tool_task"] = await error_of(create_task(client, f"{prefix}__nothing", {}))
            out["unknown_tool_plain"] = await error_of(client.call_tool(f"{prefix}__nothing", {}))
            # 6. the optional tool plainly: a plain result
            out["plain_call"] = texts(await client.call_tool(slow, {"seconds": 0.1, "steps": 1}))
            # 7. tasks/list, an unknown id
            listed = await client.session.send_request(types.ListTasksRequest(), types.ListTasksResult)
            out["list"] = sorted(t.task_id for t in listed.tasks)
            out["created_ids"] = sorted([task_id, running_id, failing["task"]["taskId"], req["task"]["taskId"]])
            out["unknown_id"] = await error_of(get_task(client, "AAAAAAAAAAAAAAAAAAAAAA"))
            out["upstream_cancelled"] = texts(await client.call_tool(f"{prefix}__cancelled", {}))
            await asyncio.sleep(0.3)
            out["status_notifications"] = [f"{n.task_id}:{n.status}" for n in notes]
            out["task_id"] = task_id
            out["cancelled_id"] = running_id
    return out


# ---------------------------------------------------------------------------------
# 2026-07-28

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
    result_type: Literal["task"] = "task"


class DetailedTask(TaskFields):
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    input_requests: dict[str, Any] | None = None


class TaskIdParams(types.RequestParams):
    task_id: str


class UpdateTaskParams(TaskIdParams):
    input_responses: dict[str, Any]


class GetTask(types.Request[TaskIdParams, Literal["tasks/get"]]):
    method: Literal["tasks/get"] = "tasks/get"
    params: TaskIdParams
    name_param = "taskId"  # Mcp-Name carries the task id


class CancelTask(types.Request[TaskIdParams, Literal["tasks/cancel"]]):
    method: Literal["tasks/cancel"] = "tasks/cancel"
    params: TaskIdParams
    name_param = "taskId"


class UpdateTask(types.Request[UpdateTaskParams, Literal["tasks/update"]]):
    method: Literal["tasks/update"] = "tasks/update"
    params: UpdateTaskParams
    name_param = "taskId"


async def get_detailed(session: Any, task_id: str) -> DetailedTask:
    return await session.send_request(GetTask(params=TaskIdParams(task_id=task_id)), DetailedTask)


async def wait_detailed(session: Any, task_id: str, timeout_s: float = 60) -> tuple[DetailedTask, list[str]]:
    seen: list[str] = []
    deadline = time.monotonic() + timeout_s
    for _ in range(1000):  # bounded in count and time
        t = await get_detailed(session, task_id)
        seen.append(f"{t.status}:{t.status_message}")
        if t.status in TERMINAL or time.monotonic() > deadline:
            return t, seen
        await asyncio.sleep((t.poll_interval_ms or 1000) / 1000)
    return t, seen


async def resolve(created: CreateTaskResult, ctx: ClaimContext) -> types.CallToolResult:
    t, _ = await wait_detailed(ctx.session, created.task_id)
    if t.status == "completed" and t.result is not None:
        return types.CallToolResult.model_validate(t.result, by_name=False)
    if t.status == "failed" and t.error is not None:
        raise MCPError(code=t.error.get("code", -32603), message=t.error.get("message", "task failed"))
    raise RuntimeError(f"task {created.task_id} ended {t.status}")


class Tasks(ClientExtension):
    identifier = EXT

    def claims(self) -> list[ResultClaim[Any]]:
        return [ResultClaim(result_type="task", model=CreateTaskResult, resolve=resolve)]


async def modern(url: str, key: str, prefix: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    slow, required, echo = f"{prefix}__slow", f"{prefix}__slow_required", f"{prefix}__echo"
    async with create_mcp_http_client(headers={"Authorization": f"Bearer {key}"}) as http:
        async with Client(
            streamable_http_client(url, http_client=http), mode="auto", read_timeout_seconds=30, extensions=[Tasks()]
        ) as client:
            out["protocol_version"] = client.protocol_version
            out["extensions"] = client.server_capabilities.extensions
            # 1. transparent: the SDK resolves the task to the final result
            out["transparent"] = texts(await client.call_tool(slow, {"seconds": 0.5, "steps": 1}))
            # 2. manual: create, poll with progress, the result inlined
            created = await client.session.call_tool(slow, {"seconds": 3, "steps": 3}, allow_claimed=True)
            out["created"] = created.model_dump(by_alias=True, mode="json", exclude_none=True)
            final, seen = await wait_detailed(client.session, created.task_id)
            out["polled"] = seen
            out["final"] = final.model_dump(by_alias=True, mode="json", exclude_none=True)
            # 3. cancel (an ack), then cancelled; update (an ack); cancel again (an ack)
            running = await client.session.call_tool(slow, {"seconds": 30, "steps": 30}, allow_claimed=True)
            await asyncio.sleep(1.0)
            await client.session.send_request(CancelTask(params=TaskIdParams(task_id=running.task_id)), types.EmptyResult)
            out["after_cancel"] = (await get_detailed(client.session, running.task_id)).status
            await client.session.send_request(
                UpdateTask(params=UpdateTaskParams(task_id=running.task_id, input_responses={})), types.EmptyResult
            )
            await client.session.send_request(CancelTask(params=TaskIdParams(task_id=running.task_id)), types.EmptyResult)
            out["acks"] = "ok"
            # 4. a tool that answers isError: completed, the result inlined
            failing = await client.session.call_tool(slow, {"seconds": 0.2, "steps": 1, "fail": True}, allow_claimed=True)
            failed, _ = await wait_detailed(client.session, failing.task_id)
            out["failed"] = failed.model_dump(by_alias=True, mode="json", exclude_none=True)
            # 5. a forbidden tool: a plain result even for a declaring client; required: a task
            plain = await client.session.call_tool(echo, {"message": "hi"}, allow_claimed=True)
            out["forbidden_call"] = type(plain).__name__
            req = await client.session.call_tool(required, {"seconds": 0.2, "steps": 1}, allow_claimed=True)
            out["required_call"] = type(req).__name__
            out["required_final"] = (await wait_detailed(client.session, req.task_id))[0].status
            # 6. errors: unknown id -32602, tasks/result and tasks/list -32601
            out["unknown_id"] = await error_of(get_detailed(client.session, "AAAAAAAAAAAAAAAAAAAAAA"))
            out["tasks_result"] = await error_of(
                client.session.send_request(
                    types.GetTaskPayloadRequest(params=types.GetTaskPayloadRequestParams(task_id=created.task_id)),
                    types.EmptyResult,
                )
            )
            out["tasks_list"] = await error_of(client.session.send_request(types.ListTasksRequest(), types.EmptyResult))
            out["upstream_cancelled"] = texts(await client.call_tool(f"{prefix}__cancelled", {}))
        # 7. a client that does not declare the extension: plain results; required -32021; tasks/* -32021
        async with Client(streamable_http_client(url, http_client=http), mode="auto", read_timeout_seconds=30) as plain:
            out["undeclared_call"] = texts(await plain.call_tool(slow, {"seconds": 0.1, "steps": 1}))
            out["undeclared_required"] = await error_of(plain.call_tool(required, {"seconds": 0.1, "steps": 1}))
            out["undeclared_get"] = await error_of(get_detailed(plain.session, created.task_id))
    return out


async def relay(url: str, key: str, prefix: str) -> dict[str, Any]:
    """An upstream's own task behind a gateway task, seen by both generations."""
    out: dict[str, Any] = {}
    research = f"{prefix}__simulate-research-query"
    async with create_mcp_http_client(headers={"Authorization": f"Bearer {key}"}) as http:
        async with Client(
            streamable_http_client(url, http_client=http), mode="legacy", read_timeout_seconds=30
        ) as client:
            created = await create_task(client, research, {"topic": "gateways"})
            task_id = created["task"]["taskId"]
            final, seen = await poll(client, task_id)
            out["legacy_polled"] = seen
            out["legacy_status"] = final.status
            out["legacy_result"] = texts(await task_result(client, task_id))
            running = await create_task(client, research, {"topic": "cancel me"})
            await asyncio.sleep(0.5)
            cancelled = await cancel_task(client, running["task"]["taskId"])
            out["legacy_cancelled"] = cancelled.status
            out["legacy_plain"] = await error_of(client.call_tool(research, {"topic": "plain"}))
        async with Client(
            streamable_http_client(url, http_client=http), mode="auto", read_timeout_seconds=30, extensions=[Tasks()]
        ) as client:
            out["modern_protocol"] = client.protocol_version
            out["modern_result"] = texts(await client.call_tool(research, {"topic": "sessionless"}))
    return out


async def input_round_trip(url: str, key: str, prefix: str) -> dict[str, Any]:
    """A relayed task that asks for input, answered on `tasks/result` (2025-11-25)."""
    out: dict[str, Any] = {}
    research = f"{prefix}__simulate-research-query"
    asked: list[dict[str, Any]] = []

    async def elicitation(context: Any, params: Any) -> types.ElicitResult:
        schema = params.requested_schema
        schema = schema if isinstance(schema, dict) else schema.model_dump(by_alias=True, exclude_none=True)
        choice = schema["properties"]["interpretation"]["oneOf"][0]["const"]
        meta = params.meta or {}
        meta = meta if isinstance(meta, dict) else meta.model_dump(by_alias=True)
        asked.append({"message": params.message, "related": meta.get("io.modelcontextprotocol/related-task")})
        return types.ElicitResult(action="accept", content={"interpretation": choice})

    async with create_mcp_http_client(headers={"Authorization": f"Bearer {key}"}) as http:
        async with Client(
            streamable_http_client(url, http_client=http),
            mode="legacy",
            read_timeout_seconds=30,
            elicitation_callback=elicitation,
        ) as client:
            created = await create_task(client, research, {"topic": "python", "ambiguous": True})
            task_id = created["task"]["taskId"]
            out["task_id"] = task_id
            seen: list[str] = []
            deadline = time.monotonic() + 30
            for _ in range(300):  # bounded in count and time
                t = await get_task(client, task_id)
                seen.append(t.status)
                if t.status != "working" or time.monotonic() > deadline:
                    break
                await asyncio.sleep(0.1)
            out["seen"] = seen
            out["result"] = texts(await task_result(client, task_id))
            out["asked"] = asked
            out["final"] = (await get_task(client, task_id)).status
    return out


async def main(url: str, key: str, mode: str, prefix: str) -> dict[str, Any]:
    if mode == "input":
        return await input_round_trip(url, key, prefix)
    if mode == "legacy":
        return await legacy(url, key, prefix)
    if mode == "relay":
        return await relay(url, key, prefix)
    return await modern(url, key, prefix)


if __name__ == "__main__":
    url, key, mode, prefix = sys.argv[1:5]
    print(json.dumps(asyncio.run(asyncio.wait_for(main(url, key, mode, prefix), 150))))
