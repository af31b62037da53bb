"""What the guard costs a client: per progress event, per new server request, per
tracked request in memory.

(a) A progress notification with a new event id, through ``Guard.on_event`` (the hot
    path) and through ``Guard.feed(SseEvent(...))``, each against a bare loop doing the
    same parsing-free bookkeeping (insert the id in a dict, assign the cursor).
(b) A new ``elicitation/create`` delivered and presented, on both engines.
(c) Memory per tracked (live) request, with ``tracemalloc`` over 10,000 requests.
(d) The stream's event history (:mod:`fsm.sse.history`) at the default config: ``on_event``
    per new id while the exact window fills (fresh guards, 1,024 events each) and once it
    is full (a live stretch: ids leave the window for fingerprints in batches; after 2,048
    ids and after 100,000), each over the bare loop on as many ids, and beside them a
    full window that keeps no fingerprint (``max_event_history=0``: what the fingerprints
    cost); memory held per stream after 100,000 events (``tracemalloc``, the stream
    opened inside the measurement); the cost of a replayed id that left the window (a
    fingerprint lookup), as ``id in history`` and through ``on_event`` on a resumed
    connection's replay stretch, beside an id still in the window and a set of every id
    (what unbounded memory would buy).

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


WINDOW = GuardConfig().max_seen_event_ids
FILLING_GUARDS = 20
STREAM_EVENTS = 100_000
LOOKUPS = 20_000
TARGET_STREAM_BYTES = 1024 * 1024


def bench_history_phases() -> dict[str, float]:
    """Seconds per new id through ``on_event``: ``filling`` (window not yet full) and
    ``evicting`` (window full, fingerprints growing: after 2,048 ids, and
    ``evicting_long`` after 100,000, whose buckets are longer to scan), each with its bare
    loop; ``window_only``: a full window that keeps no fingerprint."""
    filling_ids = [f"f-{i}" for i in range(WINDOW)]
    prefill = [f"p-{i}" for i in range(STREAM_EVENTS)]
    ids = [f"ev-{i}" for i in range(EVENTS)]

    def prefilled(n: int = 2 * WINDOW, **config: Any) -> Any:
        on_event = _guard(**config).on_event
        for i in prefill[:n]:
            on_event(STREAM, i, PROGRESS)
        return on_event

    ns: dict[str, Any] = {
        "filling_ids": filling_ids,
        "ids": ids,
        "data": PROGRESS,
        "STREAM": STREAM,
        "new_guard": _guard,
        "prefilled": prefilled,
        "G": FILLING_GUARDS,
    }
    filling_ops = FILLING_GUARDS * WINDOW
    return {
        "filling_bare": _median_per_op(
            "for seen in dicts:\n    for i in filling_ids:\n        seen[i] = None\n"
            "        cursor = i",
            "dicts = [{} for _ in range(G)]; cursor = None",
            ns,
            filling_ops,
        ),
        "filling": _median_per_op(
            "for on_event in guards:\n    for i in filling_ids:\n        on_event(STREAM, i, data)",
            "guards = [new_guard().on_event for _ in range(G)]",
            ns,
            filling_ops,
        ),
        "evicting_bare": _median_per_op(
            "for i in ids:\n    seen[i] = None\n    cursor = i",
            "seen = {}; cursor = None",
            ns,
            EVENTS,
        ),
        "evicting": _median_per_op(
            "for i in ids:\n    on_event(STREAM, i, data)", "on_event = prefilled()", ns, EVENTS
        ),
        "window_only": _median_per_op(
            "for i in ids:\n    on_event(STREAM, i, data)",
            "on_event = prefilled(max_event_history=0)",
            ns,
            EVENTS,
        ),
        "evicting_long": _median_per_op(
            "for i in ids:\n    on_event(STREAM, i, data)",
            f"on_event = prefilled({STREAM_EVENTS})",
            ns,
            EVENTS,
        ),
    }


def bench_stream(events: int = STREAM_EVENTS) -> tuple[Guard, float, list[str]]:
    """A guard whose stream carried ``events`` progress events (default config), the
    bytes that stream holds (``tracemalloc``, from before it was opened) and its ids."""
    guard = _guard()
    ids = [f"ev-{i:06d}" for i in range(events)]
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        guard.feed(ev.StreamOpened("post:2", 2))
        on_event = guard.on_event
        for i in range(events):
            on_event("post:2", f"ev-{i:06d}", PROGRESS)  # ids made here: only kept ones count
        used = tracemalloc.get_traced_memory()[0] - base
    finally:
        tracemalloc.stop()
    return guard, float(used), ids


def bench_lookups(guard: Guard, ids: list[str]) -> dict[str, float]:
    """Seconds per replayed id on the stream ``bench_stream`` filled: ``in`` the
    history for ids that left the window (fingerprints), in it (exact) and never
    carried; through ``on_event`` (a duplicate: ``Ignore``) for the first two, on a
    resumed connection's replay stretch (the stream is lost and resumed first, so every
    id is checked against the whole history); and the same ``in`` on a set of every id."""
    guard.feed(ev.StreamLost("post:2", clean=False))
    guard.feed(ev.TimerFired("post:2"))
    guard.feed(ev.StreamResumed("post:2"))
    history = guard._streams["post:2"].history
    evicted = ids[: len(ids) - WINDOW]
    step = max(1, len(evicted) // LOOKUPS)
    old = evicted[::step][:LOOKUPS]
    recent = (ids[len(ids) - WINDOW :] * (LOOKUPS // WINDOW + 1))[:LOOKUPS]
    unseen = [f"new-{i}" for i in range(LOOKUPS)]
    assert all(i in history for i in old) and history.count and not history.full
    ns: dict[str, Any] = {
        "history": history,
        "every": set(ids),
        "old": old,
        "recent": recent,
        "unseen": unseen,
        "on_event": guard.on_event,
        "data": PROGRESS,
    }
    n = len(old)

    def per(stmt: str) -> float:
        return _median_per_op(stmt, "", ns, n)

    return {
        "in_fingerprints": per("for i in old:\n    i in history"),
        "in_window": per("for i in recent:\n    i in history"),
        "in_unseen": per("for i in unseen:\n    i in history"),
        "in_set": per("for i in old:\n    i in every"),
        "on_event_old": per("for i in old:\n    on_event('post:2', i, data)"),
        "on_event_recent": per("for i in recent:\n    on_event('post:2', i, data)"),
    }


def history_main() -> None:
    """Measure, record and print (d)."""
    h = bench_history_phases()
    filling = (h["filling"] - h["filling_bare"]) * 1e6
    evicting = (h["evicting"] - h["evicting_bare"]) * 1e6
    window_only = (h["window_only"] - h["evicting_bare"]) * 1e6
    evicting_long = (h["evicting_long"] - h["evicting_bare"]) * 1e6
    guard, stream_bytes, ids = bench_stream()
    history = guard._streams["post:2"].history
    look = bench_lookups(guard, ids)
    record("guard_event_added_filling_us", filling, "us")
    record("guard_event_added_evicting_us", evicting, "us")
    record("guard_event_added_window_only_us", window_only, "us")
    record("guard_event_added_long_stream_us", evicting_long, "us")
    record("guard_stream_bytes_100k_events", stream_bytes, "bytes")
    record("guard_history_nbytes_100k_events", float(history.nbytes()), "bytes")
    record("history_fingerprint_lookup_us", look["in_fingerprints"] * 1e6, "us")
    record("history_window_lookup_us", look["in_window"] * 1e6, "us")
    record("guard_replayed_old_id_us", look["on_event_old"] * 1e6, "us")
    ok = _verdict
    table(
        [
            (
                f"window filling: on_event per new id (0-{WINDOW} ids)",
                h["filling"] * 1e6,
                "us",
                f"x{h['filling'] / h['filling_bare']:.1f}",
                "",
                "",
            ),
            (
                "window full: on_event per new id (live stretch; ids leave in batches)",
                h["evicting"] * 1e6,
                "us",
                f"x{h['evicting'] / h['evicting_bare']:.1f}",
                "",
                "",
            ),
            (
                "guard_event_added_filling_us",
                filling,
                "us",
                "",
                f"<= {TARGET_EVENT_US}",
                ok(filling, TARGET_EVENT_US),
            ),
            (
                "guard_event_added_evicting_us",
                evicting,
                "us",
                "",
                f"<= {TARGET_EVENT_US}",
                ok(evicting, TARGET_EVENT_US),
            ),
            (
                f"guard_event_added_long_stream_us (after {STREAM_EVENTS:,} events)",
                evicting_long,
                "us",
                "",
                f"<= {TARGET_EVENT_US}",
                ok(evicting_long, TARGET_EVENT_US),
            ),
            (
                "guard_event_added_window_only_us (no fingerprints: max_event_history=0)",
                window_only,
                "us",
                "",
                "",
                "",
            ),
            (
                f"guard_stream_bytes_100k_events ({history.count:,} fingerprints)",
                stream_bytes,
                "bytes",
                "",
                f"<= {TARGET_STREAM_BYTES:,}",
                ok(stream_bytes, TARGET_STREAM_BYTES),
            ),
            ("  of which EventHistory.nbytes()", float(history.nbytes()), "bytes", "", "", ""),
            (
                "history_fingerprint_lookup_us: replayed id that left the window",
                look["in_fingerprints"] * 1e6,
                "us",
                f"x{look['in_fingerprints'] / look['in_set']:.1f}",
                "",
                "",
            ),
            (
                "history_window_lookup_us: replayed id still in the window",
                look["in_window"] * 1e6,
                "us",
                f"x{look['in_window'] / look['in_set']:.1f}",
                "",
                "",
            ),
            (
                "  an id never carried (window and bucket miss)",
                look["in_unseen"] * 1e6,
                "us",
                f"x{look['in_unseen'] / look['in_set']:.1f}",
                "",
                "",
            ),
            ("  a set of every id (unbounded memory)", look["in_set"] * 1e6, "us", "", "", ""),
            (
                "guard_replayed_old_id_us: on_event, replay stretch, id left the window",
                look["on_event_old"] * 1e6,
                "us",
                "",
                "",
                "",
            ),
            (
                "  on_event, replay stretch, id still in the window",
                look["on_event_recent"] * 1e6,
                "us",
                "",
                "",
                "",
            ),
        ],
        header=("figure", "value", "unit", "vs bare", "target", ""),
    )


def _verdict(value: float, target: float) -> str:
    return "ok" if value <= target else "OVER"


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

    verdict = _verdict
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
    print()
    history_main()


if __name__ == "__main__":
    main()
