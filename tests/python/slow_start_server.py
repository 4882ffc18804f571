"""A stdio MCP server (standard library only) that is slow to start, the way a first
`npx -y <package>` is: before it reads its stdin it waits for a child process that works
in bursts for `--busy SECONDS` (npx waiting on npm's download: 30 ms of CPU every
half second), then it answers `initialize`,
`tools/list` (one tool, `ready`), `tools/call` and `ping`. With `--idle` it never
starts: it sleeps, using no CPU and doing no I/O (up, but silent). Each start appends
a line to the `--starts FILE`.
"""

import argparse
import json
import subprocess
import sys
import time

BUSY = """
import time
end = time.monotonic() + {seconds}
while time.monotonic() < end:
    burst = time.monotonic() + 0.03
    while time.monotonic() < burst:
        pass
    time.sleep(0.5)
"""


def send(message):
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--busy", type=float, default=0.0)
    parser.add_argument("--idle", action="store_true")
    parser.add_argument("--starts", required=True)
    args = parser.parse_args()
    with open(args.starts, "a", encoding="utf-8") as f:
        f.write("start\n")
    if args.idle:
        time.sleep(3600)
        return
    if args.busy > 0:
        subprocess.run([sys.executable, "-c", BUSY.format(seconds=args.busy)], check=True)
    for line in sys.stdin:
        try:
            message = json.loads(line)
        except ValueError:
            continue
        method = message.get("method")
        if "id" not in message or method is None:
            continue
        if method == "initialize":
            result = {
                "protocolVersion": message["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "slow-start", "version": "1"},
            }
        elif method == "tools/list":
            result = {"tools": [{"name": "ready", "inputSchema": {"type": "object"}}]}
        elif method == "tools/call":
            result = {"content": [{"type": "text", "text": "ready"}]}
        elif method == "ping":
            result = {}
        else:
            send({"jsonrpc": "2.0", "id": message["id"],
                  "error": {"code": -32601, "message": "Method not found"}})
            continue
        send({"jsonrpc": "2.0", "id": message["id"], "result": result})


if __name__ == "__main__":
    main()
