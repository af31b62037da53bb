"""The one-call adapters (MRTR, tasks; protocol 2026-07-28, mcp 2.x ``Client``) with a
durable store facing a server that strains it: a call whose record outgrows what the
store writes ends with that one ``StoreError`` (never an exception group), and a task
the server creates under an id an earlier task used is a new task (never restarted
from the earlier one's record).

The servers are scripted raw ASGI apps served by uvicorn on 127.0.0.1 (each JSON-RPC
POST answered by a handler with the result it returns), driven by explicit events,
never by sleeps; the stores are real SQLite files in ``tmp_path``. The record bound
(``codec.MAX_VALUE_BYTES``, read at each write) is lowered so the records stay small.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

pytest.importorskip("mcp")
pytest.importorskip("uvicorn")

from mcp import types

from fsm.adapters.mrtr import guarded_call_tool
from fsm.adapters.tasks import GuardedTasks
from fsm.durable import SqliteStore, codec
from fsm.errors import StoreError
from fsm.wire.sdk import modern_client
from support.json_server import json_rpc_server

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

BOUND = 64_000
"""The record bound the tests set: a question's text is ``TEXT`` long."""
TEXT = 10_000


def elicit(message: str) -> dict[str, Any]:
    schema = {"type": "object", "properties": {}}
    return {
        "method": "elicitation/create",
        "params": {"message": message, "requestedSchema": schema},
    }


def big(name: str) -> dict[str, Any]:
    """A question named ``name`` whose text is ``TEXT`` characters long."""
    return elicit(f"{name} " + "x" * TEXT)


TOOLS = {
    "result": {
        "tools": [{"name": "delete_files", "inputSchema": {"type": "object"}}],
        "resultType": "complete",
        "cacheScope": "private",
        "ttlMs": 0,
    }
}
"""``tools/list``: the SDK lists the tools after a call to check its result's schema."""


class User:
    """An elicitation callback that accepts every question and records it (its key and
    the first word of its text)."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, str]] = []

    async def __call__(self, ctx: Any, params: Any) -> types.ElicitResult:
        self.asked.append((str(ctx.request_id), params.message.split(" x")[0]))
        return types.ElicitResult(action="accept", content={})


async def outcome(run: Callable[[], Any]) -> Any:
    """What ``run()`` returned or raised (caught here, inside the ``Client`` block)."""
    with anyio.fail_after(20):
        try:
            return await run()
        except Exception as exc:
            return exc


def tasks_client(url: str, user: User, store: SqliteStore) -> Any:
    """A client asking ``user``, its tasks resolved by ``GuardedTasks(store=store)``."""
    return modern_client(url, elicitation_callback=user, extensions=[GuardedTasks(store=store)])


@pytest.fixture
def small_records(monkeypatch: pytest.MonkeyPatch) -> None:
    """Stores refuse to write a record longer than ``BOUND`` bytes."""
    monkeypatch.setattr(codec, "MAX_VALUE_BYTES", BOUND)


def assert_the_store_error(got: Any) -> None:
    """``got`` is the store's refusal itself, not an exception group holding it."""
    assert not isinstance(got, BaseExceptionGroup), got
    assert isinstance(got, StoreError), got
    assert "not written" in str(got), got


# ---- a record the store refuses to write


@pytest.mark.usefixtures("small_records")
async def test_an_mrtr_call_whose_record_outgrows_the_store_ends_with_the_store_error(
    tmp_path: Path,
) -> None:
    """Each round asks two new questions (all answered at once): the call's record grows
    with each round until the store refuses it. The call ends with that ``StoreError``
    itself, and the questions of the round whose record was not written are never shown."""
    rounds = {"n": 0}

    def handler(msg: dict[str, Any]) -> dict[str, Any]:
        if msg["method"] != "tools/call":
            return TOOLS
        rounds["n"] += 1
        n = rounds["n"]
        asks = {f"r{n}q{i}": big(f"r{n}q{i}") for i in range(2)}
        return {
            "result": {
                "resultType": "input_required",
                "inputRequests": asks,
                "requestState": f"s{n}",
            }
        }

    user = User()
    with SqliteStore(tmp_path / "calls.sqlite3") as store:
        async with (
            json_rpc_server(handler) as server,
            modern_client(server.url, elicitation_callback=user) as client,
        ):
            got = await outcome(
                lambda: guarded_call_tool(client, "delete_files", {}, store=store, call_id="call-1")
            )
    assert_the_store_error(got)
    last = rounds["n"]
    assert last > 1  # the bound was passed by the record, not by one round
    shown = {text for _, text in user.asked}
    assert shown == {f"r{n}q{i}" for n in range(1, last) for i in range(2)}


@pytest.mark.usefixtures("small_records")
async def test_a_task_whose_record_outgrows_the_store_ends_with_the_store_error(
    tmp_path: Path,
) -> None:
    """A task's poll lists more question text than the store writes in one record: the
    call ends with that ``StoreError`` itself, and no question is shown (none was
    written)."""

    def handler(msg: dict[str, Any]) -> dict[str, Any]:
        task = {"taskId": "task-1", "pollIntervalMs": 0}
        if msg["method"] == "tools/call":
            return {"result": {"resultType": "task", "status": "working", **task}}
        if msg["method"] == "tasks/get":
            asks = {f"q{i}": big(f"q{i}") for i in range(8)}
            return {"result": {**task, "status": "input_required", "inputRequests": asks}}
        return TOOLS

    user = User()
    with SqliteStore(tmp_path / "tasks.sqlite3") as store:
        async with (
            json_rpc_server(handler) as server,
            tasks_client(server.url, user, store) as client,
        ):
            got = await outcome(lambda: client.call_tool("delete_files", {}))
    assert_the_store_error(got)
    assert user.asked == []


# ---- a task id the server uses again


class ReusingIds:
    """A tasks server whose ids restart from ``task-1`` (a restarted server): every call
    gets ``task-1``, asks "Delete?" under ``confirm-1`` and completes with ``call <n>``
    once it took an answer. ``hold_first``: the first task stays ``working`` after its
    answer (``acked`` is set then)."""

    def __init__(self, *, hold_first: bool = False) -> None:
        self.calls = 0
        self.answered = False
        self.hold_first = hold_first
        self.acked = anyio.Event()
        self.updates: list[int] = []
        """The call each ``tasks/update`` came for."""

    def __call__(self, msg: dict[str, Any]) -> dict[str, Any]:
        method = msg["method"]
        task = {"taskId": "task-1", "pollIntervalMs": 0}
        if method == "tools/call":
            self.calls += 1
            self.answered = False
            return {"result": {"resultType": "task", "status": "working", **task}}
        if method == "tasks/update":
            self.updates.append(self.calls)
            self.answered = True
            return {"result": {}}
        if method != "tasks/get":
            return TOOLS
        if not self.answered:
            asks = {"confirm-1": elicit("Delete?")}
            return {"result": {**task, "status": "input_required", "inputRequests": asks}}
        if self.hold_first and self.calls == 1:
            self.acked.set()
            return {"result": {**task, "status": "working"}}
        result = {"content": [{"type": "text", "text": f"call {self.calls}"}]}
        return {"result": {**task, "status": "completed", "result": result}}


def text_of(result: Any) -> str:
    assert isinstance(result, types.CallToolResult), result
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


async def test_a_new_task_under_an_ended_tasks_id_is_asked_and_completes(tmp_path: Path) -> None:
    """Two calls in a row, both given ``task-1``: the first task's record ended in the
    store; the second task is a new one, asked and answered, not failed with
    ``ended-before-restart``."""
    server_script = ReusingIds()
    user = User()
    with SqliteStore(tmp_path / "tasks.sqlite3") as store:
        async with (
            json_rpc_server(server_script) as server,
            tasks_client(server.url, user, store) as client,
        ):
            first = await outcome(lambda: client.call_tool("delete_files", {"n": 1}))
            second = await outcome(lambda: client.call_tool("delete_files", {"n": 2}))
    assert (text_of(first), text_of(second)) == ("call 1", "call 2")
    assert user.asked == [("confirm-1", "Delete?")] * 2
    assert server_script.updates == [1, 2]


async def test_an_answer_given_to_an_abandoned_task_is_never_sent_for_a_new_one(
    tmp_path: Path,
) -> None:
    """The application gives up on the first task after its answer was acknowledged (its
    record stays unended); the next call gets the same task id and the same question:
    the user is asked again, and the answer sent for the second task is that one, not the
    first task's answer restarted from its record."""
    server_script = ReusingIds(hold_first=True)
    user = User()
    with SqliteStore(tmp_path / "tasks.sqlite3") as store:
        async with (
            json_rpc_server(server_script) as server,
            tasks_client(server.url, user, store) as client,
        ):
            async with anyio.create_task_group() as tg:
                tg.start_soon(client.call_tool, "delete_files", {"files": ["a"]})
                await server_script.acked.wait()  # answered, acknowledged, still working
                tg.cancel_scope.cancel()  # the application gives up on it
            second = await outcome(lambda: client.call_tool("delete_files", {"files": ["b"]}))
    assert text_of(second) == "call 2"
    assert user.asked == [("confirm-1", "Delete?")] * 2
    assert server_script.updates == [1, 2]
