"""A client process for the crash harness (:mod:`crash_harness`), ``argv[1]`` its era:

* ``sse``: the seed scenario's call (``delete_files``, "Delete 3 files?") through
  :func:`fsm.adapters.mcp2.guarded_session` with the store; when the store holds a
  session the process before this one left with a call in flight, that session is
  rejoined and the call resumed (:meth:`~fsm.adapters.mcp2.GuardedSession.resume_call`);
* ``mrtr``: one guarded ``tools/call`` of the re-asking tool (call id ``turn-1``);
* ``tasks``: the task tool under :class:`~fsm.adapters.tasks.GuardedTasks`, or, when the
  store holds an unended task, that task resumed by its persisted id.

Server URL ``argv[2]``, ``SqliteStore`` at ``argv[3]``. Before each store write it prints
``write N`` (from 0), and (``sse``) at each event the guard is fed ``event N KIND``, and
waits for a line on stdin (the parent answers ``go``, or kills it with SIGKILL there);
each question that reaches the callback prints ``prompt ID RESHOWN``; the end prints
``result TEXT`` or ``error REASON``."""

from __future__ import annotations

import json
import sys
from typing import Any

import anyio
from mcp import types
from mcp.client.client import Client
from mcp.client.session import ClientRequestContext

from fsm.adapters.mcp2 import guarded_session
from fsm.adapters.mrtr import RESHOWN_META, guarded_call_tool
from fsm.adapters.tasks import GuardedTasks, run_task
from fsm.durable import SqliteStore
from fsm.durable.store import Store, Written
from fsm.errors import InteractionFailed

EVENTS = frozenset({"began", "delivered", "answered", "submitted", "ended", "resumed"})
"""The event-log records that mark an event fed to the SSE guard (or the decision it
took on one): a stream opened, a request delivered, an answer, its submission's outcome,
a stream's end, a resume. A kill point each."""


def handshake(line: str) -> None:
    print(line, flush=True)
    sys.stdin.readline()


class EventHook:
    """The guarded session's event log (``log=``): a handshake at each record of
    :data:`EVENTS`, before the guard's decision on it is taken."""

    def __init__(self) -> None:
        self.count = 0

    def write(self, text: str) -> int:
        for line in text.splitlines():
            kind = json.loads(line).get("kind")
            if kind in EVENTS:
                handshake(f"event {self.count} {kind}")
                self.count += 1
        return len(text)

    def flush(self) -> None:
        return None


def outcome(result: Any) -> str:
    """The line a call's end prints."""
    if isinstance(result, InteractionFailed):
        return f"error {result.reason}"
    block = result.content[0]
    return f"result {block.text if isinstance(block, types.TextContent) else '?'}"


async def sse(url: str, store: Store, user: Any) -> str:
    log: Any = EventHook()
    async with guarded_session(url, elicitation_callback=user, store=store, log=log) as session:
        try:
            restored = session.restored_calls
            if restored:  # the process before this one died mid-call: go on with it
                (call,) = restored
                return outcome(await session.resume_call(call))
            return outcome(await session.call_tool("delete_files", {}))
        except InteractionFailed as exc:
            return outcome(exc)


async def mrtr(url: str, store: Store, user: Any) -> str:
    async with Client(url, elicitation_callback=user) as client:
        args = {"count": 3, "reasks": 1}
        try:
            return outcome(
                await guarded_call_tool(
                    client, "reasking_delete", args, store=store, call_id="turn-1"
                )
            )
        except InteractionFailed as exc:
            return outcome(exc)


async def tasks(url: str, store: Store, user: Any) -> str:
    ext = GuardedTasks(store=store)
    async with Client(url, elicitation_callback=user, extensions=[ext]) as client:
        live = [r.call for r in store.calls().values() if r.era == "tasks" and not r.ended]
        try:
            if live:  # the process before this one died mid-task: resume it by its id
                return outcome(await run_task(client.session, live[0], store=store))
            return outcome(await client.call_tool("delete_files", {"count": 3}))
        except InteractionFailed as exc:
            return outcome(exc)


ERAS = {"sse": sse, "mrtr": mrtr, "tasks": tasks}


async def main(era: str, url: str, path: str) -> None:
    writes = 0

    def before_write(delta: Written) -> None:
        nonlocal writes
        handshake(f"write {writes}")
        writes += 1

    async def user(
        context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        reshown = bool((context.meta or {}).get(RESHOWN_META))
        print(f"prompt {context.request_id} {int(reshown)}", flush=True)
        return types.ElicitResult(action="accept", content={"confirm": True})

    with SqliteStore(path, before_write=before_write) as store:
        print(await ERAS[era](url, store, user), flush=True)


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], sys.argv[2], sys.argv[3])
