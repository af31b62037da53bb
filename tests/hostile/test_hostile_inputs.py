"""Hostile inputs beyond tests/core/test_bad_input.py: SSE fields, id confusion, replays,
floods, clock jumps, concurrent streams, and never a fabricated answer."""

from __future__ import annotations

import asyncio
import os
import random
import time
import tracemalloc
from typing import Any

import pytest
from hostile_support import GET, ORIGIN, POST, SESSION, Clock, cancel, elicit, guard, of, reasons
from hostile_support import request as req
from hostile_support import response as resp

from fsm import events as ev
from fsm.actions import Complete, Fail, Ignore, Present, Refuse, Resume, Submit, Wait
from fsm.errors import CapacityError, StaleRequestError

# ---------------------------------------------------------------- 1. malformed input


@pytest.mark.parametrize("retry", [-1, True, 1.5, "100", 2**70 * -1, None])
def test_bad_retry_values_are_ignored_and_backoff_stays_default(retry: Any) -> None:
    g = guard()
    acts = g.feed(ev.SseEvent(POST, None, "e1", retry_ms=retry))
    assert reasons(acts) == ([] if retry is None else ["bad-retry"])
    acts = g.feed(ev.StreamLost(POST, clean=False))
    assert of(acts, Wait) == [Wait(POST, 1.0)]  # the configured backoff, not the bad value


def test_huge_retry_is_capped_at_max_server_wait() -> None:
    """A server's ``retry:`` is honoured up to ``max_server_wait_s`` (default 60 s): a
    huge one waits that long, not 10**9 s (an upstream could hold a call forever)."""
    g = guard()
    g.feed(ev.SseEvent(POST, None, "e1", retry_ms=10**12))
    assert of(g.feed(ev.StreamLost(POST, clean=False)), Wait) == [Wait(POST, 60.0)]


@pytest.mark.parametrize(
    "data",
    [
        b'{"jsonrpc":"2.0","id":1,"method":"elicitation/create","params":{"m":"\xc3\x28"}}',
        {"jsonrpc": "2.0", "id": {"nested": [1, {"x": None}]}, "method": "elicitation/create"},
        {"jsonrpc": "2.0", "id": [[[[[]]]]], "result": {}},
        {"jsonrpc": "2.0", "method": "elicitation/create"},  # no id: a notification
        "[" * 10_000 + "]" * 10_000,  # deep nesting: RecursionError must not escape
    ],
    ids=["non-utf8-bytes", "nested-id", "nested-response-id", "missing-id", "deep-nesting"],
)
def test_garbage_never_presents_and_never_raises(data: Any) -> None:
    g = guard()
    acts = g.feed(ev.SseEvent(POST, data, "e1"))
    assert not of(acts, Present) and g.tracked() == (0, 0, 2)


def test_huge_ids_are_distinct_keys() -> None:
    g = guard()
    big = 10**40
    acts = g.feed(ev.SseEvent(POST, elicit(big), "e1")) + g.feed(
        ev.SseEvent(POST, elicit(big + 1), "e2")
    )
    assert [p.key for p in of(acts, Present)] == [(SESSION, big), (SESSION, big + 1)]
    g.snapshot()


def test_unknown_method_is_interactive_and_presented_once() -> None:
    g = guard()
    first = g.feed(ev.SseEvent(POST, req(1, "x/unknown", {}), "e1"))
    again = g.feed(ev.SseEvent(POST, req(1, "x/unknown", {}), "e2"))
    assert len(of(first, Present)) == 1 and reasons(again) == ["duplicate-delivery"]


# ---------------------------------------------------------------- 2. id confusion


def test_same_id_on_two_streams_is_one_request() -> None:
    g = guard()
    g.feed(ev.SseEvent(POST, elicit(1), "e1"))
    acts = g.feed(ev.SseEvent(GET, elicit(1), "g1"))
    assert reasons(acts) == ["duplicate-delivery"] and not of(acts, Present)


def test_ping_reusing_a_tracked_id_is_refused_as_id_reuse() -> None:
    g = guard()
    g.feed(ev.SseEvent(POST, elicit(1), "e1"))
    assert reasons(g.feed(ev.SseEvent(POST, req(1, "ping"), "e2"))) == ["id-reused"]
    # a ping with a fresh id is still answered freely, every time
    assert of(g.feed(ev.SseEvent(POST, req(2, "ping"), "e3")), Present)
    assert of(g.feed(ev.SseEvent(POST, req(2, "ping"), "e4")), Present)


# ---------------------------------------------------------------- 3. replays


def _resume(g: Any, stream: str = POST) -> None:
    g.feed(ev.StreamLost(stream, clean=False))
    acts = g.feed(ev.TimerFired(stream))
    assert of(acts, Resume)
    g.feed(ev.StreamResumed(stream))


def test_replay_backwards_repeat_skip_and_after_completion() -> None:
    clock = Clock()
    g = guard(clock)
    g.feed(ev.SseEvent(POST, elicit(1), "e1"))
    g.feed(ev.SseEvent(POST, elicit(2), "e2"))
    _resume(g)
    # backwards and repeated: already seen, nothing presented
    for eid, rid in (("e2", 2), ("e1", 1), ("e2", 2)):
        assert reasons(g.feed(ev.SseEvent(POST, elicit(rid), eid))) == ["duplicate-delivery"]
    # skip: e3 never arrives, e4 does: a new request is presented once
    assert of(g.feed(ev.SseEvent(POST, elicit(4), "e4")), Present)
    assert g.cursor(POST) == "e4"
    assert of(g.feed(ev.SseEvent(POST, resp(ORIGIN), "e5")), Complete) == [Complete(POST)]
    # after the origin completed: everything is ignored, nothing ends twice
    for data in (elicit(9), elicit(1), resp(ORIGIN)):
        assert reasons(g.feed(ev.SseEvent(POST, data, "e6"))) == ["stream-terminal"]


def test_replay_batch_cut_midway_presents_nothing_twice() -> None:
    g = guard()
    g.feed(ev.SseEvent(POST, None, "e0"))
    _resume(g)
    batch = ev.ReplayBatch(
        POST, (ev.SseEvent(POST, elicit(1), "e1"), ev.SseEvent(POST, elicit(2), "e2"))
    )
    first = g.feed(batch)
    assert [p.key[1] for p in of(first, Present)] == [1, 2]
    acts = g.feed(ev.StreamLost(POST, clean=False))
    assert of(acts, Wait) and g.cursor(POST) == "e2"
    assert of(g.feed(ev.TimerFired(POST)), Resume) == [Resume(POST, "e2")]
    g.feed(ev.StreamResumed(POST))
    again = g.feed(ev.ReplayBatch(POST, (ev.SseEvent(POST, elicit(2), "e2"),)))
    every = [a for a in again if not isinstance(a, Ignore)]
    assert every == [] and reasons(again) == ["duplicate-delivery"]


# ---------------------------------------------------------------- 5. floods

FLOOD = int(os.environ.get("FSM_FLOOD_N", "20000"))  # 100000 outside CI


def test_flood_of_new_requests_and_duplicates_stays_bounded() -> None:
    g = guard(max_live_requests=256, max_tombstones=4096)
    started = time.perf_counter()
    tracemalloc.start()
    try:
        refused = presented = 0
        for i in range(FLOOD):
            acts = g.feed(ev.SseEvent(GET, elicit(i), f"g{i}"))
            presented += len(of(acts, Present))
            for r in of(acts, Refuse):
                assert isinstance(r.error, CapacityError)
                refused += 1
            if i % 2 == 0:
                g.feed(ev.SseEvent(GET, cancel(i), f"c{i}"))
            if i == FLOOD // 5:
                mid = tracemalloc.get_traced_memory()[0]
        for i in range(FLOOD):
            acts = g.feed(ev.SseEvent(GET, elicit(FLOOD - 1), f"d{i}"))
            assert not of(acts, Present)
        end = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    elapsed = time.perf_counter() - started
    assert presented + refused == FLOOD  # never a silent drop
    live, tombstones, _ = g.tracked()
    assert live == 256 and tombstones <= 4096
    # a leak of one small object per event would add several MB here
    assert end - mid < 1_000_000, end - mid
    print(f"flood: {2 * FLOOD} events in {elapsed:.2f}s, memory after warm-up +{end - mid} B")


# ---------------------------------------------------------------- 6. clock jumps


def test_deadline_boundary_is_not_past_and_clock_may_go_backwards() -> None:
    clock = Clock(100.0)
    g = guard(clock, request_ttl_s=60.0)
    g.feed(ev.SseEvent(POST, elicit(1), "e1"))
    _resume(g)
    clock.now = 160.0  # exactly the deadline: not past
    assert reasons(g.feed(ev.SseEvent(POST, elicit(1), "r1"))) == ["duplicate-delivery"]
    clock.now = -1e9  # backwards: nothing is past
    assert reasons(g.feed(ev.SseEvent(POST, elicit(1), "r2"))) == ["duplicate-delivery"]
    clock.now = 1e12  # a leap forward: the replay is stale, the request dead
    acts = g.feed(ev.SseEvent(POST, elicit(1), "r3"))
    fails = of(acts, Fail)
    assert len(fails) == 1 and isinstance(fails[0].error, StaleRequestError)


# ---------------------------------------------------------------- 7. concurrency


def test_concurrent_streams_match_a_sequential_replay() -> None:
    streams = [(f"post:{i}", i) for i in range(1, 5)] + [(GET, None)]
    script = {
        sid: [
            ev.SseEvent(sid, elicit(f"{sid}/{n}" if n % 3 else n), f"{sid}-{n}") for n in range(40)
        ]
        for sid, _ in streams
    }
    order: list[ev.Event] = []
    g = guard(streams=streams)

    async def feeder(sid: str, rng: random.Random) -> None:
        for e in script[sid]:
            order.append(e)
            g.feed(e)
            for _ in range(rng.randint(0, 2)):
                await asyncio.sleep(0)

    async def main() -> None:
        await asyncio.gather(*(feeder(sid, random.Random(i)) for i, (sid, _) in enumerate(streams)))

    asyncio.run(main())
    twin = guard(streams=streams)
    for e in order:
        twin.feed(e)
    assert g.snapshot() == twin.snapshot()
    presented = [k for k in (g.state_of((SESSION, n)) for n in range(40)) if k]
    assert presented  # numeric ids shared by all streams were presented once each


# ---------------------------------------------------------------- 9. never fabricated


def test_no_submit_before_the_user_answered() -> None:
    g = guard()
    g.feed(ev.SseEvent(POST, elicit(1, _meta={"dead-or-resumable/live": True}), "e1"))
    _resume(g)
    acts = g.feed(ev.SseEvent(POST, elicit(1, _meta={"dead-or-resumable/live": True}), "e2"))
    assert not of(acts, Submit)  # live and redelivered, but nobody answered yet
    answer = {"action": "decline"}
    acts = g.feed(ev.UserAnswered((SESSION, 1), answer))
    assert of(acts, Submit) == [Submit((SESSION, 1), answer, 1, 0.0)]
