"""A client's resume that lands on a replica which already knows its stream goes on
upstream from the newest event the gateway can prove was passed on: the replica's own
cursor, the position the client's signed ``Last-Event-ID`` proves if it is newer (another
replica carried the stream since: a balancer without affinity moved the client), and the
store's cursor if newer still. Positions never go back, so no event reaches the client
twice under the id it already had, and a stale id moves no cursor back.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import anyio
import httpx2
import pytest

from fsm.gateway.app import GatewayLimits
from fsm.gateway.store import Cursor, MemoryStore
from support.gateway import RunningGateway
from tests.gateway import scripted_upstream as scripted

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

STEP = 5.0
"""Safety bound of one wait: it only elapses when the awaited thing never comes."""

GET = {"accept": "text/event-stream", "mcp-session-id": scripted.SID}
"""The headers of the client's resume ``GET`` (its ``Last-Event-ID`` added)."""


def progress(n: int) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progress": n}}


@contextlib.asynccontextmanager
async def two_replicas(
    up: scripted.Upstream, store: MemoryStore
) -> AsyncIterator[tuple[RunningGateway, RunningGateway, Any]]:
    """``up`` on loopback behind two replicas sharing ``store`` and their keys (nothing
    opened ahead), and an HTTP client; the session :data:`scripted.SID` begun on the
    first replica."""
    limits = GatewayLimits(standalone_hold_s=0)
    async with (
        scripted.two_replicas_for(up, store=store, limits=limits) as (r1, r2),
        httpx2.AsyncClient(timeout=STEP * 2) as http,
    ):
        await scripted.initialize(http, r1.url)
        yield r1, r2, http


async def call_or_resume_until(
    http: Any, url: str, last_event_id: str | None, word: bytes
) -> bytes:
    """What the client reads of the call (``POST``, when ``last_event_id`` is ``None``)
    or of its resume ``GET`` up to ``word``; then its connection is closed."""
    if last_event_id is None:
        method, body = "POST", scripted.CALL
        headers = {**scripted.HEAD, "mcp-session-id": scripted.SID}
    else:
        method, body, headers = "GET", None, {**GET, "last-event-id": last_event_id}
    async with http.stream(method, url, json=body, headers=headers) as r:
        return await scripted.read_until(r.aiter_raw(), word)


def last_id(raw: bytes) -> str:
    """The id of the last event of ``raw`` that has one (what the client resumes from)."""
    ids = [eid for eid, _ in scripted.parse(raw) if eid]
    assert ids, raw
    return ids[-1]


async def test_a_resume_back_on_the_first_replica_goes_on_from_the_clients_newer_event() -> None:
    """The call's stream goes R1 (e1) -> R2 (e2) -> R1. Back on R1, which knows the
    stream only up to e1, the resume goes upstream from e2, the newer event the client's
    signed id proves (R2 passed it on): the client never gets e2 again, under the id it
    already had, and gets e3."""
    never = anyio.Event()
    up = scripted.Upstream(call=[scripted.sse("e1", progress(1)), never])
    later = {
        "e1": [scripted.sse("e2", progress(2)), never],
        "e2": [scripted.sse("e3", progress(3))],
    }
    up.replay = lambda cursor: later.get(cursor, [])
    async with two_replicas(up, MemoryStore()) as (r1, r2, http):
        id1 = last_id(await call_or_resume_until(http, r1.url, None, b'"progress": 1'))
        id2 = last_id(await call_or_resume_until(http, r2.url, id1, b'"progress": 2'))
        got3 = await call_or_resume_until(http, r1.url, id2, b'"progress"')
    again = [eid for eid, data in scripted.parse(got3) if '"progress": 2' in data]
    assert again == [], "the client got e2 a second time, under the id it had"
    assert [data for _, data in scripted.parse(got3) if data] == [
        '{"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progress": 3}}'
    ]
    assert up.resumes() == ["e1", "e2"], "R1 resumed from its own older cursor"


async def test_a_stale_id_back_on_the_first_replica_goes_on_from_the_stores_newer_cursor() -> None:
    """The call's stream goes R1 (e1) -> R2 (e2, then e3: a prompt, claimed by R2) ->
    R1, where the client resumes from e2 (a stale cursor, as the mcp SDKs may send; newer
    than R1's e1). R1 goes on from e3, the store's cursor, as a replica that never saw
    the stream would: the prompt R2 presented is not replayed through R1."""
    never = anyio.Event()
    up = scripted.Upstream(call=[scripted.sse("e1", progress(1)), never])
    later = {
        "e1": [
            scripted.sse("e2", progress(2)),
            scripted.sse("e3", scripted.elicit(1)),
            never,
        ],
        "e2": [scripted.sse("e3", scripted.elicit(1)), scripted.sse("e4", progress(4))],
        "e3": [scripted.sse("e4", progress(4))],
    }
    up.replay = lambda cursor: later.get(cursor, [])
    store = MemoryStore()
    async with two_replicas(up, store) as (r1, r2, http):
        id1 = last_id(await call_or_resume_until(http, r1.url, None, b'"progress": 1'))
        got2 = await call_or_resume_until(http, r2.url, id1, b"elicitation/create")
        id2 = next(eid for eid, data in scripted.parse(got2) if '"progress": 2' in data)
        assert id2 is not None
        with anyio.fail_after(STEP):  # R2 records e3, passed on, when its client leaves
            while await store.cursor_of(scripted.SID, "post:7") != Cursor(3, "e3"):
                await anyio.sleep(0.01)
        got3 = await call_or_resume_until(http, r1.url, id2, b'"progress"')
    assert b"elicitation/create" not in got3, "R2's prompt came again through R1"
    assert up.resumes() == ["e1", "e3"], "R1 resumed from its own older cursor"
