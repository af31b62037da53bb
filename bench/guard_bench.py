"""What the guard costs a client: per progress event, per new server request, per
tracked request in memory.

(a) A progress notification with a new event id, through ``Guard.on_event`` (the hot
    path) and through ``Guard.feed(SseEvent(...))``, each against a bare loop doing the
    same parsing-free bookkeeping (insert the id in a dict, assign the cursor).
(b) A new ``elicitation/create`` delivered and presented, on both engines.
(c) Memory per tracked (live) request, with ``tracemalloc`` over 10,000 requests.

Times are the median of several ``timeit`` repeats, each on a fresh guard.
"""

from __future__ import annotations

import statistics
import timeit
import tracemalloc
from typing import Any

from bench.results import record, table
from fsm import Guard, GuardConfig
from fsm import events as ev

REPEATS = 7
EVENTS = 20_000
REQUESTS = 2_000
TRACKED = 10_000
STREAM = "post:1"

TARGET_EVENT_US = 1.0
TARGET_REQUEST_US = 50.0
TARGET_BYTES = 2048

PROGRESS = {
    "jsonrpc": "2.0",
    "method": "notifications/progress",
    "params": {"progressToken": "tok", "progress": 1, "total": 10},
}


def _elicit(rid: int) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": rid,
        "method": "elicitation/create",
        "params": {
            "message": "Delete 3 files?",
            "requestedSchema": {"type": "object", "properties": {"ok": {"type": "boolean"}}},
        },
    }


def _guard(engine: str = "transitions", **config: Any) -> Guard:
    guard = Guard(clock=lambda: 0.0, config=GuardConfig(**config), engine=engine)  # type: ignore[arg-type]
    guard.feed(ev.SessionStarted("s"))
    guard.feed(ev.StreamOpened(STREAM, 1))
    return guard


def _median_per_op(stmt: str, setup: str, namespace: dict[str, Any], ops: int) -> float:
    """Median seconds per operation over ``REPEATS`` runs (setup untimed, fresh each run)."""
    runs = timeit.Timer(stmt, setup, globals=namespace).repeat(repeat=REPEATS, number=1)
    return statistics.median(runs) / ops


def bench_events() -> dict[str, float]:
    ids = [f"ev-{i}" for i in range(EVENTS)]
    sse = [ev.SseEvent(STREAM, PROGRESS, i) for i in ids]
    ns: dict[str, Any] = {
        "ids": ids,
        "sse": sse,
        "data": PROGRESS,
        "STREAM": STREAM,
        "new_guard": _guard,
    }
    bare = _median_per_op(
        "for i in ids:\n    seen[i] = None\n    cursor = i",
        "seen = {}; cursor = None",
        ns,
        EVENTS,
    )
    hot = _median_per_op(
        "for i in ids:\n    on_event(STREAM, i, data)",
        "on_event = new_guard().on_event",
        ns,
        EVENTS,
    )
    fed = _median_per_op(
        "for e in sse:\n    feed(e)",
        "feed = new_guard().feed",
        ns,
        EVENTS,
    )
    return {"bare": bare, "on_event": hot, "feed": fed}


def bench_requests(engine: str) -> float:
    events = [ev.SseEvent(STREAM, _elicit(i), f"r-{i}") for i in range(REQUESTS)]
    ns: dict[str, Any] = {"events": events, "new_guard": _guard, "engine": engine, "n": REQUESTS}
    return _median_per_op(
        "for e in events:\n    feed(e)",
        "feed = new_guard(engine, max_live_requests=n + 1).feed",
        ns,
        REQUESTS,
    )


def bench_memory() -> float:
    events = [ev.SseEvent(STREAM, _elicit(i), f"m-{i}") for i in range(TRACKED)]
    guard = _guard(max_live_requests=TRACKED + 1)
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        for e in events:
            guard.feed(e)
        used = tracemalloc.get_traced_memory()[0] - base
    finally:
        tracemalloc.stop()
    assert guard.tracked()[0] == TRACKED
    return used / TRACKED


def main() -> None:
    e = bench_events()
    added_hot = (e["on_event"] - e["bare"]) * 1e6
    added_feed = (e["feed"] - e["bare"]) * 1e6
    req_transitions = bench_requests("transitions") * 1e6
    req_tables = bench_requests("tables") * 1e6
    per_request = bench_memory()

    record("guard_event_added_us", added_hot, "us")
    record("guard_event_added_feed_us", added_feed, "us")
    record("guard_request_us", req_transitions, "us")
    record("guard_request_tables_us", req_tables, "us")
    record("guard_bytes_per_request", per_request, "bytes")

    def verdict(value: float, target: float) -> str:
        return "ok" if value <= target else "OVER"

    table(
        [
            ("bare loop per event (dict insert + cursor)", e["bare"] * 1e6, "us", "", "", ""),
            (
                "on_event per progress event",
                e["on_event"] * 1e6,
                "us",
                f"x{e['on_event'] / e['bare']:.1f}",
                "",
                "",
            ),
            (
                "feed(SseEvent) per progress event",
                e["feed"] * 1e6,
                "us",
                f"x{e['feed'] / e['bare']:.1f}",
                "",
                "",
            ),
            (
                "guard_event_added_us (on_event)",
                added_hot,
                "us",
                "",
                f"<= {TARGET_EVENT_US}",
                verdict(added_hot, TARGET_EVENT_US),
            ),
            (
                "guard_event_added_feed_us (feed)",
                added_feed,
                "us",
                "",
                f"<= {TARGET_EVENT_US}",
                verdict(added_feed, TARGET_EVENT_US),
            ),
            (
                "guard_request_us (transitions engine)",
                req_transitions,
                "us",
                "",
                f"<= {TARGET_REQUEST_US:.0f}",
                verdict(req_transitions, TARGET_REQUEST_US),
            ),
            (
                "guard_request_tables_us (tables engine)",
                req_tables,
                "us",
                "",
                f"<= {TARGET_REQUEST_US:.0f}",
                verdict(req_tables, TARGET_REQUEST_US),
            ),
            (
                "guard_bytes_per_request",
                per_request,
                "bytes",
                "",
                f"<= {TARGET_BYTES}",
                verdict(per_request, TARGET_BYTES),
            ),
        ],
        header=("figure", "value", "unit", "vs bare", "target", ""),
    )


if __name__ == "__main__":
    main()
