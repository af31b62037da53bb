"""The SSE adapter with a store, in process, for what the SIGKILL harness
(``test_crash_harness.py``) does not show by itself: the write-ahead order (the question
on disk before the callback shows it, the answer on disk before the server takes it), the
session record a rejoin reads (the initialize result, the call's method and params, ended
calls dropped), the writes of the seed call (pinned: the harness kills before each), a
write that fails (nothing shown, the call fails), a session left on purpose not
rejoined, a rejoined session's request ids past the stored ones, a line that cannot
rejoin refusing a store; and what is never rejoined or resumed: a record its snapshot
does not back (another session, expired), a session of another server's URL, a state
beyond the guard's limits or an ``InitializeResult`` that does not validate (typed), a
call not restored or already being resumed, an application's own look-alike token."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import httpx2
import pytest
from mcp import types
from mcp.client.session import ClientRequestContext
from mcp.shared.exceptions import MCPError
from mcp.shared.message import ClientMessageMetadata

from fsm.adapters import mcp2
from fsm.adapters._transport.rejoin import REJOIN_TOKEN, session_url
from fsm.adapters.core import open_guarded_session
from fsm.adapters.mcp2 import guarded_session
from fsm.durable import MemoryStore, SqliteStore
from fsm.durable.codec import MAX_VALUE_BYTES
from fsm.durable.store import Delta, SessionRecord, SseCall
from fsm.errors import GuardUsageError, StoreCorruptError, StoreError
from fsm.sse.guard import GuardConfig, RequestRecord, SseDelta, StreamRecord
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


async def test_a_call_too_long_to_store_is_refused_and_the_next_is_listed(
    server: RunningServer, tmp_path: Path
) -> None:
    """A call whose params a load would refuse (longer than ``MAX_VALUE_BYTES``) is not
    sent: its listing's write is refused (``StoreError``), and the call alone fails, with
    the store's reason; the record keeps what was written, so the session goes on and the
    next call is listed."""
    with SqliteStore(tmp_path / "p.sqlite3") as store:
        async with guarded_session(server.url, store=store) as session:
            with (
                anyio.fail_after(20),
                pytest.raises(MCPError, match=r"store-unusable: .+ not written"),
            ):
                await session.call_tool("ping", {"pad": "x" * MAX_VALUE_BYTES})
            await session.call_tool("ping", {})
            record = store.session()
            assert record is not None and [c.stream for c in record.calls] == ["post:3"]


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


def _stream(name: str) -> StreamRecord:
    """An ended stream's record."""
    return StreamRecord(name, None, "done", None, (), 0, 0, None, False, True, None, ())


def _request(rid: int, state: str) -> RequestRecord:
    """A question's record in ``state``."""
    key = ("s1", rid)
    return RequestRecord(
        key, "get", "elicitation/create", 0, 0.0, state, None, 0, None, False, False, None
    )


INIT = json.dumps(
    {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "serverInfo": {"name": "s", "version": "1"},
    }
)
"""A stored ``InitializeResult`` (the server's own is not needed where none is rejoined)."""


def stored(
    url: str,
    snapshot: str = "s1",
    record: str = "s1",
    *,
    expired: bool = False,
    initialize: str = INIT,
    streams: tuple[StreamRecord, ...] = (),
    requests: tuple[RequestRecord, ...] = (),
) -> MemoryStore:
    """A store whose guard snapshot names session ``snapshot`` and whose session record
    names ``record`` (opened on ``url``)."""
    store = MemoryStore()
    store.write(SseDelta(snapshot, expired, streams, requests))
    store.write_session(SessionRecord(record, initialize, (), session_url(url)))
    return store


@pytest.mark.parametrize(
    ("snapshot", "record", "expired"),
    [("s1", "s2", False), ("s1", "s1", True)],
    ids=["another-session", "expired"],
)
async def test_a_record_the_snapshot_does_not_back_is_not_rejoined(
    server: RunningServer, snapshot: str, record: str, expired: bool
) -> None:
    store = stored(server.url, snapshot, record, expired=expired)
    async with guarded_session(server.url, store=store) as session:
        assert session.session_id not in ("s1", "s2") and session.restored_calls == ()
        result = await session.call_tool("ping", {})  # a fresh session
    assert not result.is_error


async def test_a_session_is_not_rejoined_on_another_server(server: RunningServer) -> None:
    store = MemoryStore()
    crashed = MemoryStore()
    async with guarded_session(server.url, store=store) as first:
        await first.call_tool("ping", {})
        ended = first.session_id
        record = store.session()
        assert record is not None and record.url == server.url
        crashed = MemoryStore(store.load())
        crashed.write_session(record)  # the process "crashes" here
    seen: list[str] = []

    async def note(request: httpx2.Request) -> None:
        seen.append(request.headers.get("mcp-session-id", ""))

    async with (
        running_server() as other,
        httpx2.AsyncClient(event_hooks={"request": [note]}) as http,
        guarded_session(other.url, store=crashed, http_client=http) as second,
    ):
        assert second.restored_calls == () and second.session_id != ended
        await second.call_tool("ping", {})
    assert seen and ended not in seen


@pytest.mark.parametrize(
    ("config", "streams", "requests"),
    [
        (GuardConfig(max_streams=1), (_stream("post:1"), _stream("post:2")), ()),
        (GuardConfig(max_live_requests=1), (), (_request(1, "presented"), _request(2, "new"))),
        (GuardConfig(max_tombstones=1), (), (_request(1, "resolved"), _request(2, "dead"))),
    ],
    ids=["streams", "live-requests", "tombstones"],
)
async def test_a_stored_state_beyond_the_guards_limits_is_refused(
    server: RunningServer,
    config: GuardConfig,
    streams: tuple[StreamRecord, ...],
    requests: tuple[RequestRecord, ...],
) -> None:
    store = stored(server.url, streams=streams, requests=requests)
    with pytest.raises(StoreCorruptError, match="limits"):
        async with guarded_session(server.url, store=store, config=config):
            pass


async def test_a_stored_initialize_that_does_not_validate_is_corrupt(
    server: RunningServer,
) -> None:
    store = stored(server.url, initialize='{"protocolVersion": 7}')
    with pytest.raises(StoreCorruptError):
        async with guarded_session(server.url, store=store):
            pass


async def test_resume_call_refuses_a_call_not_restored_or_being_resumed(
    server: RunningServer,
) -> None:
    store = MemoryStore()
    refused: list[str] = []

    async def user(context: ClientRequestContext, params: Any) -> types.ElicitResult:
        crashed = MemoryStore(store.load())  # the process "crashes" with the question shown
        record = store.session()
        assert record is not None
        crashed.write_session(record)
        async with guarded_session(server.url, store=crashed) as again:
            (call,) = again.restored_calls
            with pytest.raises(GuardUsageError, match="not a call this session restored"):
                await again.resume_call(call._replace(stream="post:99"))
            refused.append("unknown")
            with anyio.fail_after(10):
                async with anyio.create_task_group() as tg:
                    tg.start_soon(again.resume_call, call)
                    while call.stream not in again._e.resume_calls:
                        await anyio.lowlevel.checkpoint()
                    with pytest.raises(GuardUsageError, match="already being resumed"):
                        await again.resume_call(call)
                    refused.append("twice")
                    tg.cancel_scope.cancel()
        return types.ElicitResult(action="accept", content={"confirm": True})

    async with guarded_session(server.url, elicitation_callback=user, store=store) as first:
        await first.call_tool("delete_files", {})
    assert refused == ["unknown", "twice"]


async def test_an_applications_own_rejoin_token_is_not_a_rejoin(server: RunningServer) -> None:
    """A resumption token of the application's that starts like the one
    :func:`resume_call` gives the SDK resumes nothing: the transport answers 405 (the
    SDK then fails the session), and the GET never reaches the server."""
    gets: list[str] = []

    async def note(request: httpx2.Request) -> None:
        if request.method == "GET":
            gets.append(request.headers.get("last-event-id", ""))

    token = REJOIN_TOKEN + "post:2"
    request = types.CallToolRequest(params=types.CallToolRequestParams(name="ping", arguments={}))
    metadata = ClientMessageMetadata(resumption_token=token)
    with anyio.fail_after(10), pytest.raises(BaseExceptionGroup) as got:
        async with (
            httpx2.AsyncClient(event_hooks={"request": [note]}) as http,
            guarded_session(server.url, store=MemoryStore(), http_client=http) as session,
        ):
            await session.call_tool("ping", {})  # post:2, a call this session made
            await session.send_request(request, types.CallToolResult, metadata=metadata)
    # refused here (405, as for any resumption the SDK tries on its own), never resumed
    assert got.group_contains(httpx2.HTTPStatusError, match="405")
    assert token not in gets


def test_a_session_record_keeps_no_credentials_query_or_fragment() -> None:
    assert session_url("https://user:secret@Host.example:8443/a/mcp?k=1#f") == (
        "https://host.example:8443/a/mcp"
    )
    assert session_url("http://[::1]:9/mcp") == "http://[::1]:9/mcp"
    assert session_url("http://h:notaport/mcp") == ""


async def test_a_restored_call_whose_params_do_not_validate_is_corrupt(
    server: RunningServer,
) -> None:
    call = SseCall("post:1", "tools/call", '{"name": 7}')
    live = StreamRecord("post:1", 1, "open", "e1", (), 0, 0, None, False, False, None, ())
    store = stored(server.url, streams=(live,))
    store.write_session(SessionRecord("s1", INIT, (call,), session_url(server.url)))
    async with guarded_session(server.url, store=store) as session:
        assert session.restored_calls == (call,)
        with anyio.fail_after(10), pytest.raises(StoreCorruptError):
            await session.resume_call(call)
