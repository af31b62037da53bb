"""The tasks adapter with a store, in process, for what the SIGKILL harness does not
reach: the scenario's writes (pinned); a task whose end was recorded fails once typed
when resumed (no request, no prompt); an id stored as an MRTR call is refused; a task id
with no record is resumed from ``TaskResumed`` (polled at once), and its decisions are
written."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from mcp import types
from recording_user import User

from fsm.adapters.tasks import GuardedTasks, TaskHandle, run_task
from fsm.durable import SqliteStore
from fsm.durable.calls import DurableCall
from fsm.errors import InteractionFailed
from fsm.mrtr.call import MrtrCall
from fsm.wire.sdk import modern_client
from fsm.wire.tasks_server import TasksServer, running_tasks_server

pytestmark = pytest.mark.anyio


@pytest.fixture
async def server() -> AsyncIterator[TasksServer]:
    async with running_tasks_server(poll_interval_ms=50) as srv:
        yield srv


def text(result: types.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


async def test_a_task_whose_end_was_recorded_fails_once_typed(
    server: TasksServer, tmp_path: Path
) -> None:
    user = User()
    with SqliteStore(tmp_path / "p.sqlite3") as store:
        ext = GuardedTasks(store=store)
        async with modern_client(server.url, elicitation_callback=user, extensions=[ext]) as client:
            result = await client.call_tool("delete_files", {"count": 3})
            assert text(result) == "Deleted 3 files"
            (record,) = store.calls().values()
            assert record.era == "tasks" and record.ended
            # The task created with its question, the answer, the update acknowledged,
            # the end: the writes the SIGKILL harness kills before (test_crash_harness).
            assert store.writes == 4
            polls = server.log.polls
            with pytest.raises(InteractionFailed) as caught:
                await run_task(client.session, record.call, store=store)
    assert caught.value.reason == "ended-before-restart"
    assert server.log.polls == polls and user.prompts == [("confirm-1", False)]


async def test_an_id_stored_as_an_mrtr_call_is_refused(server: TasksServer, tmp_path: Path) -> None:
    with SqliteStore(tmp_path / "p.sqlite3") as store:
        store.write(DurableCall(MrtrCall("task-1", clock=lambda: 0.0)).record())
        async with modern_client(server.url, extensions=[GuardedTasks()]) as client:
            handle = await client.session.call_tool(
                "delete_files", {"count": 1}, allow_claimed=True
            )
            assert isinstance(handle, TaskHandle) and handle.task_id == "task-1"
            with pytest.raises(ValueError, match="stored as a mrtr call"):
                await run_task(client.session, handle, store=store)


async def test_a_task_id_without_a_record_is_resumed_and_written(
    server: TasksServer, tmp_path: Path
) -> None:
    user = User()
    with SqliteStore(tmp_path / "p.sqlite3") as store:
        async with modern_client(
            server.url, elicitation_callback=user, extensions=[GuardedTasks()]
        ) as c:
            handle = await c.session.call_tool("delete_files", {"count": 2}, allow_claimed=True)
            assert isinstance(handle, TaskHandle)
            result = await run_task(c.session, handle.task_id, store=store)
        assert text(result) == "Deleted 2 files"
        assert store.calls()[handle.task_id].ended
    assert user.prompts == [("confirm-1", False)]
