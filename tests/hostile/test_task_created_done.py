"""A server may answer ``tools/call`` with a task that is already ``completed`` and
carries its ``result`` (the task object as ``tasks/get`` would give it). The guarded
requester returns that result, as the plain requester (``fsm.wire.tasks_plain``) does,
without a poll: on real loopback HTTP, a scripted JSON-RPC server and an unmodified mcp
2.x ``Client``."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

pytest.importorskip("mcp")
pytest.importorskip("uvicorn")

from mcp import types

from fsm.adapters.tasks import GuardedTasks
from fsm.wire.sdk import modern_client
from support.json_server import json_rpc_server

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

DONE = {"resultType": "complete", "content": [{"type": "text", "text": "done"}]}
NO_TOOLS = {"resultType": "complete", "tools": [], "cacheScope": "private", "ttlMs": 0}
TASK = {"taskId": "t1", "status": "completed", "result": DONE}


def _answer(msg: dict[str, Any]) -> dict[str, Any]:
    if msg["method"] == "tools/call":
        return {"result": {"resultType": "task", **TASK}}
    if msg["method"] == "tools/list":
        return {"result": NO_TOOLS}
    return {"result": TASK}


async def test_a_task_created_completed_returns_the_result_it_carries() -> None:
    async with (
        json_rpc_server(_answer) as server,
        modern_client(server.url, extensions=[GuardedTasks()]) as client,
    ):
        with anyio.fail_after(15):
            got = await client.call_tool("x", {})
    assert isinstance(got, types.CallToolResult), repr(got)
    assert got.content[0].text == "done"  # type: ignore[union-attr]
    assert "tasks/get" not in server.methods  # the created task was done: nothing to poll
