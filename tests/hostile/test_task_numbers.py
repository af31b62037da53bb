"""A task whose ``ttlMs`` or ``pollIntervalMs`` is a number no float holds (an integer of
400 digits: valid JSON, parsed as a Python ``int``) ends the call with one
:class:`~fsm.errors.MalformedTaskError`, like any other value out of range: the rules
(fed directly) and the tasks adapter on an unmodified mcp 2.x ``Client`` over loopback
HTTP (a scripted raw ASGI server on 127.0.0.1, the result's bytes written as they are).
Before the fix the rules' range check converted the integer to a float
(``OverflowError`` out of ``TaskCall.feed``: an ``ExceptionGroup`` for the caller)."""

from __future__ import annotations

import contextlib
import json
import socket
from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio
import pytest

pytest.importorskip("mcp")
pytest.importorskip("uvicorn")

from fsm.actions import Fail, Ignore
from fsm.adapters.tasks import GuardedTasks
from fsm.errors import MalformedTaskError
from fsm.tasks.task import Polled, TaskCall, TaskCreated
from fsm.wire.sdk import modern_client
from fsm.wire.serving import lifespan, serving, whole_body

HUGE = "1" + "0" * 400
"""An integer of 400 digits, as its JSON text: beyond every float."""

FIELDS = ("ttlMs", "pollIntervalMs")

pytestmark = pytest.mark.timeout(60)


def task(name: str | None, head: str = "") -> bytes:
    """A working task's JSON object (``head``: fields before its own) with ``name``
    stated as :data:`HUGE`; without ``name``, polled every 0 ms (0.1 s, the least)."""
    number = f'"{name}":{HUGE}' if name is not None else '"pollIntervalMs":0'
    return f'{{{head}"taskId":"t1","status":"working",{number}}}'.encode()


# ------------------------------------------------------------------ the rules, fed directly


@pytest.mark.parametrize("name", FIELDS)
@pytest.mark.parametrize("when", ["created", "polled"])
def test_the_rules_fail_once_typed(name: str, when: str) -> None:
    call = TaskCall("t1", clock=lambda: 0.0)
    bad = json.loads(task(name))
    if when == "polled":
        call.feed(TaskCreated({"taskId": "t1", "status": "working"}))
    actions = call.feed(TaskCreated(bad) if when == "created" else Polled(bad))
    fails = [a for a in actions if isinstance(a, Fail)]
    assert len(fails) == 1 and type(fails[0].error) is MalformedTaskError, actions
    after = call.feed(Polled(json.loads(task(None))))
    assert after and all(isinstance(a, Ignore) and a.reason == "task-ended" for a in after)


# ------------------------------------------------------------------ over loopback HTTP


class Server:
    """A 2026-07-28 server answering each JSON-RPC request POST with ``answer(method)``
    as its ``result`` (raw JSON bytes, ``application/json``); a notification gets ``202``,
    any other HTTP method ``405``. Logs the methods asked."""

    def __init__(self, answer: Callable[[str], bytes]) -> None:
        self.answer = answer
        self.methods: list[str] = []
        self.url = ""

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await lifespan(receive, send)
            return
        body = await whole_body(receive)
        msg = json.loads(body) if scope["method"] == "POST" else None
        if msg is None or "id" not in msg:  # 405 to any other method, 202 to a notification
            status = 202 if msg is not None else 405
            await send({"type": "http.response.start", "status": status, "headers": []})
            await send({"type": "http.response.body", "body": b""})
            return
        self.methods.append(msg["method"])
        result = self.answer(msg["method"])
        rid = json.dumps(msg["id"]).encode()
        body = b'{"jsonrpc":"2.0","id":%s,"result":%s}' % (rid, result)
        head = [(b"content-type", b"application/json")]
        await send({"type": "http.response.start", "status": 200, "headers": head})
        await send({"type": "http.response.body", "body": body})


@contextlib.asynccontextmanager
async def served(answer: Callable[[str], bytes]) -> AsyncIterator[Server]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    server = Server(answer)
    server.url = f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
    try:
        async with serving(server, sock, shutdown_timeout=1):
            yield server
    finally:
        sock.close()


@pytest.mark.anyio
@pytest.mark.parametrize("name", FIELDS)
@pytest.mark.parametrize("when", ["created", "polled"])
async def test_the_adapter_ends_the_call_with_one_typed_error(name: str, when: str) -> None:
    def answer(method: str) -> bytes:
        if method == "tools/call":
            return task(name if when == "created" else None, '"resultType":"task",')
        return task(name)  # tasks/get

    async with (
        served(answer) as server,
        modern_client(server.url, extensions=[GuardedTasks()]) as client,
    ):
        with anyio.fail_after(20):
            try:
                got: object = await client.call_tool("delete_files", {})
            except Exception as exc:
                got = exc
    assert isinstance(got, MalformedTaskError), repr(got)
    assert name in str(got)
    asked = ["tools/call"] if when == "created" else ["tools/call", "tasks/get"]
    assert server.methods == asked
