"""The MCP conformance suite's client under test, for its `auth/*` scenarios: toolgate
as the OAuth client of the scenario's MCP server.

`conformance client --command "python oauth_conformance_client.py"` runs this with the
scenario server's URL as the last argument. It starts toolgate (`TOOLGATE_BIN`) with that
server as an upstream configured `credentials: oauth`, then acts as a user and an agent
would: asks the gateway for a connect link, opens it in place of a browser (the
confirmation page, then every redirect: the authorization server, the gateway's
callback), and calls the upstream's tool through the gateway, connecting again when the
gateway answers `authorization_required` with a new link (scope step-up), at most twice.

Standard library only. Exit 0 when the tool call succeeded; 1 otherwise (the suite
expects some scenarios to end without a call).
"""

import hashlib
import http.cookiejar
import json
import os
import secrets
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

TOOL = "conf__test-tool"


def log(*parts):
    print("[oauth-client]", *parts, file=sys.stderr, flush=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def request(method, url, key=None, body=None, timeout=15):
    """One JSON request to the gateway: (status, parsed body or text)."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method)
    if key:
        req.add_header("Authorization", f"Bearer {key}")
    if data is not None:
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            raw, status = resp.read(), resp.status
    except urllib.error.HTTPError as e:
        raw, status = e.read(), e.code
    try:
        return status, json.loads(raw or b"null")
    except ValueError:
        return status, raw.decode(errors="replace")


def open_link(link):
    """What a browser does with a connect link: load the page, press the button, follow
    every redirect. True when the gateway's callback page says the account is connected."""
    browser = urllib.request.build_opener(
        urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar())
    )
    with browser.open(link, timeout=15) as page:
        if page.status != 200:
            log("connect page answered", page.status)
            return False
    try:
        with browser.open(urllib.request.Request(link, data=b"", method="POST"), timeout=20) as end:
            text = end.read().decode(errors="replace")
            log("after connecting:", end.status, end.url.split("?")[0])
            return end.status == 200 and "is connected" in text
    except urllib.error.HTTPError as e:
        log("connecting failed:", e.code, e.read().decode(errors="replace")[:500])
        return False


def main():
    server_url = sys.argv[-1]
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    log("scenario", scenario, "server", server_url)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    key = secrets.token_hex(16)
    oauth = {"allow_private_networks": True}
    # The client-credentials scenarios: the gateway's own service identity, with a
    # secret or a private key; the others: each user's own authorization.
    service = scenario.startswith("auth/client-credentials")
    if "client_id" in context:
        oauth["client_id"] = context["client_id"]
    if "client_secret" in context:
        oauth["client_secret"] = context["client_secret"]
    if "private_key_pem" in context:
        oauth["private_key"] = context["private_key_pem"]
        oauth["signing_algorithm"] = context.get("signing_algorithm", "ES256")
    config = {
        "listen": f"127.0.0.1:{port}",
        "public_url": base,
        "startup_timeout": "2s",
        "oauth": {
            # The suite's fixed Client ID Metadata Document URL (basic-cimd).
            "client_metadata_url": "https://conformance-test.local/client-metadata.json"
        },
        "tenants": {
            "acme": {
                "api_keys": [
                    {"hash": "sha256:" + hashlib.sha256(key.encode()).hexdigest(), "subject": "alice"}
                ]
            }
        },
        "upstreams": {
            "conf": {
                "streamable_http": {"url": server_url},
                "credentials": "client_credentials" if service else "oauth",
                "oauth": oauth,
            }
        },
    }
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "toolgate.yaml")
        with open(path, "w") as f:
            json.dump({**config, "data_dir": tmp}, f)
        gateway = subprocess.Popen(
            [os.environ["TOOLGATE_BIN"], "serve", "--config", path, "--no-watch"],
            stdout=sys.stderr,
            stderr=sys.stderr,
        )
        try:
            return run(base, key, service)
        finally:
            gateway.terminate()
            try:
                gateway.wait(timeout=5)
            except subprocess.TimeoutExpired:
                gateway.kill()


def run(base, key, service):
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            if request("GET", f"{base}/readyz", timeout=2)[0] == 200:
                break
        except OSError:
            pass
        time.sleep(0.1)
    else:
        log("the gateway did not get ready")
        return 1
    if not service:
        status, body = request("POST", f"{base}/v1/connections/conf", key)
        if status != 200:
            log("no connect link:", status, body)
            return 1
        if not open_link(body["connect_url"]):
            return 1
    # The connection opened on connecting lists the upstream's tools.
    deadline = time.monotonic() + 8
    while time.monotonic() < deadline:
        status, body = request("GET", f"{base}/v1/tools", key)
        if status == 200 and TOOL in json.dumps(body):
            break
        time.sleep(0.1)
    else:
        log("the upstream's tools never appeared")
        return 1
    for _ in range(3):
        status, body = request("POST", f"{base}/v1/tools/{TOOL}/call", key, {"arguments": {}})
        log("call:", status, json.dumps(body)[:400])
        if status == 200:
            return 0
        error = body.get("error", {}) if isinstance(body, dict) else {}
        link = error.get("connect_url")
        if status != 403 or error.get("code") != "authorization_required" or not link:
            return 1
        if not open_link(link):
            return 1
    return 1


if __name__ == "__main__":
    sys.exit(main())
