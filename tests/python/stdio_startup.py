"""Drive `toolgate stdio` with the PyPI `mcp` client while an upstream is not up.

Usage: stdio_startup.py TOOLGATE_BIN CONFIG_PATH TENANT

Launches `TOOLGATE_BIN stdio --config CONFIG_PATH --tenant TENANT` with
`stdio_client` and initializes within 30 s (the config's `startup_timeout` is far
longer: a gateway that held `initialize` until startup ended fails here). Then it
waits (bounded) for `everything__echo` to be listed — announced with
`notifications/tools/list_changed` when it arrives after the first list — calls it,
and calls two tools of the upstream `ghost`, which never answers: one the tenant's
patterns allow, one they do not. Prints one JSON object on the last stdout line; the
Rust test makes the assertions.
"""

import asyncio
import json
import sys

from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client


def texts(result) -> list:
    return [c.text for c in result.content if getattr(c, "type", None) == "text"]


async def call(session: ClientSession, name: str) -> dict:
    try:
        result = await session.call_tool(name, {"message": "hi"})
    except Exception as e:  # noqa: BLE001 - the test looks at what happened
        return {"raised": True, "error": repr(e)}
    return {"raised": False, "is_error": bool(result.is_error), "text": texts(result)}


async def main(binary: str, config: str, tenant: str) -> dict:
    out: dict = {}
    changed = asyncio.Event()
    announced = []

    async def on_message(message) -> None:
        if getattr(message, "method", None) == "notifications/tools/list_changed":
            announced.append(message)
            changed.set()

    params = StdioServerParameters(
        command=binary, args=["stdio", "--config", config, "--tenant", tenant]
    )
    async with stdio_client(params) as (read, write):
        async with ClientSession(
            read, write, read_timeout_seconds=60, message_handler=on_message
        ) as session:
            init = await asyncio.wait_for(session.initialize(), timeout=30)
            out["protocol_version"] = init.protocol_version
            first = [t.name for t in (await session.list_tools()).tools]
            out["first_list"] = first
            names = first
            for _ in range(120):  # bounded: 60 s
                if "everything__echo" in names:
                    break
                try:
                    await asyncio.wait_for(changed.wait(), timeout=0.5)
                except TimeoutError:
                    pass
                changed.clear()
                names = [t.name for t in (await session.list_tools()).tools]
            out["later_list"] = names
            out["list_changed"] = bool(announced) or "everything__echo" in first
            out["echo"] = await call(session, "everything__echo")
            out["ghost_allowed"] = await call(session, "ghost__visible_tool")
            out["ghost_hidden"] = await call(session, "ghost__hidden_tool")
            out["nowhere"] = await call(session, "nowhere__hidden_tool")
    return out


if __name__ == "__main__":
    binary, config, tenant = sys.argv[1], sys.argv[2], sys.argv[3]
    result = asyncio.run(asyncio.wait_for(main(binary, config, tenant), timeout=120))
    print(json.dumps(result))
