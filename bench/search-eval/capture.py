"""Capture the tool lists of real MCP server packages for the search evaluation.

Usage (from the repository root, with the project's Python environment, which has the
PyPI `mcp` 2.3 client):

    .venv/bin/python bench/search-eval/capture.py [SLUG ...]

For each candidate below (or only the slugs named), it installs the pinned package
version from the npm registry into /tmp/mcp-eval/<slug> (never into the repository),
keeps it only when its package.json licence is permissive (MIT, Apache-2.0,
BSD-2-Clause, BSD-3-Clause, ISC), starts it over stdio without credentials (dummy
values such as "x" for the API keys a server insists on), lists its tools with
`mcp.Client` (following `next_cursor`) and writes
bench/search-eval/servers/<slug>.json:

    {"package", "version", "license", "tools": [{"name", "description", "inputSchema"}]}

with the tools exactly as the server listed them. Every step is bounded in time;
a server that fails at any step is skipped and reported on stderr. The committed JSON
files are the evaluation set: the tests and the bench never run this script.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

from mcp import Client, StdioServerParameters

HERE = Path(__file__).resolve().parent
OUT = HERE / "servers"
SCRATCH = Path("/tmp/mcp-eval")
PERMISSIVE = {"MIT", "Apache-2.0", "BSD-2-Clause", "BSD-3-Clause", "ISC"}
INSTALL_SECONDS = 180
LIST_SECONDS = 30

# slug, package, version, extra args, env (dummy credentials only; no tool is called).
# Every candidate tried is kept so a rebuild retries the same list; those that were
# skipped (licence, native module, a start-up connection) are named in
# bench/README.md. Proxies to a hosted MCP server (e.g. @stripe/mcp) are left out:
# listing them would send traffic off the machine.
CANDIDATES: list[tuple[str, str, str, list[str], dict[str, str]]] = [
    ("playwright", "@playwright/mcp", "0.0.83", [], {}),
    ("chrome-devtools", "chrome-devtools-mcp", "1.11.0", [], {}),
    ("context7", "@upstash/context7-mcp", "4.1.1", [], {}),
    ("filesystem", "@modelcontextprotocol/server-filesystem", "2026.8.31", ["/tmp/mcp-eval/fsroot"], {}),
    ("github", "@modelcontextprotocol/server-github", "2025.4.8", [], {"GITHUB_PERSONAL_ACCESS_TOKEN": "x"}),
    ("memory", "@modelcontextprotocol/server-memory", "2026.8.31", [], {}),
    ("postgres", "@modelcontextprotocol/server-postgres", "0.6.2", ["postgresql://127.0.0.1:1/none"], {}),
    ("azure-devops", "@azure-devops/mcp", "2.10.0", ["example-org"], {}),
    ("supabase", "@supabase/mcp-server-supabase", "0.13.0", ["--access-token", "x"], {"SUPABASE_ACCESS_TOKEN": "x"}),
    ("notion", "@notionhq/notion-mcp-server", "2.5.2", [], {"NOTION_TOKEN": "x"}),
    ("google-maps", "@modelcontextprotocol/server-google-maps", "0.6.2", [], {"GOOGLE_MAPS_API_KEY": "x"}),
    ("circleci", "@circleci/mcp-server-circleci", "0.20.0", [], {"CIRCLECI_TOKEN": "x"}),
    ("mongodb", "mongodb-mcp-server", "3.0.4", [], {}),
    ("slack", "@modelcontextprotocol/server-slack", "2025.4.25", [], {"SLACK_BOT_TOKEN": "x", "SLACK_TEAM_ID": "x"}),
    ("gitlab", "@zereight/mcp-gitlab", "2.1.64", [], {"GITLAB_PERSONAL_ACCESS_TOKEN": "x"}),
    ("firecrawl", "firecrawl-mcp", "3.26.0", [], {"FIRECRAWL_API_KEY": "x"}),
    ("brave-search", "@brave/brave-search-mcp-server", "2.1.4", [], {"BRAVE_API_KEY": "x"}),
    ("sentry", "@sentry/mcp-server", "0.39.0", ["--access-token", "x"], {"SENTRY_ACCESS_TOKEN": "x"}),
    ("datadog", "@winor30/mcp-server-datadog", "1.8.0", [], {"DATADOG_API_KEY": "x", "DATADOG_APP_KEY": "x"}),
    ("antv-chart", "@antv/mcp-server-chart", "0.9.10", [], {}),
    ("dbhub", "@bytebase/dbhub", "1.4.0", ["--dsn", "sqlite:///tmp/mcp-eval/dbhub.db"], {}),
    ("hubspot", "@hubspot/mcp-server", "0.4.0", [], {"PRIVATE_APP_ACCESS_TOKEN": "x"}),
    ("shortcut", "@shortcut/mcp", "0.25.0", [], {"SHORTCUT_API_TOKEN": "x"}),
    ("drawio", "@drawio/mcp", "1.6.1", [], {}),
    ("lark", "@larksuiteoapi/lark-mcp", "0.5.1", ["mcp", "-a", "x", "-s", "x"], {}),
    ("jira", "@aashari/mcp-server-atlassian-jira", "3.3.0", [], {"ATLASSIAN_SITE_NAME": "x", "ATLASSIAN_USER_EMAIL": "x@example.invalid", "ATLASSIAN_API_TOKEN": "x"}),
    ("exa", "exa-mcp-server", "3.4.1", [], {"EXA_API_KEY": "x"}),
    ("ms365", "@softeria/ms-365-mcp-server", "0.155.0", [], {}),
    ("google-docs", "@a-bonus/google-docs-mcp", "1.11.3", [], {}),
    ("monday", "@mondaydotcomorg/monday-api-mcp", "3.3.0", ["-t", "x"], {}),
    ("mapbox", "@mapbox/mcp-server", "0.14.0", [], {"MAPBOX_ACCESS_TOKEN": "x"}),
    ("kubernetes", "mcp-server-kubernetes", "4.1.7", [], {}),
    ("amap", "@amap/amap-maps-mcp-server", "0.0.8", [], {"AMAP_MAPS_API_KEY": "x"}),
    ("baidu-map", "@baidumap/mcp-server-baidu-map", "1.0.5", [], {"BAIDU_MAP_API_KEY": "x"}),
    ("airbnb", "@openbnb/mcp-server-airbnb", "0.3.0", [], {}),
    ("git", "@cyanheads/git-mcp-server", "2.15.3", [], {}),
    ("heroku", "@heroku/mcp-server", "1.2.8", [], {"HEROKU_API_KEY": "x"}),
    ("asana", "@roychri/mcp-server-asana", "1.8.0", [], {"ASANA_ACCESS_TOKEN": "x"}),
    ("airtable", "airtable-mcp-server", "1.14.0", [], {"AIRTABLE_API_KEY": "x"}),
    ("line", "@line/line-bot-mcp-server", "0.5.0", [], {"CHANNEL_ACCESS_TOKEN": "x", "DESTINATION_USER_ID": "x"}),
    ("cloudbase", "@cloudbase/cloudbase-mcp", "2.34.6", [], {}),
    ("reddit", "reddit-mcp-buddy", "1.1.14", [], {}),
    ("mermaid", "mcp-mermaid", "0.4.1", [], {}),
    ("pdf-reader", "@sylphx/pdf-reader-mcp", "2.4.0", [], {}),
    ("searxng", "mcp-searxng", "2.4.0", [], {"SEARXNG_URL": "http://127.0.0.1:1"}),
    ("linear", "linear-mcp", "1.2.0", [], {"LINEAR_API_KEY": "x"}),
    ("perplexity", "@perplexity-ai/mcp-server", "1.2.1", [], {"PERPLEXITY_API_KEY": "x"}),
    ("tavily", "tavily-mcp", "0.2.22", [], {"TAVILY_API_KEY": "x"}),
    ("todoist", "@doist/todoist-ai", "9.0.0", [], {"TODOIST_API_KEY": "x"}),
    ("trello", "@delorenj/mcp-server-trello", "1.8.1", [], {"TRELLO_API_KEY": "x", "TRELLO_TOKEN": "x", "TRELLO_BOARD_ID": "x"}),
    ("coingecko", "@coingecko/coingecko-mcp", "8.2.0", [], {"COINGECKO_DEMO_API_KEY": "x"}),
    ("weather", "@dangahagan/weather-mcp", "1.23.0", [], {}),
    ("discord", "mcp-discord", "1.3.4", [], {"DISCORD_TOKEN": "x"}),
    ("youtube", "youtube-data-mcp-server", "1.0.16", [], {"YOUTUBE_API_KEY": "x"}),
    ("fmp", "financial-modeling-prep-mcp-server", "2.6.12", [], {"FMP_ACCESS_TOKEN": "x"}),
    ("wikipedia", "wikipedia-mcp", "1.0.3", [], {}),
    ("email", "@codefuturist/email-mcp", "0.2.0", [], {}),
    ("howtocook", "howtocook-mcp", "0.2.2", [], {}),
    ("alibaba-devops", "alibabacloud-devops-mcp-server", "0.3.64", [], {"YUNXIAO_ACCESS_TOKEN": "x"}),
    ("excel", "@negokaz/excel-mcp-server", "0.12.0", [], {}),
    ("sequential-thinking", "@modelcontextprotocol/server-sequential-thinking", "2026.8.31", [], {}),
    ("desktop-commander", "@wonderwhy-er/desktop-commander", "0.2.52", [], {}),
    ("figma", "figma-developer-mcp", "0.13.2", ["--stdio"], {"FIGMA_API_KEY": "x"}),
    ("postman", "@postman/postman-mcp-server", "2.13.0", [], {"POSTMAN_API_KEY": "x"}),
]


def log(slug: str, message: str) -> None:
    print(f"[{slug}] {message}", file=sys.stderr, flush=True)


def install(slug: str, package: str, version: str) -> Path | None:
    """Installs into /tmp/mcp-eval/<slug>; returns the package's directory."""
    prefix = SCRATCH / slug
    pkg_dir = prefix / "node_modules" / package
    if not (pkg_dir / "package.json").is_file():
        prefix.mkdir(parents=True, exist_ok=True)
        try:
            # Scripts are skipped: a postinstall that downloads a browser cannot work here.
            subprocess.run(
                ["npm", "install", "--no-audit", "--no-fund", "--ignore-scripts",
                 "--prefix", str(prefix), f"{package}@{version}"],
                check=True, timeout=INSTALL_SECONDS,
                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            )
        except (subprocess.SubprocessError, OSError) as e:
            log(slug, f"install failed: {e}")
            return None
    return pkg_dir if (pkg_dir / "package.json").is_file() else None


def licence(manifest: dict) -> str | None:
    lic = manifest.get("license")
    if isinstance(lic, dict):
        lic = lic.get("type")
    return lic if isinstance(lic, str) else None


def entry_point(pkg_dir: Path, manifest: dict) -> Path | None:
    """The package's command: its only `bin`, or the one named like the package."""
    bins = manifest.get("bin")
    if isinstance(bins, str):
        return pkg_dir / bins
    if isinstance(bins, dict) and bins:
        base = manifest.get("name", "").split("/")[-1]
        chosen = bins.get(base) or next(iter(bins.values()))
        return pkg_dir / chosen
    main = manifest.get("main")
    return pkg_dir / main if isinstance(main, str) else None


async def list_tools(slug: str, command: list[str], env: dict[str, str]) -> list[dict]:
    full_env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(SCRATCH / "home"),
        "NODE_ENV": "production",
        **env,
    }
    server = StdioServerParameters(command=command[0], args=command[1:], env=full_env,
                                   cwd=str(SCRATCH / slug))
    tools: list[dict] = []
    async with Client(server, mode="legacy", read_timeout_seconds=LIST_SECONDS) as client:
        cursor = None
        for _ in range(50):  # bounded pagination
            page = await client.list_tools(cursor=cursor)
            for t in page.tools:
                dumped = t.model_dump(by_alias=True, mode="json", exclude_none=True)
                # Only the three fields, each as listed (a missing description stays
                # missing: the search must cope with tools that have none).
                tools.append({k: dumped[k] for k in ("name", "description", "inputSchema")
                              if k in dumped})
            cursor = page.next_cursor
            if not cursor:
                break
    return tools


async def capture(slug: str, package: str, version: str, args: list[str], env: dict[str, str]) -> bool:
    pkg_dir = await asyncio.to_thread(install, slug, package, version)
    if pkg_dir is None:
        return False
    manifest = json.loads((pkg_dir / "package.json").read_text())
    lic = licence(manifest)
    if lic not in PERMISSIVE:
        log(slug, f"licence {lic!r} is not on the permissive list: skipped")
        return False
    entry = entry_point(pkg_dir, manifest)
    if entry is None or not entry.is_file():
        log(slug, "no command to start")
        return False
    try:
        tools = await asyncio.wait_for(list_tools(slug, ["node", str(entry), *args], env),
                                       timeout=LIST_SECONDS + 15)
    except BaseException as e:  # noqa: BLE001 - any failure skips the server
        if isinstance(e, KeyboardInterrupt):
            raise
        log(slug, f"listing failed: {type(e).__name__}: {e}")
        return False
    if not tools:
        log(slug, "no tools listed")
        return False
    OUT.mkdir(parents=True, exist_ok=True)
    doc = {"package": package, "version": manifest.get("version", version),
           "license": lic, "tools": tools}
    (OUT / f"{slug}.json").write_text(json.dumps(doc, ensure_ascii=False, indent=1) + "\n")
    log(slug, f"{len(tools)} tools")
    return True


async def main(only: list[str]) -> int:
    (SCRATCH / "fsroot").mkdir(parents=True, exist_ok=True)
    (SCRATCH / "home").mkdir(parents=True, exist_ok=True)
    chosen = [c for c in CANDIDATES if not only or c[0] in only]
    ok = 0
    for slug, package, version, args, env in chosen:
        try:
            ok += await capture(slug, package, version, args, env)
        except Exception as e:  # noqa: BLE001 - one server never stops the others
            log(slug, f"failed: {e}")
    print(f"{ok} of {len(chosen)} servers captured", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1:])))
