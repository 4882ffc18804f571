"""Prompts, resources, templates, completion and subscriptions through the gateway
with the PyPI `mcp` client, for upstreams that are server-everything mounts.

Usage: server_features.py URL API_KEY MODE PREFIX[,PREFIX...]
  API_KEY: a tenant's key, or "-" for none (an open gateway)
  MODE: "legacy" (initialize handshake, a session) or "auto" (2026-07-28 when offered)

For each PREFIX (an upstream name, or one that does not exist) tries every operation
on the items that upstream would have and records what happened, errors included, so
the Rust test can check both what a tenant may use and that what it may not use is
answered exactly like what does not exist. Subscriptions (sessions only) are tried on
the first PREFIX. Prints one JSON object on the last stdout line.
"""

import asyncio
import json
import sys

from mcp import Client, types
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp_types._types import PromptReference, ResourceTemplateReference

STATIC = "demo://resource/static/document/architecture.md"
DYNAMIC = "demo://resource/dynamic/text/2"
TEMPLATE = "demo://resource/dynamic/text/{resourceId}"


def uri(prefix: str, original: str) -> str:
    return f"toolgate://{prefix}/{original}"


async def attempt(coro) -> dict:
    try:
        return {"ok": True, **(await coro)}
    except Exception as e:  # noqa: BLE001 - the test compares what happened
        return {"ok": False, "error": str(e), "code": getattr(getattr(e, "error", None), "code", None)}


async def listed(client: Client, verb: str, key: str, field: str) -> list[str]:
    items: list[str] = []
    cursor = None
    for _ in range(50):  # bounded pagination
        page = await getattr(client, verb)(cursor=cursor, cache_mode="bypass")
        items.extend(str(getattr(i, field)) for i in getattr(page, key))
        cursor = page.next_cursor
        if not cursor:
            break
    return items


def texts(blocks) -> list[str]:
    return [b.text for b in blocks if getattr(b, "type", None) == "text"]


async def probe(client: Client, prefix: str) -> dict:
    async def get_simple():
        r = await client.get_prompt(f"{prefix}__simple-prompt")
        return {"text": [m.content.text for m in r.messages if m.content.type == "text"]}

    async def get_resource_prompt():
        r = await client.get_prompt(
            f"{prefix}__resource-prompt", {"resourceType": "Text", "resourceId": "3"}
        )
        return {"embedded": [str(m.content.resource.uri) for m in r.messages if m.content.type == "resource"]}

    async def read(target: str):
        r = await client.read_resource(target, cache_mode="bypass")
        return {"uris": [str(c.uri) for c in r.contents], "text": [getattr(c, "text", None) for c in r.contents]}

    async def links():
        r = await client.call_tool(f"{prefix}__get-resource-links", {"count": 2})
        if r.is_error:
            raise RuntimeError("tool error: " + " ".join(texts(r.content)))
        found = [str(b.uri) for b in r.content if getattr(b, "type", None) == "resource_link"]
        back = await read(found[0]) if found else {}
        return {"links": found, "read_back": back}

    async def complete_prompt():
        r = await client.complete(
            PromptReference(type="ref/prompt", name=f"{prefix}__completable-prompt"),
            {"name": "department", "value": "Eng"},
        )
        return {"values": list(r.completion.values)}

    async def complete_template():
        r = await client.complete(
            ResourceTemplateReference(type="ref/resource", uri=uri(prefix, TEMPLATE)),
            {"name": "resourceId", "value": "1"},
        )
        return {"values": list(r.completion.values)}

    async def tool_text(name: str, args: dict):
        r = await client.call_tool(f"{prefix}__{name}", args)
        if r.is_error:
            raise RuntimeError("tool error: " + " ".join(texts(r.content)))
        return {"text": texts(r.content)}

    return {
        "sampling": await attempt(tool_text("trigger-sampling-request", {"prompt": f"sample for {prefix}", "maxTokens": 20})),
        "elicitation": await attempt(tool_text("trigger-elicitation-request", {})),
        "roots": await attempt(tool_text("get-roots-list", {})),
        "get_simple": await attempt(get_simple()),
        "get_resource_prompt": await attempt(get_resource_prompt()),
        "read_static": await attempt(read(uri(prefix, STATIC))),
        "read_dynamic": await attempt(read(uri(prefix, DYNAMIC))),
        "links": await attempt(links()),
        "complete_prompt": await attempt(complete_prompt()),
        "complete_template": await attempt(complete_template()),
    }


async def subscriptions(client: Client, prefix: str, updates: asyncio.Queue) -> dict:
    target = uri(prefix, STATIC)
    out: dict = {"uri": target}
    out["subscribe"] = await attempt(_ok(client.subscribe_resource(target)))
    # server-everything sends updates for subscribed URIs once this tool starts them.
    out["toggle"] = await attempt(_ok(client.call_tool(f"{prefix}__toggle-subscriber-updates", {})))
    try:
        out["updated"] = await asyncio.wait_for(updates.get(), timeout=20)
    except TimeoutError:
        out["updated"] = None
    out["unsubscribe"] = await attempt(_ok(client.unsubscribe_resource(target)))
    await attempt(_ok(client.call_tool(f"{prefix}__toggle-subscriber-updates", {})))
    return out


async def _ok(coro) -> dict:
    await coro
    return {}


async def main(url: str, key: str, mode: str, prefixes: list[str]) -> dict:
    out: dict = {"mode": mode}
    updates: asyncio.Queue = asyncio.Queue()

    async def on_message(message) -> None:
        root = getattr(message, "root", message)
        if getattr(root, "method", None) == "notifications/resources/updated":
            await updates.put(str(root.params.uri))

    asked: list[str] = []

    async def sampling(context, params) -> types.CreateMessageResult:
        prompt = " ".join(
            getattr(m.content, "text", "") for m in params.messages if hasattr(m, "content")
        )
        asked.append(f"sampling: {prompt}")
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(type="text", text=f"sampled reply to [{prompt}]"),
            model="toolgate-test-model",
            stop_reason="endTurn",
        )

    async def elicitation(context, params) -> types.ElicitResult:
        asked.append(f"elicitation: {getattr(params, 'message', '')}")
        return types.ElicitResult(action="accept", content={"name": "Ada from the test"})

    async def roots(context) -> types.ListRootsResult:
        asked.append("roots")
        return types.ListRootsResult(roots=[types.Root(uri="file:///toolgate-test-root", name="test root")])

    headers = {} if key == "-" else {"Authorization": f"Bearer {key}"}
    http_client = create_mcp_http_client(headers=headers)
    async with http_client:
        transport = streamable_http_client(url, http_client=http_client)
        async with Client(
            transport,
            mode=mode,
            read_timeout_seconds=60,
            message_handler=on_message,
            sampling_callback=sampling,
            elicitation_callback=elicitation,
            list_roots_callback=roots,
        ) as client:
            out["protocol_version"] = client.protocol_version
            out["prompts"] = await listed(client, "list_prompts", "prompts", "name")
            out["resources"] = await listed(client, "list_resources", "resources", "uri")
            out["templates"] = await listed(
                client, "list_resource_templates", "resource_templates", "uri_template"
            )
            out["probes"] = {p: await probe(client, p) for p in prefixes}
            out["asked"] = asked
            if mode == "legacy" and key == "-":
                out["subscriptions"] = await subscriptions(client, prefixes[0], updates)
    return out


if __name__ == "__main__":
    url, key, mode = sys.argv[1:4]
    prefixes = sys.argv[4].split(",")
    result = asyncio.run(asyncio.wait_for(main(url, key, mode, prefixes), timeout=150))
    print(json.dumps(result, default=str))
