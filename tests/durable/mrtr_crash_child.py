"""A client process for the MRTR crash harness: one guarded ``tools/call`` of the re-asking
tool on ``argv[1]`` with an ``SqliteStore`` at ``argv[2]`` (call id ``turn-1``). Before
each store write it prints ``write N`` (from 0) and waits for a line on stdin (the parent
answers ``go``, or kills it with SIGKILL there); each question that reaches the callback
prints ``prompt ID RESHOWN``; the end prints ``result TEXT`` or ``error REASON``."""

from __future__ import annotations

import sys

import anyio
from mcp import types
from mcp.client.client import Client
from mcp.client.session import ClientRequestContext

from fsm.adapters.mrtr import RESHOWN_META, guarded_call_tool
from fsm.durable import SqliteStore
from fsm.durable.store import Delta
from fsm.errors import InteractionFailed

TOOL, ARGS = "reasking_delete", {"count": 3, "reasks": 1}


async def main(url: str, path: str) -> None:
    writes = 0

    def before_write(delta: Delta) -> None:
        nonlocal writes
        print(f"write {writes}", flush=True)
        writes += 1
        sys.stdin.readline()

    async def user(
        context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        reshown = bool((context.meta or {}).get(RESHOWN_META))
        print(f"prompt {context.request_id} {int(reshown)}", flush=True)
        return types.ElicitResult(action="accept", content={})

    with SqliteStore(path, before_write=before_write) as store:
        async with Client(url, elicitation_callback=user) as client:
            try:
                result = await guarded_call_tool(client, TOOL, ARGS, store=store, call_id="turn-1")
            except InteractionFailed as exc:
                print(f"error {exc.reason}", flush=True)
                return
    block = result.content[0]
    print(f"result {block.text if isinstance(block, types.TextContent) else '?'}", flush=True)


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], sys.argv[2])
