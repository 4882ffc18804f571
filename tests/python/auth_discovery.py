"""Follows MCP authorization discovery the way the official Python SDK (mcp 2.3) does,
with the SDK's own helpers: an unauthenticated request to the MCP endpoint, the
`resource_metadata` of its 401 challenge, the discovery URLs in the SDK's order, the
metadata parsed by the SDK's RFC 9728 model, and the SDK's resource match rule.

Usage: auth_discovery.py MCP_URL
Prints one JSON line: status, challenge, metadata, and whether the resource matches.
"""

import asyncio
import json
import sys

import httpx2
from mcp.client.auth.utils import (
    build_protected_resource_metadata_discovery_urls,
    extract_resource_metadata_from_www_auth,
    handle_protected_resource_response,
)
from mcp.shared.auth_utils import check_resource_allowed, resource_url_from_server_url

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "auth-discovery", "version": "1"},
    },
}


async def main(server_url: str) -> None:
    async with httpx2.AsyncClient(timeout=30) as client:
        first = await client.post(
            server_url,
            json=INITIALIZE,
            headers={"Accept": "application/json, text/event-stream"},
        )
        www_auth_url = extract_resource_metadata_from_www_auth(first)
        tried = []
        metadata = None
        for url in build_protected_resource_metadata_discovery_urls(www_auth_url, server_url):
            tried.append(url)
            metadata = await handle_protected_resource_response(await client.get(url))
            if metadata is not None:
                break
    out = {
        "status": first.status_code,
        "resource_metadata": www_auth_url,
        "tried": tried,
        "metadata": None,
        "resource_allowed": False,
    }
    if metadata is not None:
        out["metadata"] = json.loads(metadata.model_dump_json(exclude_none=True))
        out["resource_allowed"] = check_resource_allowed(
            requested_resource=resource_url_from_server_url(server_url),
            configured_resource=str(metadata.resource),
        )
    print(json.dumps(out))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
