"""A client for the conformance suite's client mode: the plain mcp 2.x ``ClientSession``
or, with ``--guarded``, the guarded session of :func:`fsm.adapters.mcp2.guarded_session`.

Usage (the suite appends its test server's URL and names the scenario in
``MCP_CONFORMANCE_SCENARIO``)::

    python tests/conformance/client.py [--guarded] URL

What it does is the same either way, whatever the scenario: initialize, list the tools,
call each (``add_numbers`` with ``a=5, b=3``, the others without arguments), close. An
``elicitation/create`` is accepted with the schema's defaults as the content (a client
that applies defaults); a sampling request gets a fixed text. Exit status 0 when every
step succeeded, 1 otherwise (the error on stderr): the suite grades the traffic either
way.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
from mcp import ClientSession, types
from mcp.client.streamable_http import streamable_http_client

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # run as a script by the suite: the checkout's fsm
    sys.path.insert(0, str(ROOT))

from fsm.adapters.mcp2 import guarded_session  # noqa: E402

ARGUMENTS: dict[str, dict[str, Any]] = {"add_numbers": {"a": 5, "b": 3}}


async def on_elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
    """Accept, with each property's ``default`` as the answer."""
    schema = getattr(params, "requested_schema", None) or {}
    content = {
        name: prop["default"]
        for name, prop in (schema.get("properties") or {}).items()
        if isinstance(prop, dict) and "default" in prop
    }
    return types.ElicitResult(action="accept", content=content)


async def on_sample(
    context: Any, params: types.CreateMessageRequestParams
) -> types.CreateMessageResult:
    """A fixed answer."""
    return types.CreateMessageResult(
        role="assistant",
        content=types.TextContent(type="text", text="conformance"),
        model="conformance-client",
    )


@asynccontextmanager
async def session(url: str, guarded: bool) -> AsyncIterator[Any]:
    """An initialized session on ``url``: guarded or the SDK's own."""
    if guarded:
        async with guarded_session(
            url, elicitation_callback=on_elicit, sampling_callback=on_sample
        ) as opened:
            yield opened
        return
    async with (
        streamable_http_client(url) as (read, write),
        ClientSession(
            read, write, elicitation_callback=on_elicit, sampling_callback=on_sample
        ) as plain,
    ):
        await plain.initialize()
        yield plain


async def run(url: str, guarded: bool) -> None:
    """Initialize, list the tools, call each, close."""
    async with session(url, guarded) as opened:
        listed = await opened.list_tools()
        for tool in listed.tools:
            await opened.call_tool(tool.name, ARGUMENTS.get(tool.name, {}))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--guarded", action="store_true", help="the guarded session")
    parser.add_argument("url", help="the MCP endpoint (the suite appends it)")
    args = parser.parse_args(argv)
    try:
        anyio.run(run, args.url, args.guarded, backend="asyncio")
    except Exception as exc:
        print(f"client: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
