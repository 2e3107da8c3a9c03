#!/usr/bin/env python3
"""One tool call through toolgate's MCP face with the official Python SDK.

The `mcp` package (pinned in scripts/test, 2.3.0), unmodified: its `Client`
over Streamable HTTP or over stdio (launching `toolgate mcp`), with an
elicitation callback that answers toolgate's question as told.

    python call.py --url http://127.0.0.1:8080/mcp --token KEY \\
        --tool internal--lookup_order --args '{"id": 7}' --answer approve
    python call.py --stdio target/debug/toolgate --config toolgate.yaml \\
        --tool internal--lookup_order --args '{"id": 7}' --answer deny

--mode auto (the default) speaks 2026-07-28 when the server offers it
(`input_required` round trips); --mode legacy forces the initialize
handshake (a session, `elicitation/create` from the server).
--answer approve|deny|decline|cancel answers every form; --answer none
declares no elicitation at all: the client then retries the call while
toolgate waits for a decision taken elsewhere (the inbox, a link).

Prints one JSON line: the negotiated protocol, the tools listed, every
form asked (message and schema) and the call's result, or {"error": ...}
(exit 1) when the SDK raised.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from contextlib import AsyncExitStack
from typing import Any

import httpx2
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp_types import ElicitResult, Implementation

CLIENT = Implementation(name="toolgate-test-python", version="2.3.0")


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--url", help="toolgate's /mcp endpoint")
    where.add_argument("--stdio", metavar="TOOLGATE", help="the toolgate binary to launch as `mcp`")
    p.add_argument("--config", help="with --stdio: the config file it gets")
    p.add_argument("--token", help="with --url: the API key, sent as Authorization: Bearer")
    p.add_argument("--mode", default="auto", help="auto (default), legacy, or a protocol version")
    p.add_argument("--tool", required=True)
    p.add_argument("--args", default="{}", help="the arguments, as JSON")
    p.add_argument("--answer", default="approve", choices=["approve", "deny", "decline", "cancel", "none"])
    p.add_argument("--reason", default="not this one", help="the reason a denial gives")
    p.add_argument("--rounds", type=int, default=600, help="input_required rounds before giving up")
    return p.parse_args()


def form_answer(answer: str, reason: str, schema: dict[str, Any]) -> ElicitResult:
    """What a user pressing `answer` on toolgate's form sends back."""
    if answer in ("decline", "cancel"):
        return ElicitResult(action=answer)
    props = schema.get("properties", {})
    approve = props.get("approve", {})
    yes = answer == "approve"
    if approve.get("type") == "boolean":
        content: dict[str, Any] = {"approve": yes}
    else:
        content = {"approve": "approve" if yes else "deny"}
    if not yes and "reason" in props:
        content["reason"] = reason
    remember = props.get("remember", {})
    if "remember" in schema.get("required", []):
        # Only what the form demands: the narrowest choice it offers.
        choices = remember.get("enum") or [c.get("const") for c in remember.get("oneOf", [])]
        content["remember"] = "once" if "once" in choices else choices[0]
    return ElicitResult(action="accept", content=content)


async def run(opts: argparse.Namespace) -> dict[str, Any]:
    asked: list[dict[str, Any]] = []

    async def elicit(_context: Any, params: Any) -> ElicitResult:
        asked.append({"message": params.message, "schema": params.requested_schema})
        return form_answer(opts.answer, opts.reason, params.requested_schema)

    async with AsyncExitStack() as stack:
        if opts.url:
            headers = {"authorization": f"Bearer {opts.token}"} if opts.token else {}
            http = httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=300))
            await stack.enter_async_context(http)
            server: Any = streamable_http_client(opts.url, http_client=http)
        else:
            args = ["mcp"] + (["--config", opts.config] if opts.config else [])
            # Its principal and log level from this environment (the SDK passes only a few variables).
            env = {k: v for k, v in os.environ.items() if k.startswith("TOOLGATE_") or k == "RUST_LOG"}
            server = StdioServerParameters(command=opts.stdio, args=args, env=env)
        client = Client(
            server,
            mode=opts.mode,
            client_info=CLIENT,
            elicitation_callback=None if opts.answer == "none" else elicit,
            input_required_max_rounds=opts.rounds,
        )
        await stack.enter_async_context(client)
        tools = await client.list_tools()
        result = await client.call_tool(opts.tool, json.loads(opts.args))
        return {
            "protocol": client.protocol_version,
            "tools": [t.name for t in tools.tools],
            "asked": asked,
            "result": result.model_dump(mode="json", by_alias=True, exclude_none=True),
        }


def describe(e: BaseException) -> str:
    """An exception, with those an exception group holds."""
    if isinstance(e, BaseExceptionGroup):
        return "; ".join(describe(inner) for inner in e.exceptions)
    return f"{type(e).__name__}: {e}"


def main() -> int:
    opts = parse()
    try:
        out = asyncio.run(run(opts))
    except Exception as e:  # noqa: BLE001 - the SDK's error, reported for the test to show
        print(json.dumps({"error": describe(e)}))
        return 1
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
