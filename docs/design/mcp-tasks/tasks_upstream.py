"""An MCP upstream that implements Tasks itself, on PyPI `mcp` 2.3 (which ships task
*types* only, no task runtime): both generations on one Streamable HTTP endpoint.

- 2025-11-25 (initialize handshake, session): `capabilities.tasks`, tools carry
  `execution.taskSupport`, `tools/call` with `params.task` -> CreateTaskResult
  `{task: {...}}`, then `tasks/get`, `tasks/result` (blocks until terminal),
  `tasks/list`, `tasks/cancel` (returns the Task), `notifications/tasks/status`.
- 2026-07-28 (`io.modelcontextprotocol/tasks` extension, SEP-2663): advertised in
  `server/discover` `capabilities.extensions`; a `tools/call` whose per-request
  `_meta` clientCapabilities declare the extension gets `{resultType: "task", ...}`;
  `tasks/get` (DetailedTask with inlined `result`/`error`), `tasks/update`,
  `tasks/cancel` (empty acks).

Usage: tasks_upstream.py PORT   (binds 127.0.0.1 only)

Tools: `sleep` (taskSupport optional; args seconds, fail), `sleep_required`
(taskSupport required), `echo` (no execution -> forbidden).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import secrets
import sys
from dataclasses import dataclass, field
from typing import Any

import mcp_types as types
import uvicorn
from mcp.server.context import CallNext, ServerRequestContext
from mcp.server.lowlevel.server import NotificationOptions, Server
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, METHOD_NOT_FOUND
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import BaseModel, ConfigDict, Field

EXT = "io.modelcontextprotocol/tasks"
TERMINAL = {"completed", "failed", "cancelled"}
POLL_MS = 200
DEFAULT_TTL_MS = 60_000


def now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat().replace("+00:00", "Z")


@dataclass
class TaskRecord:
    task_id: str
    modern: bool
    ttl_ms: int | None
    status: str = "working"
    status_message: str | None = None
    created_at: str = field(default_factory=now)
    last_updated_at: str = field(default_factory=now)
    result: dict[str, Any] | None = None  # CallToolResult wire dict
    error: dict[str, Any] | None = None  # JSON-RPC error object
    done: asyncio.Event = field(default_factory=asyncio.Event)
    runner: asyncio.Task[None] | None = None
    notify: Any = None  # legacy: the session to send notifications/tasks/status on

    def wire(self) -> dict[str, Any]:
        """The Task object in this record's generation's spelling."""
        out: dict[str, Any] = {
            "taskId": self.task_id,
            "status": self.status,
            "createdAt": self.created_at,
            "lastUpdatedAt": self.last_updated_at,
        }
        if self.status_message is not None:
            out["statusMessage"] = self.status_message
        if self.modern:
            out["ttlMs"] = self.ttl_ms
            out["pollIntervalMs"] = POLL_MS
        else:
            out["ttl"] = self.ttl_ms
            out["pollInterval"] = POLL_MS
        return out


TASKS: dict[str, TaskRecord] = {}

TOOLS = [
    types.Tool(
        name="sleep",
        description="Sleeps `seconds`, reporting progress in statusMessage; fails if `fail`.",
        input_schema={
            "type": "object",
            "properties": {"seconds": {"type": "number"}, "fail": {"type": "boolean"}},
        },
        execution=types.ToolExecution(task_support="optional"),
    ),
    types.Tool(
        name="sleep_required",
        description="Like sleep, but may only be called as a task.",
        input_schema={"type": "object", "properties": {"seconds": {"type": "number"}}},
        execution=types.ToolExecution(task_support="required"),
    ),
    types.Tool(
        name="echo",
        description="Echoes `message` (never a task).",
        input_schema={"type": "object", "properties": {"message": {"type": "string"}}},
    ),
]
SUPPORT = {t.name: (t.execution.task_support if t.execution else None) or "forbidden" for t in TOOLS}


async def run_tool(name: str, args: dict[str, Any], rec: TaskRecord | None = None) -> dict[str, Any]:
    """The tool body: returns a CallToolResult wire dict."""
    if name == "echo":
        return {"content": [{"type": "text", "text": str(args.get("message", ""))}]}
    seconds = float(args.get("seconds", 1))
    steps = 4
    for i in range(steps):
        if rec is not None:
            await set_status(rec, "working", f"step {i + 1}/{steps}")
        await asyncio.sleep(seconds / steps)
    if args.get("fail"):
        raise MCPError(code=-32603, message="sleep asked to fail")
    return {"content": [{"type": "text", "text": f"slept {seconds}s"}], "isError": False}


async def set_status(rec: TaskRecord, status: str, message: str | None = None) -> None:
    if rec.status in TERMINAL:
        return  # terminal states never change (a cancelled task stays cancelled)
    rec.status, rec.status_message, rec.last_updated_at = status, message, now()
    if status in TERMINAL:
        rec.done.set()
    if rec.notify is not None:  # 2025-11-25: optional notifications/tasks/status
        try:
            note = types.TaskStatusNotification(params=types.TaskStatusNotificationParams.model_validate(rec.wire()))
            await rec.notify.send_notification(note)
        except Exception as e:  # noqa: BLE001 - notifications are best effort by spec
            print(f"status notification not sent: {e!r}", file=sys.stderr)


async def execute(rec: TaskRecord, name: str, args: dict[str, Any]) -> None:
    try:
        result = await run_tool(name, args, rec)
        if rec.status in TERMINAL:
            return
        rec.result = result
        # 2025-11-25: isError:true -> failed; 2026-07-28: isError:true stays completed.
        await set_status(rec, "failed" if (result.get("isError") and not rec.modern) else "completed")
    except MCPError as e:
        rec.error = {"code": e.error.code, "message": e.error.message}
        await set_status(rec, "failed", e.error.message)
    except asyncio.CancelledError:
        await set_status(rec, "cancelled", "cancelled by request")


def create_task(name: str, args: dict[str, Any], *, modern: bool, ttl: int | None, session: Any) -> TaskRecord:
    rec = TaskRecord(task_id=secrets.token_urlsafe(24), modern=modern, ttl_ms=ttl)
    rec.notify = None if modern else session
    TASKS[rec.task_id] = rec  # stored before the CreateTaskResult is returned
    rec.runner = asyncio.get_running_loop().create_task(execute(rec, name, args))
    return rec


def declared_tasks_extension(ctx: ServerRequestContext[Any, Any]) -> bool:
    caps = ctx.session.client_capabilities
    return bool(caps and caps.extensions and EXT in caps.extensions)


async def tasks_middleware(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> Any:
    """Intercepts task-augmented `tools/call` before the runner's result sieve.

    A middleware result is trusted as-is, which is what lets a 2025-11-25 `tools/call`
    answer with a CreateTaskResult (the SDK's 2025 surface only admits CallToolResult).
    """
    if ctx.method != "tools/call" or ctx.request_id is None:
        return await call_next(ctx)
    params = dict(ctx.params or {})
    name, args = params.get("name"), params.get("arguments") or {}
    support = SUPPORT.get(name) if isinstance(name, str) else None
    if support is None:
        return await call_next(ctx)
    modern = ctx.protocol_version in MODERN_PROTOCOL_VERSIONS
    if modern:
        if support != "forbidden" and declared_tasks_extension(ctx):
            # The server decides; here every eligible call from a declaring client is a task.
            rec = create_task(name, args, modern=True, ttl=DEFAULT_TTL_MS, session=None)
            return {"resultType": "task", **rec.wire()}
        return await call_next(ctx)
    task = params.get("task")
    if task is None:
        if support == "required":
            raise MCPError(code=METHOD_NOT_FOUND, message=f"tool {name!r} requires task augmentation")
        return await call_next(ctx)
    if support == "forbidden":
        raise MCPError(code=METHOD_NOT_FOUND, message=f"tool {name!r} does not support tasks")
    ttl = task.get("ttl") if isinstance(task, dict) else None
    rec = create_task(name, args, modern=False, ttl=min(ttl or DEFAULT_TTL_MS, 3_600_000), session=ctx.session)
    return {"task": rec.wire()}


class TaskIdParams(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)
    task_id: str = Field(alias="taskId")


class UpdateParams(TaskIdParams):
    input_responses: dict[str, Any] = Field(default_factory=dict, alias="inputResponses")


class ListParams(BaseModel):
    model_config = ConfigDict(extra="allow")
    cursor: str | None = None


def lookup(ctx: ServerRequestContext[Any, Any], task_id: str) -> TaskRecord:
    modern = ctx.protocol_version in MODERN_PROTOCOL_VERSIONS
    if modern and not declared_tasks_extension(ctx):
        raise MCPError(
            code=-32021,
            message="Missing required client capability",
            data={"requiredCapabilities": {"extensions": {EXT: {}}}},
        )
    rec = TASKS.get(task_id)
    if rec is None or rec.modern != modern:
        raise MCPError(code=INVALID_PARAMS, message="Failed to retrieve task: Task not found")
    return rec


async def on_tasks_get(ctx: ServerRequestContext[Any, Any], p: TaskIdParams) -> dict[str, Any]:
    rec = lookup(ctx, p.task_id)
    out = rec.wire()
    if rec.modern:  # DetailedTask: the outcome is inlined
        if rec.status == "completed":
            out["result"] = rec.result
        elif rec.status == "failed":
            out["error"] = rec.error or {"code": -32603, "message": rec.status_message or "failed"}
    return out


async def on_tasks_result(ctx: ServerRequestContext[Any, Any], p: TaskIdParams) -> dict[str, Any]:
    if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
        raise MCPError(code=METHOD_NOT_FOUND, message="Method not found", data="tasks/result")
    rec = lookup(ctx, p.task_id)
    await asyncio.wait_for(rec.done.wait(), timeout=600)  # blocks until terminal
    related = {"io.modelcontextprotocol/related-task": {"taskId": rec.task_id}}
    if rec.error is not None:
        raise MCPError(code=rec.error["code"], message=rec.error["message"])
    if rec.status == "cancelled":
        raise MCPError(code=INVALID_PARAMS, message="task was cancelled")
    return {**(rec.result or {}), "_meta": related}


async def on_tasks_list(ctx: ServerRequestContext[Any, Any], p: ListParams) -> dict[str, Any]:
    if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
        raise MCPError(code=METHOD_NOT_FOUND, message="Method not found", data="tasks/list")
    return {"tasks": [r.wire() for r in TASKS.values() if not r.modern]}


async def on_tasks_cancel(ctx: ServerRequestContext[Any, Any], p: TaskIdParams) -> dict[str, Any]:
    rec = lookup(ctx, p.task_id)
    if rec.status in TERMINAL:
        if rec.modern:
            return {}  # 2026-07-28: cancel is an ack, even when it can no longer take effect
        raise MCPError(code=INVALID_PARAMS, message=f"Cannot cancel task: already in terminal status '{rec.status}'")
    await set_status(rec, "cancelled", "cancelled by request")
    if rec.runner is not None:
        rec.runner.cancel()
    return {} if rec.modern else rec.wire()


async def on_tasks_update(ctx: ServerRequestContext[Any, Any], p: UpdateParams) -> dict[str, Any]:
    if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
        raise MCPError(code=METHOD_NOT_FOUND, message="Method not found", data="tasks/update")
    lookup(ctx, p.task_id)
    return {}  # no tool here asks for input; unknown keys are ignored per SEP-2663


class TasksServer(Server[Any]):
    def get_capabilities(self, notification_options=None, experimental_capabilities=None, extensions=None, *, protocol_version=None):  # type: ignore[override]
        caps = super().get_capabilities(
            notification_options, experimental_capabilities, extensions, protocol_version=protocol_version
        )
        if protocol_version not in MODERN_PROTOCOL_VERSIONS:
            caps.tasks = types.ServerTasksCapability(
                list=types.TasksListCapability(),
                cancel=types.TasksCancelCapability(),
                requests=types.ServerTasksRequestsCapability(
                    tools=types.TasksToolsCapability(call=types.TasksCallCapability())
                ),
            )
        return caps


async def on_list_tools(ctx: ServerRequestContext[Any, Any], params: Any) -> types.ListToolsResult:
    return types.ListToolsResult(tools=TOOLS)


async def on_call_tool(ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams) -> Any:
    """A plain (not task-augmented) call."""
    return types.CallToolResult.model_validate(await run_tool(params.name, params.arguments or {}), by_name=False)


def build() -> TasksServer:
    server = TasksServer("tasks-upstream", version="0.1.0", on_list_tools=on_list_tools, on_call_tool=on_call_tool)
    server.extensions[EXT] = {}  # advertised in server/discover capabilities.extensions (2026-07-28 only)
    server.middleware.append(tasks_middleware)
    server.add_request_handler("tasks/get", TaskIdParams, on_tasks_get)
    server.add_request_handler("tasks/result", TaskIdParams, on_tasks_result)
    server.add_request_handler("tasks/list", ListParams, on_tasks_list)
    server.add_request_handler("tasks/cancel", TaskIdParams, on_tasks_cancel)
    server.add_request_handler("tasks/update", UpdateParams, on_tasks_update)
    return server


if __name__ == "__main__":
    port = int(sys.argv[1])
    app = build().streamable_http_app(host="127.0.0.1")
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")
