"""The two ends of an upstream event stream: a final event ended by a bare CR just before
a clean end (:meth:`SseParser.finish`), and a byte order mark before the first event
(:meth:`SseParser.begin`), in the parser and through a gateway on real loopback HTTP."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest

from fsm.adapters._transport.sse import SseFrame, SseParser
from fsm.gateway.ids import EventIdKeys, parse_event_id

pytest.importorskip("uvicorn")
httpx2 = pytest.importorskip("httpx2")

from tests.gateway import gateway_client as client  # noqa: E402
from tests.gateway import scripted_upstream as scripted  # noqa: E402

BOM = b"\xef\xbb\xbf"
"""A UTF-8 byte order mark (U+FEFF)."""
EVENT = b"id: e1\rdata: x\r\r"
"""One event, its lines ended by bare CRs."""


def _ids(frames: list[SseFrame]) -> list[str | None]:
    return [f.event_id for f in frames]


# ------------------------------------------------------------------ the parser


def test_a_cr_held_at_the_end_is_a_line_end_when_the_stream_finishes() -> None:
    parser = SseParser()
    assert parser.feed(EVENT) == []  # the last CR may be the first half of a CRLF
    assert parser.pending
    (frame,) = parser.finish()
    assert (frame.event_id, frame.data, frame.raw) == ("e1", "x", b"id: e1\ndata: x\n\n")
    assert not parser.pending


@pytest.mark.parametrize("cut", range(len(EVENT) + 1))
def test_a_stream_of_bare_crs_reads_alike_however_cut_once_finished(cut: int) -> None:
    parser = SseParser()
    frames = parser.feed(EVENT[:cut]) + parser.feed(EVENT[cut:]) + parser.finish()
    assert _ids(frames) == ["e1"]


def test_finish_completes_nothing_but_a_held_cr() -> None:
    parser = SseParser()
    assert parser.feed(b"id: e1\ndata: x\n\n") != []
    assert parser.finish() == []  # nothing held
    unended = SseParser()
    assert unended.feed(b"id: e1\ndata: x\n") == []
    assert unended.finish() == []  # no blank line: the event is dropped (WHATWG)
    line = SseParser()
    assert line.feed(b"id: e1\ndata: x\r") == []
    assert line.finish() == []  # the CR ends a line, not the event


STREAM = b"id: e1\ndata: x\n\n"


@pytest.mark.parametrize("cut", range(len(BOM) + 2))
def test_a_leading_byte_order_mark_split_across_reads_is_dropped(cut: int) -> None:
    wire = BOM + STREAM
    parser = SseParser()
    first = parser.feed(wire[:cut])
    assert first == [] and parser.starting == (cut < len(BOM))  # a part of it held
    (frame,) = parser.feed(wire[cut:])
    assert (frame.event_id, frame.raw) == ("e1", STREAM)


def test_a_byte_order_mark_a_byte_at_a_time_is_dropped() -> None:
    parser = SseParser()
    frames = [f for byte in BOM + STREAM for f in parser.feed(bytes([byte]))]
    assert _ids(frames) == ["e1"]


def test_a_byte_order_mark_not_at_the_start_is_data() -> None:
    parser = SseParser()  # only one mark, only at the very start, is dropped
    assert _ids(parser.feed(BOM + STREAM)) == ["e1"]
    (later,) = parser.feed(BOM + b"id: e2\ndata: y\n\n")  # an event boundary, not the start
    assert later.event_id is None and later.raw.startswith(BOM)  # a field named \ufeffid
    twice = SseParser().feed(BOM + BOM + STREAM)
    assert _ids(twice) == [None]
    inside = SseParser().feed(b"data: " + BOM + b"x\n\n")
    assert _ids(inside) == [None] and inside[0].data_bytes == BOM + b"x"


def test_the_start_of_a_mark_that_is_not_one_is_given_back() -> None:
    parser = SseParser()
    assert parser.begin(b"\xef") == b"" and parser.starting
    assert parser.begin(b"\xbbX") == b"\xef\xbbX" and not parser.starting
    assert parser.begin(BOM) == BOM  # the start is decided: a later mark is data
    fed = SseParser()
    assert fed.feed(b"\xef\xbb") == []
    (frame,) = fed.feed(b"\xbedata: x\n\n")  # not a mark: a field of its own name
    assert frame.raw == b"\xef\xbb\xbedata: x\n\n" and not frame.has_data


# ---------------------------------------------------- through a gateway (loopback)


async def _call(up: scripted.Upstream) -> tuple[bytes, EventIdKeys]:
    """The raw body of :data:`CALL` through a gateway in front of ``up``, and the
    gateway's event-id keys."""
    async with scripted.gateway_for(up) as gw, httpx2.AsyncClient(timeout=scripted.GUARD) as http:
        await http.post(gw.url, json=scripted.INIT, headers=scripted.HEAD)
        headers = {**scripted.HEAD, "mcp-session-id": scripted.SID}
        async with http.stream("POST", gw.url, json=scripted.CALL, headers=headers) as r:
            body = b"".join([c async for c in r.aiter_raw()])
        return body, gw.gateway.id_keys


def _issued(event_id: str | None, keys: EventIdKeys) -> str | None:
    """The upstream id a gateway id names (``None``: not one the gateway issued)."""
    got = parse_event_id(event_id or "", scripted.SID, keys)
    return None if got is None else got.upstream_id


@pytest.mark.anyio
@pytest.mark.timeout(60)
async def test_a_final_event_ended_by_a_bare_cr_is_passed_on() -> None:
    """The call's result, its lines ended by bare CRs, the last CR the last byte before
    a clean end: passed on (its id rewritten), not lost to a ``no-cursor`` error."""
    progress = b"id: e0\rdata: " + json.dumps(scripted.PROGRESS).encode() + b"\r\r"
    final = b"id: e1\rdata: " + json.dumps(scripted.result(7)).encode() + b"\r\r"
    up = scripted.Upstream(call=[progress + final])
    body, keys = await _call(up)
    text = body.replace(b"\r\n", b"\n").replace(b"\r", b"\n")  # as a WHATWG reader does
    events = [(eid, json.loads(data)) for eid, data in scripted.parse(text) if data]
    assert [m for _, m in events] == [scripted.PROGRESS, scripted.result(7)]
    assert [_issued(eid, keys) for eid, _ in events] == ["e0", "e1"]


@pytest.mark.anyio
@pytest.mark.timeout(60)
@pytest.mark.parametrize("split", [False, True], ids=["whole", "split"])
async def test_a_leading_byte_order_mark_does_not_hide_the_first_event_id(split: bool) -> None:
    """A mark before the first event, and one before the resumed connection's: the
    guard reads ``e1`` and resumes from it; the client gets every id signed and no mark
    (a resume's connection is spliced into its stream, where a reader keeps one)."""
    first = BOM + scripted.sse("e1", scripted.PROGRESS)
    call: list[bytes] = [first[:2], first[2:]] if split else [first]  # the mark cut, or not
    up = scripted.Upstream(call=list(call), complete=False)
    up.replay = lambda cursor: (
        [BOM + scripted.sse("e2", scripted.result(7))] if cursor == "e1" else []
    )
    body, keys = await _call(up)
    assert BOM not in body
    events = [(eid, json.loads(data)) for eid, data in scripted.parse(body) if data]
    assert [m for _, m in events] == [scripted.PROGRESS, scripted.result(7)]
    assert [_issued(eid, keys) for eid, _ in events] == ["e1", "e2"]
    assert [m for m, _, _ in up.requests if m == "GET"] == ["GET"]


def whatwg_events(raw: bytes) -> list[tuple[str | None, str]]:
    """The events of an SSE body as a WHATWG reader reads it (the TypeScript SDK's
    eventsource-parser, a browser's EventSource): one byte order mark at the very start of
    the stream dropped, line ends normalised, then read as :func:`parse` reads."""
    if raw.startswith(BOM):
        raw = raw[len(BOM) :]
    return scripted.parse(raw.replace(b"\r\n", b"\n").replace(b"\r", b"\n"))


@pytest.mark.anyio
@pytest.mark.parametrize(
    "first",
    [
        BOM + BOM + scripted.sse("e1", scripted.PROGRESS),
        # a malformed first event (not UTF-8, no id: the guard passes nothing of it),
        # then one whose line starts with a mark that is data: the client's first bytes
        b"data: \xff\n\n" + BOM + scripted.sse("e1", scripted.PROGRESS),
    ],
    ids=["two-marks", "mark-after-a-dropped-event"],
)
async def test_a_byte_order_mark_first_in_the_clients_stream_passes_no_unsigned_id(
    first: bytes,
) -> None:
    """A mark the guard read as data (a second one, or one after an event nothing of
    which was passed on) is never the first bytes of the client's stream, where a WHATWG
    reader drops it and reads the line after it: the client reads that line as the
    guard did (``\\ufeffid``: no id), never the server's own id unsigned (a resume from
    it refused as not issued by the gateway) nor a ``data:`` line the guard never saw."""
    up = scripted.Upstream(call=[first, scripted.sse("e2", scripted.result(7))])
    async with scripted.gateway_for(up) as gw, httpx2.AsyncClient(timeout=scripted.GUARD) as http:
        await http.post(gw.url, json=scripted.INIT, headers=scripted.HEAD)
        headers = {**scripted.HEAD, "mcp-session-id": scripted.SID}
        with anyio.fail_after(scripted.GUARD):
            async with http.stream("POST", gw.url, json=scripted.CALL, headers=headers) as r:
                body = b"".join([c async for c in r.aiter_raw()])
        keys = gw.gateway.id_keys
    ids = [eid for eid, _ in whatwg_events(body) if eid]
    unsigned = [eid for eid in ids if parse_event_id(eid, scripted.SID, keys) is None]
    assert unsigned == [], (unsigned, body[:120])


@pytest.mark.anyio
async def test_a_kept_result_never_begins_a_resume_with_a_mark_the_guard_read_as_data() -> None:
    """Call 1's stream: a progress event ``p1``, then its result, whose first line begins
    with a byte order mark (``\\ufeffid: up-raw``): the guard, and a client reading the
    stream, read that line as a field named ``\\ufeffid`` (ignored). A client that lost
    the result resumes once the guard forgot the stream: the gateway answers from the
    result the session kept (``_ended_here``), and that body too never begins with the
    mark (an empty comment line first), so the client reads the line as the guard did,
    never ``id: up-raw``, the upstream's id unsigned."""
    real = scripted.result(1)
    progress = {"jsonrpc": "2.0", "method": "notifications/progress", "params": {}}

    def script(msg: Any, headers: Any) -> list[bytes]:
        if msg["id"] == 1:
            body = BOM + b"id: up-raw\ndata: " + json.dumps(real).encode() + b"\n\n"
            return [scripted.sse("p1", progress), body]
        return [scripted.sse(f"e{msg['id']}", scripted.result(msg["id"]))]

    up = scripted.Upstream(script=script)
    async with scripted.gateway_for(up) as gw, client.unlimited() as http:
        sid = await client.begin(http, gw.url)
        first = await client.call(http, gw.url, sid, 1)
        got = whatwg_events(first.raw)
        assert [json.loads(d) for _, d in got] == [progress, real]
        p1 = got[0][0]
        assert p1 is not None and got[1][0] is None  # the marked line is no id
        for rid in range(2, 12):  # the guard forgets the stream; the session keeps it
            await client.call(http, gw.url, sid, rid)
        h = {**scripted.HEAD, "mcp-session-id": sid, "last-event-id": p1}
        again = await client.read(http, "GET", gw.url, h)
    assert again.status == 200
    replayed = whatwg_events(again.raw)
    assert [json.loads(d) for _, d in replayed] == [real]
    assert "up-raw" not in [i for i, _ in replayed], again.raw[:80]
