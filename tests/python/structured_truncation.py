"""Call tools with an outputSchema whose structured results are over the token budget,
through the gateway, with the PyPI `mcp` client (which validates structuredContent
against the tool's outputSchema and raises when it is missing or does not match).

Usage: structured_truncation.py URL TOOL[,TOOL...] MODE

MODE: "legacy" (initialize handshake, a session) or "auto" (2026-07-28 when offered).

Prints one JSON object on the last stdout line: per tool, whether the call raised,
whether the result is an error, whether its structuredContent validates against the
outputSchema the client listed, the row count kept and the result's `_meta`.
"""

import asyncio
import json
import sys

import jsonschema
from mcp import Client


async def main(url: str, tools: list[str], mode: str) -> dict:
    out: dict = {}
    async with Client(url, mode=mode, read_timeout_seconds=60) as client:
        listed = await client.list_tools()
        schemas = {t.name: t.output_schema for t in listed.tools}
        for name in tools:
            entry: dict = {"raised": False}
            try:
                result = await client.call_tool(name, {})
            except Exception as e:  # noqa: BLE001 - the test asserts there is none
                entry = {"raised": True, "error": repr(e)}
                out[name] = entry
                continue
            structured = result.structured_content
            entry["is_error"] = bool(result.is_error)
            entry["text"] = [c.text for c in result.content if getattr(c, "type", None) == "text"]
            entry["has_structured"] = structured is not None
            if structured is not None:
                try:
                    jsonschema.validate(structured, schemas[name])
                    entry["valid"] = True
                except jsonschema.ValidationError as e:
                    entry["valid"] = False
                    entry["validation_error"] = str(e)[:500]
                entry["rows"] = len(structured.get("rows", []))
            entry["meta"] = result.meta
            out[name] = entry
    return out


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(sys.argv[1], sys.argv[2].split(","), sys.argv[3])), default=str))
