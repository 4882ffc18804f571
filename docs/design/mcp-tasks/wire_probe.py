"""Raw JSON-RPC over Streamable HTTP against tasks_upstream.py, printing the exact wire
of both Tasks generations (what a gateway sees). No SDK on the client side.

Usage: wire_probe.py URL
"""

import asyncio
import json
import sys

import httpx2

V1 = "2025-11-25"
V2 = "2026-07-28"
EXT = "io.modelcontextprotocol/tasks"


async def rpc(http, url, body, headers):
    r = await http.post(url, json=body, headers={"Accept": "application/json, text/event-stream", **headers})
    text = r.text
    if r.headers.get("content-type", "").startswith("text/event-stream"):
        datas = [line[5:].strip() for line in text.splitlines() if line.startswith("data:")]
        text = [d for d in datas if d][-1]
    print(f">>> {json.dumps(body)}\n    headers={headers}\n<<< {r.status_code} {text}\n")
    return r, json.loads(text) if text else None


async def main(url: str) -> None:
    async with httpx2.AsyncClient(timeout=30) as http:
        print("#### 2025-11-25 (session)")
        init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": V1, "capabilities": {}, "clientInfo": {"name": "probe", "version": "0"}}}
        r, _ = await rpc(http, url, init, {})
        sid = r.headers.get("mcp-session-id")
        h = {"Mcp-Session-Id": sid, "MCP-Protocol-Version": V1}
        await http.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"},
                        headers={"Accept": "application/json, text/event-stream", **h})
        _, created = await rpc(http, url, {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "sleep", "arguments": {"seconds": 0.4}, "task": {"ttl": 60000}}}, h)
        tid = created["result"]["task"]["taskId"]
        await rpc(http, url, {"jsonrpc": "2.0", "id": 3, "method": "tasks/get", "params": {"taskId": tid}}, h)
        await rpc(http, url, {"jsonrpc": "2.0", "id": 4, "method": "tasks/result", "params": {"taskId": tid}}, h)
        await rpc(http, url, {"jsonrpc": "2.0", "id": 5, "method": "tasks/list", "params": {}}, h)
        await rpc(http, url, {"jsonrpc": "2.0", "id": 6, "method": "tasks/cancel", "params": {"taskId": tid}}, h)

        print("#### 2026-07-28 (sessionless, tasks extension negotiated per request)")
        meta = {"io.modelcontextprotocol/protocolVersion": V2,
                "io.modelcontextprotocol/clientInfo": {"name": "probe", "version": "0"},
                "io.modelcontextprotocol/clientCapabilities": {"extensions": {EXT: {}}}}
        hv = {"MCP-Protocol-Version": V2}
        await rpc(http, url, {"jsonrpc": "2.0", "id": 10, "method": "server/discover", "params": {"_meta": meta}},
                  {**hv, "Mcp-Method": "server/discover"})
        _, created = await rpc(http, url, {"jsonrpc": "2.0", "id": 11, "method": "tools/call", "params": {
            "name": "sleep", "arguments": {"seconds": 0.4}, "_meta": meta}},
            {**hv, "Mcp-Method": "tools/call", "Mcp-Name": "sleep"})
        tid = created["result"]["taskId"]
        g = {"jsonrpc": "2.0", "id": 12, "method": "tasks/get", "params": {"taskId": tid, "_meta": meta}}
        await rpc(http, url, g, {**hv, "Mcp-Method": "tasks/get", "Mcp-Name": tid})
        await asyncio.sleep(0.8)
        await rpc(http, url, {**g, "id": 13}, {**hv, "Mcp-Method": "tasks/get", "Mcp-Name": tid})
        await rpc(http, url, {"jsonrpc": "2.0", "id": 14, "method": "tasks/update", "params": {
            "taskId": tid, "inputResponses": {}, "_meta": meta}}, {**hv, "Mcp-Method": "tasks/update", "Mcp-Name": tid})
        await rpc(http, url, {"jsonrpc": "2.0", "id": 15, "method": "tasks/cancel", "params": {"taskId": tid, "_meta": meta}},
                  {**hv, "Mcp-Method": "tasks/cancel", "Mcp-Name": tid})
        no_ext = {**meta, "io.modelcontextprotocol/clientCapabilities": {}}
        await rpc(http, url, {"jsonrpc": "2.0", "id": 16, "method": "tools/call", "params": {
            "name": "sleep", "arguments": {"seconds": 0.1}, "_meta": no_ext}},
            {**hv, "Mcp-Method": "tools/call", "Mcp-Name": "sleep"})
        await rpc(http, url, {"jsonrpc": "2.0", "id": 17, "method": "tasks/get", "params": {"taskId": tid, "_meta": no_ext}},
                  {**hv, "Mcp-Method": "tasks/get", "Mcp-Name": tid})


if __name__ == "__main__":
    asyncio.run(asyncio.wait_for(main(sys.argv[1]), 60))
