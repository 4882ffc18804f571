"""Starts tasks_upstream.py on 127.0.0.1, runs both clients against it, stops it.

Usage: run_all.py [PORT]   (python from the workspace .venv)
"""

import json
import socket
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
PY = sys.executable


def wait_port(port: int, timeout: float = 15) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise TimeoutError(f"upstream not listening on {port}")


def main(port: int) -> int:
    server = subprocess.Popen([PY, str(HERE / "tasks_upstream.py"), str(port)], stderr=subprocess.PIPE, text=True)
    failures = 0
    try:
        wait_port(port)
        url = f"http://127.0.0.1:{port}/mcp"
        for client in ("legacy_client.py", "modern_client.py"):
            run = subprocess.run([PY, str(HERE / client), url], capture_output=True, text=True, timeout=150)
            last = run.stdout.strip().splitlines()[-1] if run.stdout.strip() else ""
            print(f"== {client} (exit {run.returncode})")
            if run.returncode != 0:
                failures += 1
                print(run.stderr[-3000:])
            else:
                print(json.dumps(json.loads(last), indent=1))
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
    return failures


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]) if len(sys.argv) > 1 else 18931))
