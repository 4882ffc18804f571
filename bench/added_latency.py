"""Added latency of one tool call through toolgate, side by side with the direct call.

A stopgap until the Rust load generator lands in bench/: sequential `tools/call`
requests (MCP 2025-11-25 session, streamable HTTP) against an MCP server directly and
through a gateway that mounts it, in interleaved rounds so machine noise hits both.

    PORT=18555 node node_modules/@modelcontextprotocol/server-everything/dist/index.js streamableHttp &
    printf 'upstreams:\n  ev:\n    streamable_http: {url: "http://127.0.0.1:18555/mcp"}\n' > /tmp/ev.yaml
    cargo run --release -p toolgate -- serve --config /tmp/ev.yaml --listen 127.0.0.1:18556 &
    .venv/bin/python bench/added_latency.py http://127.0.0.1:18555/mcp http://127.0.0.1:18556/mcp 200

Prints p50/p99 per path and the added p50 (gateway minus direct), in microseconds.
"""

import statistics
import sys
import time

import httpx2 as httpx

HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


def session(url: str):
    client = httpx.Client(timeout=30)
    headers = dict(HEADERS)
    init = {
        "jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                   "clientInfo": {"name": "added-latency", "version": "1"}},
    }
    response = client.post(url, headers=headers, json=init)
    if sid := response.headers.get("mcp-session-id"):
        headers["Mcp-Session-Id"] = sid
    headers["MCP-Protocol-Version"] = "2025-11-25"
    client.post(url, headers=headers, json={"jsonrpc": "2.0", "method": "notifications/initialized"})
    return client, headers


def run(url: str, tool: str, calls: int) -> list[float]:
    client, headers = session(url)
    latencies = []
    for i in range(calls):
        started = time.perf_counter()
        body = {"jsonrpc": "2.0", "id": i + 1, "method": "tools/call",
                "params": {"name": tool, "arguments": {"message": "hi"}}}
        response = client.post(url, headers=headers, json=body)
        assert "Echo: hi" in response.text, response.text
        latencies.append((time.perf_counter() - started) * 1e6)
    return latencies


def main() -> None:
    direct, gateway, calls = sys.argv[1], sys.argv[2], int(sys.argv[3])
    results = {"direct": [], "gateway": []}
    for _ in range(5):
        results["direct"] += run(direct, "echo", calls)
        results["gateway"] += run(gateway, "ev__echo", calls)
    for name, values in results.items():
        values.sort()
        print(f"{name}: p50 {values[len(values) // 2]:.0f} us, p99 {values[int(len(values) * 0.99)]:.0f} us")
    added = statistics.median(results["gateway"]) - statistics.median(results["direct"])
    print(f"added p50: {added:.0f} us")


if __name__ == "__main__":
    main()
