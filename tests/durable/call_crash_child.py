"""A client process for the crash harness (:mod:`crash_harness`), ``argv[1]`` its era:

* ``sse``: the seed scenario's call (``delete_files``, "Delete 3 files?") through
  :func:`fsm.adapters.mcp2.guarded_session` with the store; when the store holds a
  session the process before this one left with a call in flight, that session is
  rejoined and the call resumed (:meth:`~fsm.adapters.mcp2.GuardedSession.resume_call`);
* ``mrtr``: one guarded ``tools/call`` of the re-asking tool (call id ``turn-1``);
* ``tasks``: the task tool under :class:`~fsm.adapters.tasks.GuardedTasks`, or, when the
  store holds a task, that task resumed by its persisted id (ended: its one typed error).

Server URL ``argv[2]``, ``SqliteStore`` at ``argv[3]``. Before each store write it prints
``write LABEL#N``, and (``sse``) at each event the guard is fed ``event LABEL#N``
(:func:`handshake`), and waits for a line on stdin (the parent answers ``go``, or kills
it with SIGKILL there); each question that reaches the callback prints
``prompt ID RESHOWN``; the end prints ``result TEXT`` or ``error REASON``."""

from __future__ import annotations

import json
import sys
import threading
from collections import Counter
from typing import Any

import anyio
from mcp import types
from mcp.client.session import ClientRequestContext

from fsm.adapters.mcp2 import guarded_session
from fsm.adapters.mrtr import RESHOWN_META, guarded_call_tool
from fsm.adapters.tasks import GuardedTasks, run_task
from fsm.durable import SqliteStore
from fsm.durable.calls import CallRecord
from fsm.durable.store import SessionRecord, Store, Written
from fsm.errors import InteractionFailed
from fsm.tasks.task import Poll
from fsm.wire.sdk import modern_client

EVENTS = frozenset({"began", "delivered", "answered", "submitted", "ended", "resumed"})
"""The event-log records that mark an event fed to the SSE guard (or the decision it
took on one): a stream opened, a request delivered, an answer, its submission's outcome,
a stream's end, a resume. A kill point each."""


SEEN: Counter[str] = Counter()
ONE_AT_A_TIME = threading.Lock()


def handshake(kind: str, label: str) -> None:
    """Print the kill point ``KIND LABEL#N`` (``N``: how many before it had that label)
    and wait for the parent's answer. A label names the step itself (what is written, the
    event and its stream or request), not its place, so a kill point means the same step
    in every run although two steps race (the standalone GET's opening and the call's
    record; the answer's outcome and the call's result)."""
    with ONE_AT_A_TIME:  # writes run on the loop and in worker threads: one line each
        point = f"{kind} {label}#{SEEN[kind + label]}"
        SEEN[kind + label] += 1
        sys.stdout.write(point + "\n")
        sys.stdout.flush()
        sys.stdin.readline()


def label_of(delta: Written) -> str:
    """What a store write is, as a label without spaces."""
    if isinstance(delta, SessionRecord):
        return "calls:" + ",".join(c.stream for c in delta.calls) if delta.calls else "session"
    if isinstance(delta, CallRecord):
        return "call"
    streams = [f"{s.id}={s.state}" for s in delta.streams]
    requests = [f"{r.key[1]}={r.state}" for r in delta.requests]
    return ",".join(streams + requests) or "session-started"


class EventHook:
    """The guarded session's event log (``log=``): a handshake at each record of
    :data:`EVENTS`, before the guard's decision on it is taken."""

    def write(self, text: str) -> int:
        for line in text.splitlines():
            record = json.loads(line)
            if record.get("kind") in EVENTS:
                key = record.get("key")
                what = record.get("interaction") or (key[1] if key else "")
                handshake("event", f"{record['kind']}:{what}")
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


def on_action(action: Any) -> None:
    """The one-call adapters' actions (after their writes): a kill point each, but the
    task polls (as many as the server's pacing makes)."""
    if not isinstance(action, Poll):
        handshake("action", type(action).__name__)


async def mrtr(url: str, store: Store, user: Any) -> str:
    async with modern_client(url, elicitation_callback=user) as client:
        args = {"count": 3, "reasks": 1}
        try:
            return outcome(
                await guarded_call_tool(
                    client,
                    "reasking_delete",
                    args,
                    store=store,
                    call_id="turn-1",
                    on_action=on_action,
                )
            )
        except InteractionFailed as exc:
            return outcome(exc)


async def tasks(url: str, store: Store, user: Any) -> str:
    ext = GuardedTasks(store=store, on_action=on_action)
    async with modern_client(url, elicitation_callback=user, extensions=[ext]) as client:
        stored = [r.call for r in store.calls().values() if r.era == "tasks"]
        try:
            if stored:  # the process before this one died with a task: go on with it
                task = await run_task(client.session, stored[0], store=store, on_action=on_action)
                return outcome(task)
            return outcome(await client.call_tool("delete_files", {"count": 3}))
        except InteractionFailed as exc:
            return outcome(exc)


ERAS = {"sse": sse, "mrtr": mrtr, "tasks": tasks}


async def main(era: str, url: str, path: str) -> None:
    def before_write(delta: Written) -> None:
        handshake("write", label_of(delta))

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
