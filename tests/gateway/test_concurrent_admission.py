"""Requests of session ids not held here that arrive together, while the store's answer
to each is on the wire (Redis): ``Gateway._session_for`` looks again after that wait, so
no burst of ids passes ``max_unaccepted``, the held table stays within its documented
bound, and the requests of one id share one session. :class:`SlowStore` stands for the
round trip with explicit control: its first ``n`` ``session_ended`` calls wait until all
``n`` are waiting (as ``n`` requests whose Redis answers are on the wire), then all go
on; later calls answer at once."""

from __future__ import annotations

import json
from typing import Any

import anyio
import httpx2
import pytest

from fsm.gateway.app import GatewayLimits
from fsm.gateway.store import MemoryStore
from tests.gateway import scripted_upstream as scripted

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

STEP = 5.0


class SlowStore(MemoryStore):
    """A memory store whose first ``n`` ``session_ended`` calls are all on the wire at once
    (each waits until ``n`` are waiting), as ``n`` concurrent Redis round trips are."""

    def __init__(self, n: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.n = n
        self.waiting = 0
        self.all_in = anyio.Event()

    async def session_ended(self, session: str) -> str | None:
        if not self.all_in.is_set():
            self.waiting += 1
            if self.waiting >= self.n:
                self.all_in.set()
            await self.all_in.wait()
        return await super().session_ended(session)


def _head(sid: str) -> dict[str, str]:
    return {**scripted.HEAD, "mcp-session-id": sid}


async def test_concurrent_ids_not_held_stay_within_max_unaccepted() -> None:
    """``max_unaccepted`` 2; six requests naming six made-up session ids arrive together
    (their store look-ups on the wire at once). At most two may be in flight unaccepted:
    the other four get ``503`` before they go upstream."""
    n = 6
    up = scripted.Upstream(refuse_unknown=True)
    limits = GatewayLimits(max_unaccepted=2, standalone_hold_s=0)
    store = SlowStore(n)
    ping = {"jsonrpc": "2.0", "id": "b", "method": "ping"}
    async with (
        scripted.gateway_for(up, limits=limits, store=store) as gw,
        httpx2.AsyncClient(timeout=STEP * 2) as http,
    ):
        statuses: list[int] = []

        async def one(k: int) -> None:
            r = await http.post(gw.url, json=ping, headers=_head(f"made-up-{k}"))
            statuses.append(r.status_code)

        with anyio.fail_after(STEP * 2):
            async with anyio.create_task_group() as tg:
                for k in range(n):
                    tg.start_soon(one, k)
        reached = sum(
            1 for m, h, _ in up.requests if h.get("mcp-session-id", "").startswith("made-up")
        )
    assert sorted(statuses).count(503) >= n - 2, statuses
    assert reached <= 2, f"{reached} unaccepted session ids in flight at once, max_unaccepted 2"


async def test_held_sessions_stay_within_the_documented_bound() -> None:
    """``max_sessions`` 1, ``max_unaccepted`` 1, no ``initialize`` in flight. Five calls
    naming five session ids another replica began (the upstream accepts each) arrive
    together; their streams stay open. The documented bound: held sessions number at
    most ``max_sessions`` plus the sessions not yet accepted in flight when the last one
    was let in (at most ``max_unaccepted`` naming an id, plus ``initialize``\\ s) = 2."""
    n = 5
    hold = anyio.Event()
    up = scripted.Upstream(call=[scripted.sse("e1", scripted.PROGRESS)], hold=hold)
    limits = GatewayLimits(max_sessions=1, max_unaccepted=1, standalone_hold_s=0)
    store = SlowStore(n)
    async with (
        scripted.gateway_for(up, limits=limits, store=store) as gw,
        httpx2.AsyncClient(timeout=STEP * 2) as http,
    ):
        for k in range(n):
            await store.begin_session(f"elsewhere-{k}")
        answered = 0
        all_answered = anyio.Event()
        statuses: list[int] = []

        async def one(k: int) -> None:
            nonlocal answered
            async with http.stream(
                "POST", gw.url, json=scripted.CALL, headers=_head(f"elsewhere-{k}")
            ) as r:
                statuses.append(r.status_code)
                answered += 1
                if answered == n:
                    all_answered.set()
                if r.status_code == 200:
                    await scripted.read_until(r.aiter_raw(), b"progress")
                    await hold.wait()

        async with anyio.create_task_group() as tg:
            for k in range(n):
                tg.start_soon(one, k)
            with anyio.fail_after(STEP * 2):
                await all_answered.wait()
                # every admitted call's stream is open: its session accepted
                await up.wait_until(lambda u: len(u.requests) >= statuses.count(200))
            held = len(gw.gateway._sessions)
            hold.set()
    assert held <= 2, f"{held} sessions held, documented bound 2 ({statuses})"


class GatedCalls(scripted.PostScreen):
    """Holds back every ``tools/call`` until ``gate`` is set (``arrived`` set when one
    comes); everything goes on to ``inner``."""

    def __init__(self, inner: scripted.Upstream) -> None:
        super().__init__(inner)
        self.arrived, self.gate = anyio.Event(), anyio.Event()

    async def screen(self, headers: dict[str, str], msg: Any, send: Any) -> bool:
        if isinstance(msg, dict) and msg.get("method") == "tools/call" and msg.get("id") == 7:
            self.arrived.set()
            await self.gate.wait()
        return False


async def test_a_prompt_shown_by_calls_of_one_id_arriving_together_keeps_its_lease() -> None:
    """Two replicas on one store (lease 0.3 s). B's session (begun on another replica) is
    not held on replica 1. Two calls of B's reach replica 1 together (their store
    look-ups on the wire at once): they share one session, held once the upstream
    accepts it, and the asking call shows B's prompt, claimed on replica 1 under a lease.
    Replica 1 is alive and still serves B's call (B's connection half-open), so the lease
    is renewed: six lease periods later it has not lapsed, and when B resumes on replica
    2, where the server asks again, B's call waits for B's answer and ends with its
    result (not ``claim-lapsed``, "a replica that stopped")."""
    inner = scripted.asking(scripted.Upstream())
    asked = list(inner.call)
    inner.script = lambda msg, headers: (
        [scripted.sse("f1", scripted.result(8))] if msg.get("id") == 8 else asked
    )
    # the server asks again on the resumed stream (it replays its open request)
    inner.replay = lambda cursor: [
        scripted.sse("e1", scripted.elicit(1)),
        inner.answered,
        scripted.sse("e2", scripted.result(7)),
    ]
    up = GatedCalls(inner)
    lease = 0.3
    limits = GatewayLimits(standalone_hold_s=0, lease_s=lease)
    store = SlowStore(2)
    sid = "b-elsewhere"
    quick = {**scripted.CALL, "id": 8}  # B's other call, answered at once
    async with (
        scripted.two_replicas_for(up, limits=limits, store=store) as (r1, r2),
        httpx2.AsyncClient(timeout=STEP * 2) as http,
    ):
        await store.begin_session(sid)
        got: dict[str, Any] = {}
        seen = b""
        async with anyio.create_task_group() as tg:
            shown, finished = anyio.Event(), anyio.Event()

            async def call() -> None:
                async with http.stream("POST", r1.url, json=scripted.CALL, headers=_head(sid)) as r:
                    got["call"] = await scripted.read_until(r.aiter_raw(), b"elicitation/create")
                    shown.set()
                    await finished.wait()  # half-open: replica 1 still serves it

            tg.start_soon(call)
            got["quick"] = await http.post(r1.url, json=quick, headers=_head(sid))
            with anyio.fail_after(STEP):
                await up.arrived.wait()
            up.gate.set()
            with anyio.fail_after(STEP):
                await shown.wait()
            lapsed = await scripted.lapses_within(store, sid, 1, lease * 6)
            prompt_id = next(e for e, d in scripted.parse(got["call"]) if "elicitation" in d)
            get = {
                "accept": "text/event-stream",
                "mcp-session-id": sid,
                "last-event-id": str(prompt_id),
            }
            with anyio.move_on_after(lease * 3):
                async with http.stream("GET", r2.url, headers=get) as resumed:
                    async for piece in resumed.aiter_raw():
                        seen += piece
                        if b'"error"' in seen:
                            break
            if b'"error"' not in seen:
                await http.post(r2.url, json=scripted.ANSWER, headers=_head(sid))
                with anyio.move_on_after(STEP):
                    async with http.stream("GET", r2.url, headers=get) as resumed:
                        async for piece in resumed.aiter_raw():
                            seen += piece
            finished.set()
    messages = [json.loads(d) for _, d in scripted.parse(seen) if d]
    assert got["quick"].status_code == 200
    assert not lapsed, f"the lease of a prompt replica 1 still serves lapsed: {messages}"
    assert messages and messages[-1] == scripted.result(7), messages
