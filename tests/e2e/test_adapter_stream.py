"""The guarded body's SSE handling, without a server: however the bytes are cut into
chunks, the SDK gets the same events and the guard the same observations.

A call stream mixing what the hot path reads without a parse (plain notifications) with
everything it must leave to the parser (requests, a replayed duplicate, a cancellation,
nested, non-ASCII or malformed params, an escaped key, comments, a ``retry:`` event, LF and CRLF
line ends) is fed through :class:`fsm.adapters._transport.body.GuardedBody` one event per chunk,
all in one chunk, one byte per chunk and in random cuts. What the SDK's own SSE parser
reads from the output, the guard's observations and its requests must not depend on the
cut; unchanged chunks must pass through as the very bytes received.
"""

from __future__ import annotations

import json
import random
from typing import Any

import anyio
import anyio.lowlevel
import httpx2
import pytest
from anyio.abc import TaskGroup
from sse_bodies import ScriptedBody, sse_event

from fsm import events as ev
from fsm import properties as P
from fsm.adapters._transport import sse
from fsm.adapters._transport.body import YIELD_EVERY
from fsm.adapters._transport.handles import Tee
from fsm.adapters._transport.session_io import SessionIO
from fsm.adapters._transport.sse import LARGE_EVENT
from fsm.adapters.mcp2 import BINDING
from fsm.messages import is_plain_notification
from fsm.sse.guard import Guard
from fsm.sse.observe import ObservedGuard

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

SESSION, STREAM, ORIGIN = "s1", "post:2", 2


def _event(event_id: str | None, message: Any, crlf: bool = True) -> bytes:
    return sse_event(event_id, message, crlf=crlf, compact=True)


def _progress(n: int, **extra: Any) -> dict[str, Any]:
    params = {"progressToken": ORIGIN, "progress": n, "total": 10, **extra}
    return {"jsonrpc": "2.0", "method": "notifications/progress", "params": params}


ELICIT = {
    "jsonrpc": "2.0",
    "id": 5,
    "method": "elicitation/create",
    "params": {"message": "Delete?", "requestedSchema": {"type": "object", "properties": {}}},
}
# a request whose id key is escaped: a notification to a reader that does not parse
SNEAKY = (
    '{"jsonrpc":"2.0","method":"elicitation/create",'
    '"params":{"message":"Sneaky?","requestedSchema":{"type":"object","properties":{}}},'
    '"\\u0069d":7}'
)
DUPLICATE = _event("e2", _progress(2), crlf=False)
EVENTS: list[bytes] = [
    _event("e1", _progress(1)),
    b": keep-alive\r\n\r\n",
    DUPLICATE,
    _event("e3", ELICIT),
    DUPLICATE,  # a replayed duplicate: rewritten to an empty event
    _event("e4", {"jsonrpc": "2.0", "method": "notifications/message", "params": {"data": [1]}}),
    _event("e5", _progress(3, message="café ☕")),
    _event("e6", SNEAKY),
    _event(None, _progress(4)),
    _event("e7", {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"x": 1}}),
    b"id: e8\r\nretry: 100\r\ndata: \r\n\r\n",
    _event("e9", _progress(5)),
    _event("e12", {"jsonrpc": "2.0", "method": "notifications/progress", "params": [1]}),
    _event("e10", {"jsonrpc": "2.0", "id": ORIGIN, "result": {"content": []}}),
    _event("e11", _progress(6)),  # after the origin's response: never reaches the SDK
]
WIRE = b"".join(EVENTS)


class _Response:
    """What the body reads of an ``httpx2.Response``: headers, stream, aclose."""

    def __init__(self, chunks: list[bytes]) -> None:
        self.headers: dict[str, str] = {"content-type": "text/event-stream"}
        self.stream = ScriptedBody(chunks)

    async def aclose(self) -> None:
        pass


def _engine(observed: ObservedGuard, tg: TaskGroup, **kw: Any) -> SessionIO:
    """A session's engine for ``observed`` (its tasks in ``tg``; ``kw``: SessionIO's
    keywords) with the session started and :data:`STREAM` opened for :data:`ORIGIN`."""
    engine = SessionIO(observed, httpx2.AsyncClient(), tg, "http://127.0.0.1:9/mcp", BINDING, **kw)
    engine.session = SESSION
    engine.feed(ev.SessionStarted(SESSION))
    engine.feed(ev.StreamOpened(STREAM, ORIGIN))
    return engine


async def _turns(tg: TaskGroup) -> list[int]:
    """A task started in ``tg`` that takes a turn of the event loop whenever it can, for
    ever: the list it adds a 1 to on each turn, once it is running."""
    turns: list[int] = []

    async def other() -> None:
        while True:
            turns.append(1)
            await anyio.lowlevel.checkpoint()

    tg.start_soon(other)
    await anyio.lowlevel.checkpoint()  # the other task is running
    return turns


async def _run(chunks: list[bytes]) -> tuple[list[bytes], ObservedGuard]:
    assert b"".join(chunks) == WIRE
    observed = ObservedGuard(Guard(clock=lambda: 0.0))
    async with anyio.create_task_group() as tg:
        engine = _engine(observed, tg)
        tee = Tee()
        body = engine.bound.body(engine, STREAM, ORIGIN, None, _Response(chunks), tee)
        out = [piece async for piece in body]
        engine.flush()
        engine.close()
        tg.cancel_scope.cancel()
    return out, observed


def _sdk_reads(out: list[bytes]) -> list[tuple[str, str, str, int | None]]:
    response = httpx2.Response(
        200,
        headers={"content-type": "text/event-stream"},
        content=b"".join(out),
        request=httpx2.Request("GET", "http://127.0.0.1:9/mcp"),
    )
    return [(s.event, s.data, s.id, s.retry) for s in httpx2.EventSource(response)]


def _cuts(seed: int) -> list[bytes]:
    rng = random.Random(seed)
    chunks, pos = [], 0
    while pos < len(WIRE):
        size = rng.choice((1, 2, 3, 7, 40, 120, 400))
        chunks.append(WIRE[pos : pos + size])
        pos += size
    return chunks


async def test_unchanged_events_pass_through_as_received() -> None:
    out, observed = await _run(EVENTS)
    rewritten = sse.encode_event("e2", "")
    assert out[:-1] == [*EVENTS[:4], rewritten, *EVENTS[5:-2]]
    # the event that ended the stream goes out as parsed (line ends normalised)
    assert _sdk_reads(out[-1:]) == _sdk_reads(EVENTS[-2:-1])
    assert observed.violations == []
    # the escaped id was parsed: the guard tracks (and presented) request 7
    assert observed.guard.state_of((SESSION, 7)) is not None
    assert observed.guard.state_of((SESSION, 5)) is not None
    assert observed.guard.stream_state(STREAM) == "done"
    # a notification the guard's hot path refuses (params not an object) is still observed
    assert P.EventSeen(STREAM, "e12") in [obs for obs, _ in observed.log]


@pytest.mark.parametrize("cut", ["whole", "bytes", *(f"random-{i}" for i in range(12))])
async def test_any_cut_gives_the_same_events_and_observations(cut: str) -> None:
    reference, ref_guard = await _run(EVENTS)
    if cut == "whole":
        chunks = [WIRE]
    elif cut == "bytes":
        chunks = [WIRE[i : i + 1] for i in range(len(WIRE))]
    else:
        chunks = _cuts(int(cut.split("-")[1]))
    out, observed = await _run(chunks)
    assert _sdk_reads(out) == _sdk_reads(reference)
    assert [obs for obs, _ in observed.log] == [obs for obs, _ in ref_guard.log]
    assert observed.guard.snapshot() == ref_guard.guard.snapshot()
    assert observed.violations == []


@pytest.mark.parametrize(
    "data",
    [
        '{"jsonrpc":"2.0","method":"notifications/progress","params":{"a":1},"\\u0069d":7}',
        '{"jsonrpc":"2.0","method":"notifications/progress","params":{"a":1},"id":7}',
        '{"jsonrpc":"2.0","method":"notifications/progress","params":{"a":{"b":1},"id":7}}',
        '{"jsonrpc":"2.0","method":"notifications/progress","params":{"a":1},"params":[1]}',
        '{"jsonrpc":"2.0","method":"notifications/progress","params":{"a":1},"method":"x"}',
        '{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}',
        '{"jsonrpc":"2.0","method":"notifications/pro\\u0067ress","params":{}}',
        '{"jsonrpc":"2.0","method":"","params":{}}',
        '{"jsonrpc":"2.0", "method":"notifications/progress","params":{}}',
        # the mcp 1.x server's key order, "jsonrpc" last: the same refusals
        '{"method":"notifications/progress","params":{"a":1},"id":7,"jsonrpc":"2.0"}',
        '{"method":"notifications/progress","params":{"a":{"b":1}},"jsonrpc":"2.0"}',
        '{"method":"notifications/cancelled","params":{"requestId":1},"jsonrpc":"2.0"}',
        '{"method":"notifications/progress","params":{},"jsonrpc":"1.0"}',
        '{"method":"notifications/progress","params":{}}',
        '{"method":"notifications/progress","params":{},"jsonrpc":"2.0","method":"x"}',
        '{"method":"","params":{},"jsonrpc":"2.0"}',
    ],
)
def test_the_hot_path_leaves_anything_doubtful_to_the_parser(data: str) -> None:
    chunk = _event("e1", data)
    assert sse.hot_event(chunk, 0) is None
    if "\\" in data or '"id"' in data or data.count('"params"') > 1:
        assert sse.plain_notification(data) is None


def test_the_hot_path_reads_id_and_method_as_the_parser_does() -> None:
    for chunk in (
        _event("e1", _progress(1)),
        _event("e1", _progress(1), crlf=False),
        b'id:e1\ndata:{"jsonrpc":"2.0","method":"notifications/progress"}\n\n',
        b'data: {"jsonrpc":"2.0","method":"notifications/progress","params":{}}\r\n\r\n',
        # the mcp 1.x server's key order
        b'id: ev4\r\nevent: message\r\ndata: {"method":"notifications/progress",'
        b'"params":{"progressToken":1,"progress":1.0,"total":20.0},"jsonrpc":"2.0"}\r\n\r\n',
        b'data: {"method":"notifications/message","jsonrpc":"2.0"}\n\n',
    ):
        hot = sse.hot_event(chunk, 0)
        assert hot is not None, chunk
        (frame,) = sse.SseParser().feed(chunk)
        assert hot == (len(chunk), frame.event_id)
        assert is_plain_notification(json.loads(frame.data))
    assert sse.hot_event(b"id: e1\r\ndata: {}\r\n\r", 0) is None
    assert sse.hot_event(_event("e\0", _progress(1)), 0) is None


async def test_a_large_event_hands_the_event_loop_back_between_its_steps() -> None:
    """Another task runs while one large event is parsed, decoded and passed on: its
    decoding is a step of its own with a checkpoint before and after, and it is passed on
    in the pieces it was read in, not one block of the loop that every other stream (and,
    in the gateway, every other session) shares."""
    text = "x" * (2 * LARGE_EVENT)
    result = {"jsonrpc": "2.0", "id": ORIGIN, "result": {"content": [{"text": text}]}}
    wire = _event("e1", result)
    chunks = [wire[i : i + 65536] for i in range(0, len(wire), 65536)]
    observed = ObservedGuard(Guard(clock=lambda: 0.0))
    async with anyio.create_task_group() as tg:
        engine = _engine(observed, tg)
        body = engine.bound.body(engine, STREAM, ORIGIN, None, _Response.__new__(_Response), Tee())
        parser = sse.SseParser()
        for chunk in chunks[:-1]:
            assert await body._pass_on(parser, chunk) == []
        turns = await _turns(tg)
        before = len(turns)
        out = await body._pass_on(parser, chunks[-1])
        assert len(turns) - before >= 2  # before and after decoding it
        engine.close()
        tg.cancel_scope.cancel()
    assert b"".join(out) == wire.replace(b"\r\n", b"\n")
    assert len(out) >= len(chunks)  # passed on in the pieces it came in, not one copy
    assert observed.guard.stream_state(STREAM) == "done"


async def test_each_live_answer_keeps_its_own_credentials() -> None:
    """A session remembering little of its past (``remembered=2``) with 5 prompts open at
    once: each answer's submission still carries the credentials of that answer's POST,
    never those of another request (the gateway adds no authority)."""
    observed = ObservedGuard(Guard(clock=lambda: 0.0))
    async with anyio.create_task_group() as tg:
        engine = _engine(observed, tg, remembered=2)
        engine.carried, engine.acts_for_clients = ("authorization",), True  # as a gateway's
        keys = []
        for rid in range(10, 15):
            engine.feed(ev.SseEvent(STREAM, {**ELICIT, "id": rid}, f"e{rid}"))
            keys.append((SESSION, rid))
        assert all(observed.guard.state_of(k) == "presented" for k in keys)
        for key in keys:
            post = httpx2.Request("POST", "http://127.0.0.1:9/mcp",
                                  headers={"authorization": f"Bearer t{key[1]}"})  # fmt: skip
            engine.act_for_answer(key, post)
        got = [engine.acting_for(key)[0]["authorization"] for key in keys]
        engine.close()
        tg.cancel_scope.cancel()
    assert got == [f"Bearer t{rid}" for rid in range(10, 15)]


async def test_a_stream_read_from_a_full_buffer_hands_the_loop_over() -> None:
    """Reads of buffered data return without suspending: a stream arriving faster than it
    is passed on would hold the event loop until its buffer ran dry. The body hands the
    loop over every ``YIELD_EVERY`` bytes it reads, so another task runs meanwhile."""
    event = _event(None, _progress(1))
    per_chunk = max(1, 16384 // len(event))
    chunks = [event * per_chunk] * (8 * YIELD_EVERY // (len(event) * per_chunk))
    chunks.append(_event("e9", {"jsonrpc": "2.0", "id": ORIGIN, "result": {}}, crlf=False))
    observed = ObservedGuard(Guard(clock=lambda: 0.0))
    async with anyio.create_task_group() as tg:
        engine = _engine(observed, tg)
        body = engine.bound.body(engine, STREAM, ORIGIN, None, _Response(chunks), Tee())
        turns = await _turns(tg)
        before = len(turns)
        read = sum([len(piece) async for piece in body])
        during = len(turns) - before
        engine.close()
        tg.cancel_scope.cancel()
    assert read == sum(map(len, chunks))
    assert during >= 4  # one turn per YIELD_EVERY bytes read (8 of them), at least half
