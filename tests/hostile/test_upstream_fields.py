"""An upstream's ``retry:`` and ``id:`` fields through a real gateway replica on loopback
(a scripted upstream that writes the bytes as given): whatever they hold, the call ends
with exactly one outcome (its result, or one ending JSON-RPC error), no task dies, no
wait is endless and no over-long id is kept as a cursor.

Each case, and the bound it holds:

* a ``retry:`` of 30, 400 or 5,000 digits, then a cut: the wait before the resume is
  capped at the guard's ``max_server_wait_s`` and the call gets its result; 5,000 digits
  and no cut: the call is passed on;
* an event id no ``Last-Event-ID`` header can carry (not UTF-8, non-ASCII, a control
  character, ``DEL``, longer than ``MAX_EVENT_ID``), then a cut: the resume names the last
  usable id; with none, no resume is sent and the call ends with one ``no-cursor`` error;
* a server request whose id is not UTF-8 is blanked, and the stream goes on;
* a call's last event with a 1 MB id reaches the client, but neither the guard nor the
  store (which keeps a stream's cursor for an hour) holds that id, and no id the gateway
  issues embeds it;
* a client that lost its connection after an unusable id resumes with the last id it was
  given and gets the result;
* a stored cursor no header can carry: each resume that cannot be sent counts as a refusal,
  and the stream's resume budget ends the call with one error."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import anyio
import pytest

pytest.importorskip("uvicorn")
httpx2 = pytest.importorskip("httpx2")

from fsm.adapters._transport.sse import MAX_EVENT_ID  # noqa: E402
from fsm.gateway.app import GATEWAY_GUARD  # noqa: E402
from fsm.gateway.ids import EventIdKeys, IdRewriter  # noqa: E402
from fsm.gateway.store import MemoryStore  # noqa: E402
from tests.gateway import scripted_upstream as scripted  # noqa: E402

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

CONFIG = replace(GATEWAY_GUARD, backoff_initial_s=0.01, backoff_max_s=0.02, max_server_wait_s=0.05)
"""The gateway's policy with short waits: a server's ``retry:`` counts up to 50 ms."""


def raw_event(event_id: bytes, data: Any = scripted.PROGRESS, retry: bytes | None = None) -> bytes:
    head = b"id: " + event_id + b"\n"
    if retry is not None:
        head += b"retry: " + retry + b"\n"
    return head + b"data: " + json.dumps(data).encode() + b"\n\n"


async def call(url: str) -> list[tuple[str | None, str]]:
    """Initialize, then POST a tools/call (id 7) and read its SSE body to the end."""
    async with httpx2.AsyncClient(timeout=scripted.GUARD) as http:
        await scripted.initialize(http, url)
        with anyio.fail_after(scripted.GUARD):  # only against a hang: an endless wait
            async with http.stream(
                "POST",
                url,
                json=scripted.CALL,
                headers={**scripted.HEAD, "mcp-session-id": scripted.SID},
            ) as resp:
                assert resp.status_code == 200
                return scripted.parse(b"".join([c async for c in resp.aiter_raw()]))


def outcomes(events: list[tuple[str | None, str]]) -> list[dict[str, Any]]:
    """The messages for request 7 (its result or its ending error), in order."""
    out = []
    for _, data in events:
        try:
            msg = json.loads(data)
        except ValueError:
            continue
        if isinstance(msg, dict) and msg.get("id") == 7 and "method" not in msg:
            out.append(msg)
    return out


async def run_call(up: scripted.Upstream) -> tuple[list[dict[str, Any]], str | None]:
    """A call (id 7) through a gateway replica on ``up``: its outcomes (its result or its
    ending error) and the state of its stream in the session's guard after."""
    async with scripted.gateway_for(up, config=CONFIG) as gw:
        events = await call(gw.url)
        guard = gw.gateway.session_guard(scripted.SID)
        state = guard.guard.stream_state("post:7") if guard is not None else None
    return outcomes(events), state


@pytest.mark.parametrize("digits", [30, 400, 5000])
async def test_a_huge_retry_then_a_cut_resumes_after_the_capped_wait(digits: int) -> None:
    """``retry: 1000...0`` (``digits`` zeros), then the connection is cut: the stream
    resumes after ``max_server_wait_s`` and the call gets its result."""
    up = scripted.Upstream(
        call=[raw_event(b"e1", retry=b"1" + b"0" * digits)],
        complete=False,
        replay=lambda cursor: [scripted.sse("e2", scripted.result(7))],
    )
    assert await run_call(up) == ([scripted.result(7)], "done")
    assert up.resumes() == ["e1"]


async def test_a_retry_of_5000_digits_without_a_cut_passes_the_call_on() -> None:
    up = scripted.Upstream(
        call=[raw_event(b"e1", retry=b"1" * 5000), scripted.sse("e2", scripted.result(7))]
    )
    assert (await run_call(up))[0] == [scripted.result(7)]


BAD_IDS = {
    "not-utf8": b"\xff\xfe",
    "non-ascii": "é".encode(),
    "control": b"\x01",
    "del": b"\x7f",
    "too-long": b"x" * (MAX_EVENT_ID + 1),
}


@pytest.mark.parametrize("bad", BAD_IDS.values(), ids=BAD_IDS.keys())
async def test_an_unusable_id_then_a_cut_resumes_from_the_last_usable_one(bad: bytes) -> None:
    """A usable ``e1``, then an event whose id no ``Last-Event-ID`` header can carry, then
    a cut: the resume names ``e1`` and the call gets its one result."""
    up = scripted.Upstream(
        call=[scripted.sse("e1", scripted.PROGRESS), raw_event(bad)],
        complete=False,
        replay=lambda cursor: [scripted.sse("e3", scripted.result(7))],
    )
    assert await run_call(up) == ([scripted.result(7)], "done")
    assert up.resumes() == ["e1"]


@pytest.mark.parametrize("bad", BAD_IDS.values(), ids=BAD_IDS.keys())
async def test_only_unusable_ids_then_a_cut_end_the_call_with_one_error(bad: bytes) -> None:
    """No usable id before the cut: nothing to resume from, so no resume is sent and the
    call ends with one JSON-RPC error (``no-cursor``); the stream is ended in the guard."""
    up = scripted.Upstream(call=[raw_event(bad)], complete=False)
    [err], state = await run_call(up)
    assert (err["error"]["data"]["reason"], state) == ("no-cursor", "dead")
    assert up.resumes() == []


async def test_a_blanked_event_with_an_id_that_is_not_utf8_does_not_end_the_stream() -> None:
    """A server request with an id that is not UTF-8 (the event is malformed, so it is
    blanked): the stream goes on to its result."""
    ask = {"jsonrpc": "2.0", "id": 1, "method": "elicitation/create", "params": {}}
    up = scripted.Upstream(
        call=[raw_event(b"\xff\xfe", ask), scripted.sse("e2", scripted.result(7))]
    )
    assert (await run_call(up))[0] == [scripted.result(7)]


async def test_an_over_long_final_id_is_not_kept_as_the_streams_cursor() -> None:
    """The call's result carries a 1 MB id: it reaches the client, but neither the guard
    (the ended stream's cursor) nor the store (the cursor it keeps for an hour) holds it."""
    saved = anyio.Event()

    class Noting(MemoryStore):
        async def save_cursor(self, session: str, stream: str, cursor: Any) -> None:
            await super().save_cursor(session, stream, cursor)
            saved.set()

    store = Noting()
    big = b"x" * (1 << 20)
    up = scripted.Upstream(
        call=[scripted.sse("e1", scripted.PROGRESS), raw_event(big, scripted.result(7))]
    )
    async with scripted.gateway_for(up, config=CONFIG, store=store) as gw:
        events = await call(gw.url)
        guard = gw.gateway.session_guard(scripted.SID)
        assert guard is not None
        assert guard.guard.cursor("post:7") == "e1"
        with anyio.fail_after(scripted.GUARD):  # written in the background once the call ended
            await saved.wait()
        cursor = await store.cursor_of(scripted.SID, "post:7")
    assert outcomes(events) == [scripted.result(7)]
    first, again = (eid for eid, _ in events)
    assert first is not None and again == first  # e1's id, issued again
    assert cursor is not None and (cursor.position, cursor.event_id) == (1, "e1")


def test_a_gateway_never_issues_or_keeps_an_over_long_upstream_id() -> None:
    """An over-long upstream id is neither embedded in an id the client gets (the last
    usable event's id is issued again) nor counted, nor ``last`` (what the store keeps as
    the stream's cursor): ``position`` and ``last`` name the id the client holds."""
    ids = IdRewriter("post:7", "s1", EventIdKeys.generate())
    first = ids.rewrite(raw_event(b"e1")).split(b"\n")[0]
    out = ids.rewrite(raw_event(b"x" * (1 << 20)))
    assert out.split(b"\n")[0] == first and len(out) < 1000
    assert (ids.position, ids.last) == (1, "e1")
    ids.rewrite(raw_event(b"z" * MAX_EVENT_ID))
    assert (ids.position, ids.last) == (2, "z" * MAX_EVENT_ID)


RESUMED_BAD_IDS = {**BAD_IDS, "tab": b"a\tb", "trailing-space": b"abc ", "leading-space": b" abc"}


@pytest.mark.parametrize("bad", RESUMED_BAD_IDS.values(), ids=RESUMED_BAD_IDS.keys())
async def test_a_client_resumes_from_the_id_it_was_given_for_an_unusable_one(bad: bytes) -> None:
    """A usable ``e1``, an event whose upstream id is not usable, then a cut: the guard
    resumes from ``e1``. A client whose connection was lost after that event resumes
    with the last id it was given (``e1``'s, issued again: never one that embeds the
    unusable id, which a client could not send back as it came: a tab is refused as
    ``last-event-id must be visible ASCII``, a trailing space is stripped in transit), and
    gets the call's result."""
    up = scripted.Upstream(
        call=[scripted.sse("e1", scripted.PROGRESS), raw_event(bad)],
        complete=False,
        replay=lambda cursor: [scripted.sse("e3", scripted.result(7))],
    )
    async with scripted.gateway_for(up, config=CONFIG) as gw:
        events = await call(gw.url)
        assert outcomes(events) == [scripted.result(7)] and up.resumes() == ["e1"]
        given = [eid for eid, _ in events[:-1]]  # what the client had before the result
        assert given[0] is not None and set(given) == {given[0]}  # e1's id (again)
        headers = {
            **scripted.HEAD,
            "mcp-session-id": scripted.SID,
            "last-event-id": given[-1].encode(),
        }
        async with httpx2.AsyncClient(timeout=scripted.GUARD) as http:
            with anyio.fail_after(scripted.GUARD):
                r = await http.get(gw.url, headers=headers)
    assert r.status_code == 200, r.text
    assert outcomes(scripted.parse(r.content)) == [scripted.result(7)]


async def test_a_resume_get_that_cannot_be_sent_ends_the_call_with_one_error() -> None:
    """Last line of defence: a cursor no header can carry reached the guard anyway (here
    the store's cursor of the stream, as another replica recorded an upstream id that is
    not UTF-8: ``e\\ufffd1``). Building or sending the resume GET raises; each such
    attempt is fed to the guard as a refusal with no response, so the stream's budget
    ends it with one JSON-RPC error, not a task that dies mid-stream."""
    from fsm.gateway.store import Cursor

    keys = EventIdKeys.generate()
    store = MemoryStore()
    await store.save_cursor(scripted.SID, "post:7", Cursor(5, "e\ufffd1"))
    up = scripted.Upstream(replay=lambda cursor: [scripted.sse("e9", scripted.result(7))])
    cursor = IdRewriter("post:7", scripted.SID, keys).rewrite(b"id: e1\n").decode().split()[-1]
    async with (
        scripted.gateway_for(up, config=CONFIG, store=store, id_keys=keys) as gw,
        httpx2.AsyncClient(timeout=scripted.GUARD) as http,
    ):
        await scripted.initialize(http, gw.url)
        h = {**scripted.HEAD, "mcp-session-id": scripted.SID, "last-event-id": cursor}
        with anyio.fail_after(scripted.GUARD):
            async with http.stream("GET", gw.url, headers=h) as r:
                events = scripted.parse(b"".join([c async for c in r.aiter_raw()]))
        guard = gw.gateway.session_guard(scripted.SID)
        assert guard is not None and guard.guard.stream_state("post:7") == "dead"
    [err] = outcomes(events)
    assert err["error"]["data"]["reason"] == "resume-budget-spent"
    assert up.resumes() == []
