"""A client process for the one-call crash harnesses, ``argv[1]`` its era: ``mrtr``, one
guarded ``tools/call`` of the re-asking tool (call id ``turn-1``); ``tasks``, the task tool
under :class:`~fsm.adapters.tasks.GuardedTasks`, or, when the store holds an unended task,
that task resumed by its persisted id. Server URL ``argv[2]``, ``SqliteStore`` at
``argv[3]``. Before each store write it prints ``write N`` (from 0) and waits for a line on
stdin (the parent answers ``go``, or kills it with SIGKILL there); each question that
reaches the callback prints ``prompt ID RESHOWN``; the end prints ``result TEXT`` or
``error REASON``."""

from __future__ import annotations

import sys

import anyio
from mcp import types
from mcp.client.client import Client
from mcp.client.session import ClientRequestContext

from fsm.adapters.mrtr import RESHOWN_META, guarded_call_tool
from fsm.adapters.tasks import GuardedTasks, run_task
from fsm.durable import SqliteStore
from fsm.durable.store import Delta, Store
from fsm.errors import InteractionFailed


async def mrtr(url: str, store: Store, user: object) -> types.CallToolResult:
    async with Client(url, elicitation_callback=user) as client:  # type: ignore[arg-type]
        args = {"count": 3, "reasks": 1}
        return await guarded_call_tool(
            client, "reasking_delete", args, store=store, call_id="turn-1"
        )


async def tasks(url: str, store: Store, user: object) -> types.CallToolResult:
    ext = GuardedTasks(store=store)
    async with Client(url, elicitation_callback=user, extensions=[ext]) as client:  # type: ignore[arg-type]
        live = [r.call for r in store.calls().values() if r.era == "tasks" and not r.ended]
        if live:  # the process before this one died mid-task: resume it by its id
            return await run_task(client.session, live[0], store=store)
        return await client.call_tool("delete_files", {"count": 3})


async def main(era: str, url: str, path: str) -> None:
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
        try:
            result = await (mrtr if era == "mrtr" else tasks)(url, store, user)
        except InteractionFailed as exc:
            print(f"error {exc.reason}", flush=True)
            return
    block = result.content[0]
    print(f"result {block.text if isinstance(block, types.TextContent) else '?'}", flush=True)


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], sys.argv[2], sys.argv[3])
