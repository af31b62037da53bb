"""The official tasks requester, ``@modelcontextprotocol/ext-tasks`` 0.2.2 (on the
TypeScript SDK v2 client 2.4.0, protocol 2026-07-28; ``tests/ext_tasks``, installed from its
committed lock by ``make ext-tasks``), against the test bed's tasks server on 127.0.0.1:
the server's wire shapes are the ones the official requester takes, and where the
requester as shipped differs from the guarded adapter the difference shows live. The
package ships no 2026-07-28 tasks server (its receiver is the 2025-11-25 one), so the
server side is the Python test bed's."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from fsm.wire.tasks_server import TasksServer, running_tasks_server

pytestmark = pytest.mark.anyio

PROJECT = Path(__file__).resolve().parents[1] / "ext_tasks"
PACKAGE = PROJECT / "node_modules" / "@modelcontextprotocol" / "ext-tasks" / "package.json"


def _node() -> str:
    node = shutil.which("node")
    if node is None or not PACKAGE.is_file():
        pytest.fail("the ext-tasks requester needs node and `make ext-tasks` (tests/ext_tasks)")
    return node


async def _run(
    server: TasksServer, on_prompt: Callable[[], None] | None = None
) -> list[dict[str, Any]]:
    """Run the requester for ``delete_files(count=3)``; its events. Each prompt is
    answered ``accept`` after ``on_prompt`` ran (on the first prompt only)."""
    command = [_node(), str(PROJECT / "requester.mjs"), server.url, "delete_files", '{"count":3}']
    events: list[dict[str, Any]] = []
    with anyio.fail_after(20):
        async with await anyio.open_process(command) as process:
            assert process.stdout is not None and process.stdin is not None
            buffer = b""
            async for chunk in process.stdout:
                buffer += chunk
                while b"\n" in buffer:
                    line, buffer = buffer.split(b"\n", 1)
                    event = json.loads(line)
                    events.append(event)
                    if event["event"] == "prompt":
                        if on_prompt is not None and len(events) == 1:
                            on_prompt()
                        await process.stdin.send(b"accept\n")
            await process.wait()
    return events


async def test_the_official_requester_completes_a_task_of_the_test_bed_server() -> None:
    async with running_tasks_server() as server:
        events = await _run(server)
    prompts = [e for e in events if e["event"] == "prompt"]
    assert prompts == [
        {"event": "prompt", "kind": "elicitation", "message": "Delete 3 files?", "taskId": "task-1"}
    ]
    assert events[-1]["event"] == "outcome" and events[-1]["status"] == "completed"
    assert events[-1]["result"]["content"][0]["text"] == "Deleted 3 files"
    assert server.log.answers == [("task-1", "confirm-1", {"action": "accept", "content": {}})]
    assert set(server.log.names["tasks/get"]) == {"task-1"}


async def test_the_official_requester_asks_an_answered_question_again_under_a_new_key() -> None:
    """Its ledger holds keys, not questions: the re-asked question is shown again (the
    guarded adapter answers it from the store: test_tasks_e2e)."""
    async with running_tasks_server() as server:
        server.reask_next(1)
        events = await _run(server)
    assert [e["message"] for e in events if e["event"] == "prompt"] == ["Delete 3 files?"] * 2
    assert [key for _, key, _ in server.log.answers] == ["confirm-1", "confirm-2"]
    assert events[-1]["status"] == "completed"


async def test_the_official_requester_answers_a_superseded_prompt_into_the_void() -> None:
    """It does not poll while a prompt is up: the superseded key's answer is sent, the
    server acknowledges and drops it, then the new key is shown."""
    async with running_tasks_server() as server:
        events = await _run(server, lambda: server.supersede(server.latest().task_id) and None)
    assert [e["message"] for e in events if e["event"] == "prompt"] == [
        "Delete 3 files?",
        "Delete 3 files? (updated)",
    ]
    assert server.log.ignored == [("task-1", "confirm-1")]
    assert events[-1]["status"] == "completed"


@pytest.mark.parametrize("fault", ["refuse_updates", "lose_updates"])
async def test_a_failed_update_ends_the_official_requesters_execution(fault: str) -> None:
    """It releases the key and rethrows: the execution fails, with one prompt (a second
    would need a new execution, whose ledger starts empty)."""
    async with running_tasks_server() as server:
        getattr(server, fault)(1)
        events = await _run(server)
    assert len([e for e in events if e["event"] == "prompt"]) == 1
    assert events[-1]["event"] == "outcome" and events[-1]["status"] == "failed"
    assert server.log.answers == []
