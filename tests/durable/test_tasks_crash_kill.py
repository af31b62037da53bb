"""Crash testing of the real code: a guarded mcp 2.x client process runs the tasks
scenario (the task is created, asks a question under one key, takes the answer through
``tasks/update`` and completes) against the loopback tasks server with a SQLite store; it
is SIGKILLed before each of its store writes and a new process started on the same file,
resuming the task by the id the store kept. Across the two processes: the question is
presented once (and re-shown once, marked, only when the kill fell while it was on
screen), the server takes the answer, and the task has exactly one outcome."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from call_crash import outcomes, prompts, run_child

from fsm.wire.tasks_server import TasksServer, running_tasks_server

pytestmark = pytest.mark.anyio

WRITES = 4
"""The task created with its question, the answer, the update acknowledged, the end
(pinned in process by test_tasks_adapter_store.py)."""


@pytest.fixture
async def server() -> AsyncIterator[TasksServer]:
    async with running_tasks_server(poll_interval_ms=50) as srv:
        yield srv


@pytest.mark.parametrize("kill_at", range(WRITES))
async def test_sigkill_before_each_write(server: TasksServer, tmp_path: Path, kill_at: int) -> None:
    path = tmp_path / "p.sqlite3"
    first = await run_child("tasks", server.url, path, kill_at)
    second = await run_child("tasks", server.url, path, None)
    fresh, again = prompts(first + second)
    assert len(fresh) == 1, fresh  # never an answered question asked twice
    assert again == (fresh if kill_at == 1 else []), again  # on screen at the kill: once more
    ends = outcomes(first + second)
    assert ends == ["result Deleted 3 files"], ends
    # Killed before the first write, nothing was kept: the tool is called again (a new
    # task); after it, the second process resumed the task the store named.
    assert len(server.log.created) == (2 if kill_at == 0 else 1), server.log.created
    task = server.latest().task_id
    assert [a[:2] for a in server.log.answers] == [(task, "confirm-1")]  # no answer lost
