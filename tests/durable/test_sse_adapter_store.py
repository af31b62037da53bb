"""The SSE adapter with a store, in process, for what the SIGKILL harness
(``test_crash_harness.py``) does not show by itself: the write-ahead order (the question
on disk before the callback shows it, the answer on disk before the server takes it), the
session record a rejoin reads (the initialize result, the call's method and params, ended
calls dropped), the writes of the seed call (pinned: the harness kills before each), a
write that fails (nothing shown, the call fails), a session left on purpose not
rejoined, a rejoined session's request ids past the stored ones, and a line that cannot
rejoin refusing a store."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import AsyncIterator
from typing import Any

import anyio
import httpx2
import pytest
from mcp import types
from mcp.client.session import ClientRequestContext
from mcp.shared.exceptions import MCPError

from fsm.adapters import mcp2
from fsm.adapters.core import open_guarded_session
from fsm.adapters.mcp2 import guarded_session
from fsm.durable import MemoryStore
from fsm.durable.store import Delta, SessionRecord
from fsm.errors import StoreError
from fsm.sse.guard import SseDelta
from fsm.wire.server import RunningServer, running_server

pytestmark = pytest.mark.anyio

WRITES = (14, 15)
"""The seed call's writes, the cleared session record at the close included (the
harness's kill points before a write): the answer's
submission outcome is written on its own when its 202 comes before the call's result on
the stream, and rides with the end when the result comes first (the two race on the
wire)."""


@pytest.fixture
async def server() -> AsyncIterator[RunningServer]:
    async with running_server() as srv:
        yield srv


class Watched(MemoryStore):
    """A memory store that checks, at each write of an answer, that the server has not
    taken it yet (write-ahead), and keeps the session records written."""

    def __init__(self, server: RunningServer) -> None:
        super().__init__()
        self.server = server
        self.answers_written = 0
        self.sessions: list[SessionRecord] = []

    def write(self, delta: Delta) -> None:
        if isinstance(delta, SseDelta) and any(r.state == "submitting" for r in delta.requests):
            taken = [e for e in self.server.controller.log if e.kind == "elicit_answered"]
            assert taken == [], "the answer reached the server before it was on disk"
            self.answers_written += 1
        super().write(delta)

    def write_session(self, record: SessionRecord) -> None:
        self.sessions.append(record)
        super().write_session(record)


async def test_the_seed_call_writes_ahead(server: RunningServer) -> None:
    store = Watched(server)
    shown: list[Any] = []

    async def user(context: ClientRequestContext, params: Any) -> types.ElicitResult:
        questions = [q.key[1] for q in store.load().questions]
        shown.append((context.request_id, questions))  # on disk before it is shown
        return types.ElicitResult(action="accept", content={"confirm": True})

    async with guarded_session(server.url, elicitation_callback=user, store=store) as session:
        result = await session.call_tool("delete_files", {})
        assert session.restored_calls == ()
    block = result.content[0]
    assert isinstance(block, types.TextContent) and block.text.startswith("Deleted 3 files")
    assert shown == [(1, [1])]
    assert store.answers_written == 1
    assert store.writes in WRITES
    first, call, left = store.sessions  # initialized, the call listed before its POST, left
    assert left == SessionRecord("", "", ())
    assert first.calls == () and json.loads(first.initialize)["protocolVersion"]
    assert first.session == call.session == session.session_id
    (listed,) = call.calls
    assert listed.method == "tools/call"
    assert json.loads(listed.params or "")["name"] == "delete_files"


async def test_a_call_is_listed_until_a_later_call_finds_it_ended(server: RunningServer) -> None:
    store = Watched(server)
    async with guarded_session(server.url, store=store) as session:
        await session.call_tool("ping", {})
        await session.call_tool("ping", {})
    *_, last, _left = store.sessions
    assert [c.stream for c in last.calls] == ["post:4"]  # post:2 ended (post:3 lists tools)


async def test_a_line_that_cannot_rejoin_takes_no_store(server: RunningServer) -> None:
    binding = dataclasses.replace(mcp2.BINDING, rejoin=None)
    with pytest.raises(ValueError, match="takes no store"):
        async with open_guarded_session(binding, server.url, store=MemoryStore()):
            pass


class Full(MemoryStore):
    """A store whose disk fills when the question is to be written."""

    def write(self, delta: Delta) -> None:
        if isinstance(delta, SseDelta) and any(r.state == "presented" for r in delta.requests):
            raise StoreError("disk full", path="full")
        super().write(delta)


async def test_a_failed_write_shows_nothing_and_fails_the_call(server: RunningServer) -> None:
    shown: list[Any] = []

    async def user(context: ClientRequestContext, params: Any) -> types.ElicitResult:
        shown.append(context.request_id)
        return types.ElicitResult(action="accept", content={"confirm": True})

    async with guarded_session(server.url, elicitation_callback=user, store=Full()) as session:
        with anyio.fail_after(20), pytest.raises(MCPError):
            await session.call_tool("delete_files", {})
    assert shown == []  # not on disk, so never shown


async def test_a_session_left_on_purpose_is_not_rejoined(server: RunningServer) -> None:
    store = MemoryStore()
    async with guarded_session(server.url, store=store) as first:
        await first.call_tool("ping", {})
        ended = first.session_id
    assert store.session() == SessionRecord("", "", ())  # left: nothing to rejoin
    async with guarded_session(server.url, store=store) as second:
        assert second.restored_calls == () and second.session_id != ended
        result = await second.call_tool("ping", {})  # a fresh session, not the deleted one
    assert not result.is_error


async def test_a_rejoined_session_numbers_its_requests_past_the_stored_ones(
    server: RunningServer,
) -> None:
    store = MemoryStore()
    sent: list[Any] = []  # the JSON-RPC ids the rejoining process sends

    async def note(request: httpx2.Request) -> None:
        body = json.loads(request.content or b"{}")
        if isinstance(body, dict) and "method" in body and "id" in body:
            sent.append(body["id"])

    async def user(context: ClientRequestContext, params: Any) -> types.ElicitResult:
        # The process "crashes" here, the question on screen: another one rejoins from
        # what the store holds now, while the session lives.
        crashed = MemoryStore(store.load())
        record = store.session()
        assert record is not None
        crashed.write_session(record)
        async with (
            httpx2.AsyncClient(event_hooks={"request": [note]}) as http,
            guarded_session(server.url, store=crashed, http_client=http) as again,
        ):
            assert again.session_id == record.session
            assert [c.method for c in again.restored_calls] == ["tools/call"]
            await again.send_ping()
        return types.ElicitResult(action="accept", content={"confirm": True})

    async with guarded_session(server.url, elicitation_callback=user, store=store) as first:
        await first.call_tool("delete_files", {})
    assert sent and min(sent) > 2  # past initialize (1) and the call (2): never reused
