"""A task whose ``ttlMs`` or ``pollIntervalMs`` is a number no float holds (an integer of
400 digits: valid JSON, parsed as a Python ``int``) ends the call with one
:class:`~fsm.errors.MalformedTaskError`, like any other value out of range: the rules
(fed directly) and the tasks adapter on an unmodified mcp 2.x ``Client`` over loopback
HTTP (a scripted raw ASGI server on 127.0.0.1, the result's bytes written as they are).
A range check that converts such an integer to a float raises ``OverflowError`` out of
``TaskCall.feed`` (an ``ExceptionGroup`` for the caller)."""

from __future__ import annotations

import json
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
from support.json_server import json_rpc_server

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


@pytest.mark.anyio
@pytest.mark.parametrize("name", FIELDS)
@pytest.mark.parametrize("when", ["created", "polled"])
async def test_the_adapter_ends_the_call_with_one_typed_error(name: str, when: str) -> None:
    def answer(msg: dict[str, Any]) -> dict[str, Any]:
        if msg["method"] == "tools/call":
            raw = task(name if when == "created" else None, '"resultType":"task",')
        else:  # tasks/get
            raw = task(name)
        return {"result": json.loads(raw)}

    async with (
        json_rpc_server(answer) as server,
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
