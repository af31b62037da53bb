"""Every bad input gets a typed error or a documented Ignore/Refuse, never a crash;
floods stay within the configured memory bounds."""

from __future__ import annotations

import doctest
import json
import tracemalloc
from typing import Any

import core_support as cs
import pytest

import fsm.sse.guard
from fsm import events as ev
from fsm.actions import Complete, Fail, Ignore, Present, Refuse, Withdraw
from fsm.errors import CapacityError
from fsm.messages import MAX_MESSAGE_BYTES


def reasons(actions: tuple[Any, ...]) -> list[str]:
    return [a.reason for a in actions if isinstance(a, Ignore)]


@pytest.mark.parametrize(
    ("data", "detail"),
    [
        ("{not json", "not JSON"),
        (b"\xff\xfe", "not JSON"),
        ("[1, 2]", "not a JSON object"),
        ('"just a string"', "not a JSON object"),
        ('{"id": 1, "method": "elicitation/create"}', "missing jsonrpc"),
        ({"jsonrpc": "1.0", "id": 1, "method": "ping"}, "missing jsonrpc"),
        ({"jsonrpc": "2.0", "id": True, "method": "elicitation/create"}, "not an int or a string"),
        ({"jsonrpc": "2.0", "id": 1.0, "method": "elicitation/create"}, "not an int or a string"),
        ({"jsonrpc": "2.0", "id": None, "method": "elicitation/create"}, "not an int or a string"),
        ({"jsonrpc": "2.0", "id": 1, "method": ""}, "method is not a non-empty string"),
        ({"jsonrpc": "2.0", "id": 1, "method": 7}, "method is not a non-empty string"),
        ({"jsonrpc": "2.0", "id": 1, "method": "x", "params": [1]}, "params is not an object"),
        ({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {}}, "requestId"),
        (
            {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1.5}},
            "requestId",
        ),
        ({"jsonrpc": "2.0", "id": [1], "result": {}}, "response id"),
        ({"jsonrpc": "2.0"}, "neither a request"),
        ("x" * (MAX_MESSAGE_BYTES + 1), f"over {MAX_MESSAGE_BYTES} bytes"),
        (b"{" + b" " * MAX_MESSAGE_BYTES + b"}", f"over {MAX_MESSAGE_BYTES} bytes"),
    ],
    ids=[
        "malformed-json",
        "undecodable-bytes",
        "json-array",
        "json-string",
        "missing-jsonrpc",
        "wrong-jsonrpc",
        "bool-id",
        "float-id",
        "null-request-id",
        "empty-method",
        "non-string-method",
        "array-params",
        "cancel-without-id",
        "cancel-float-id",
        "array-response-id",
        "no-kind",
        "oversized-str",
        "oversized-bytes",
    ],
)
def test_malformed_message_is_ignored_and_changes_nothing_but_the_cursor(
    engine: str, data: Any, detail: str
) -> None:
    guard = cs.make_guard(engine)
    acts = guard.feed(ev.SseEvent(cs.POST, data, "e1"))
    assert len(acts) == 1 and isinstance(acts[0], Ignore)
    assert acts[0].reason == "malformed" and detail in acts[0].detail
    assert guard.tracked() == (0, 0, 2)
    assert guard.stream_state(cs.POST) == "open"
    assert guard.cursor(cs.POST) == "e1"  # the event id still counts as seen


def test_message_just_under_the_size_cap_is_parsed(engine: str) -> None:
    msg = cs.elicit(1, message="")
    raw = json.dumps(msg)
    padded = raw[:-1] + " " * (MAX_MESSAGE_BYTES - len(raw)) + "}"
    assert len(padded) == MAX_MESSAGE_BYTES
    assert cs.of(cs.make_guard(engine).feed(ev.SseEvent(cs.POST, padded, "e1")), Present)


def test_int_and_string_ids_are_distinct_keys(engine: str) -> None:
    guard = cs.make_guard(engine)
    first = guard.feed(ev.SseEvent(cs.POST, cs.elicit(1), "e1"))
    second = guard.feed(ev.SseEvent(cs.POST, cs.elicit("1"), "e2"))
    assert [p.key for p in cs.of(first + second, Present)] == [(cs.SESSION, 1), (cs.SESSION, "1")]
    assert guard.state_of((cs.SESSION, 1)) == guard.state_of((cs.SESSION, "1")) == "presented"
    acts = guard.feed(ev.SseEvent(cs.POST, cs.cancel("1"), "e3"))
    assert cs.of(acts, Withdraw) == [Withdraw((cs.SESSION, "1"), "cancelled")]
    assert guard.state_of((cs.SESSION, 1)) == "presented"
    guard.snapshot()  # mixed key types still order deterministically


def test_id_reused_with_different_params_is_ignored(engine: str) -> None:
    guard = cs.make_guard(engine)
    guard.feed(ev.SseEvent(cs.POST, cs.elicit(1, "Delete 3 files?"), "e1"))
    acts = guard.feed(ev.SseEvent(cs.POST, cs.elicit(1, "Delete ALL files?"), "e2"))
    assert reasons(acts) == ["id-reused"] and not cs.of(acts, Present)
    other_method = {"jsonrpc": "2.0", "id": 1, "method": "sampling/createMessage", "params": {}}
    assert reasons(guard.feed(ev.SseEvent(cs.POST, other_method, "e3"))) == ["id-reused"]
    assert guard.state_of((cs.SESSION, 1)) == "presented"


@pytest.mark.parametrize(
    ("event", "reason"),
    [
        (ev.SseEvent(cs.POST, cs.cancel(99), "e9"), "cancel-unknown-request"),
        (ev.LivenessAsserted((cs.SESSION, 99)), "assertion-unknown-request"),
        (ev.SseEvent("nope", cs.elicit(1), "e9"), "unknown-stream"),
        (ev.SseEvent(cs.POST, cs.response(12345), "e9"), "foreign-response"),
        (ev.SseEvent(cs.POST, cs.response(str(cs.ORIGIN)), "e9"), "foreign-response"),
        (ev.SseEvent(cs.GET, cs.response(cs.ORIGIN), "g9"), "foreign-response"),
        (ev.SseEvent(cs.POST, None, "e9", retry_ms=-5), "bad-retry"),
        (ev.SseEvent(cs.POST, None, "e9", retry_ms=True), "bad-retry"),
        (ev.TimerFired(cs.POST), "no-wait-pending"),
        (ev.StreamResumed(cs.POST), "no-resume-pending"),
        (ev.ResumeRefused(cs.POST, status=503), "no-resume-pending"),
        (ev.OriginResponse(cs.GET), "no-origin-pending"),
    ],
    ids=[
        "cancel-unknown",
        "assert-unknown",
        "unknown-stream",
        "foreign-response-id",
        "response-id-type-differs",
        "response-on-get-stream",
        "negative-retry",
        "bool-retry",
        "timer-without-wait",
        "resumed-without-resume",
        "refused-without-resume",
        "origin-response-on-get",
    ],
)
def test_out_of_place_input_is_ignored_with_a_stable_reason(
    engine: str, event: Any, reason: str
) -> None:
    guard = cs.make_guard(engine)
    guard.feed(ev.SseEvent(cs.POST, cs.elicit(1), "e1"))
    before = guard.snapshot()
    acts = guard.feed(event)
    assert reasons(acts) == [reason]
    assert not cs.of(acts, Fail) and not cs.of(acts, Complete) and not cs.of(acts, Present)
    assert guard.stream_state(cs.POST) == "open"
    if reason not in ("bad-retry",):
        after = guard.snapshot()
        # only the cursor may move (the event id was seen)
        assert after[2] == before[2]


def test_events_after_a_terminal_stream_are_ignored(engine: str) -> None:
    guard = cs.make_guard(engine)
    assert guard.feed(ev.SseEvent(cs.POST, cs.response(cs.ORIGIN), "e1")) == (Complete(cs.POST),)
    for data in (cs.elicit(1), cs.progress(), cs.response(cs.ORIGIN), cs.cancel(1), "{bad"):
        acts = guard.feed(ev.SseEvent(cs.POST, data, "e2"))
        assert reasons(acts) == ["stream-terminal"]
    assert guard.on_event(cs.POST, "e3", cs.progress()) == (
        Ignore("stream-terminal", f"{cs.POST} is done", stream=cs.POST),
    )
    assert reasons(guard.feed(ev.StreamLost(cs.POST, clean=True))) == ["not-connected"]
    assert guard.cursor(cs.POST) == "e1"


def test_liveness_assertion_for_terminal_request_is_ignored(engine: str) -> None:
    guard = cs.make_guard(engine)
    guard.feed(ev.SseEvent(cs.POST, cs.elicit(1), "e1"))
    guard.feed(ev.SseEvent(cs.POST, cs.cancel(1), "e2"))
    assert reasons(guard.feed(ev.LivenessAsserted((cs.SESSION, 1)))) == [
        "assertion-unknown-request"
    ]


def test_answer_after_death_is_dropped(engine: str) -> None:
    guard = cs.make_guard(engine)
    guard.feed(ev.SseEvent(cs.POST, cs.elicit(1), "e1"))
    guard.feed(ev.SseEvent(cs.POST, cs.cancel(1), "e2"))
    acts = guard.feed(ev.UserAnswered((cs.SESSION, 1), {"action": "accept"}))
    assert reasons(acts) == ["answer-after-death"]


@pytest.mark.parametrize("via", ["out-of-band", "sse"])
def test_origin_response_while_stream_waits_does_not_crash(engine: str, via: str) -> None:
    guard = cs.make_guard(engine)
    guard.feed(ev.SseEvent(cs.POST, cs.progress(), "e1"))
    guard.feed(ev.StreamLost(cs.POST, clean=False))
    assert guard.stream_state(cs.POST) == "waiting"
    event = (
        ev.OriginResponse(cs.POST)
        if via == "out-of-band"
        else ev.SseEvent(cs.POST, cs.response(cs.ORIGIN), "e2")
    )
    acts = guard.feed(event)
    assert cs.of(acts, Complete) == [Complete(cs.POST)] or reasons(acts)


# ------------------------------------------------------------------ floods and caps


def test_over_cap_requests_are_refused_with_capacity_error(engine: str) -> None:
    guard = cs.make_guard(engine, max_live_requests=50)
    acts: list[Any] = []
    for i in range(60):
        acts += guard.feed(ev.SseEvent(cs.GET, cs.elicit(i), f"g{i}"))
    assert [p.key[1] for p in cs.of(acts, Present)] == list(range(50))
    refused = cs.of(acts, Refuse)
    assert [r.key[1] for r in refused] == list(range(50, 60))
    assert all(isinstance(r.error, CapacityError) for r in refused)
    assert guard.tracked()[0] == 50
    assert guard.state_of((cs.SESSION, 55)) is None
    # a slot freed by a cancellation admits the next request
    guard.feed(ev.SseEvent(cs.GET, cs.cancel(0), "gc"))
    assert cs.of(guard.feed(ev.SseEvent(cs.GET, cs.elicit(60), "g60")), Present)


def test_flood_of_ten_thousand_requests_keeps_tombstones_bounded(engine: str) -> None:
    guard = cs.make_guard(engine, max_live_requests=8, max_tombstones=100, max_seen_event_ids=64)
    presented = refused = 0
    for i in range(10_000):
        acts = guard.feed(ev.SseEvent(cs.GET, cs.elicit(i), f"g{i}"))
        presented += len(cs.of(acts, Present))
        refused += len(cs.of(acts, Refuse))
        if i % 1250 != 1:  # every 1250th request stays live: the cap fills at i=8751
            guard.feed(ev.SseEvent(cs.GET, cs.cancel(i), f"c{i}"))
        live, tombstones, streams = guard.tracked()
        assert live <= 8 and tombstones <= 100 and streams == 2
    assert presented + refused == 10_000
    assert (presented, refused) == (8_752, 1_248)
    live, tombstones, _ = guard.tracked()
    assert (live, tombstones) == (8, 100)
    # oldest evicted first: the newest cancelled keys are still remembered, the oldest not
    assert guard.state_of((cs.SESSION, 8_750)) == "cancelled"
    assert guard.state_of((cs.SESSION, 8_651)) == "cancelled"  # the oldest of the 100 kept
    assert guard.state_of((cs.SESSION, 8_650)) is None  # one older: evicted
    assert guard.state_of((cs.SESSION, 8_751)) == "presented"
    assert guard.state_of((cs.SESSION, 1)) == "presented"
    assert guard.state_of((cs.SESSION, 0)) is None
    assert guard.state_of((cs.SESSION, 9_999)) is None
    assert len(guard.snapshot()[2]) == live + tombstones


def test_evicted_tombstone_key_looks_new_again(engine: str) -> None:
    guard = cs.make_guard(engine, max_tombstones=2)
    for i in range(3):
        guard.feed(ev.SseEvent(cs.GET, cs.elicit(i), f"g{i}"))
        guard.feed(ev.SseEvent(cs.GET, cs.cancel(i), f"c{i}"))
    assert guard.state_of((cs.SESSION, 0)) is None
    assert reasons(guard.feed(ev.SseEvent(cs.GET, cs.elicit(2), "x2"))) == ["request-terminal"]
    assert cs.of(guard.feed(ev.SseEvent(cs.GET, cs.elicit(0), "x0")), Present)  # documented


def test_flood_of_duplicates_keeps_memory_stable(engine: str) -> None:
    # memory grows with new event ids only up to the history's cap (6 bytes an id), then
    # stays flat: fill the window and the history first
    guard = cs.make_guard(engine, max_seen_event_ids=256, max_event_history=744)
    guard.feed(ev.SseEvent(cs.GET, cs.elicit(1), "g0"))
    data = cs.elicit(1)

    def flood(start: int, n: int) -> None:
        for i in range(start, start + n):
            acts = guard.feed(ev.SseEvent(cs.GET, data, f"g{i}"))
            assert reasons(acts) == ["duplicate-delivery"]

    flood(1, 1_000)
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        flood(1_001, 10_000)
        grown = tracemalloc.get_traced_memory()[0] - base
    finally:
        tracemalloc.stop()
    assert guard.tracked() == (1, 0, 2)
    assert grown < 64 * 1024, grown


def test_many_streams_evict_oldest_terminal_stream(engine: str) -> None:
    guard = cs.make_guard(engine, streams=(), max_streams=4)
    for i in range(10):
        guard.feed(ev.StreamOpened(f"post:{i}", i))
        guard.feed(ev.OriginResponse(f"post:{i}"))
        assert guard.tracked()[2] <= 4
    assert guard.stream_state("post:9") == "done"
    assert guard.stream_state("post:0") is None


# ------------------------------------------------------------------ the doctest


def test_guard_module_doctest_runs() -> None:
    result = doctest.testmod(fsm.sse.guard, optionflags=doctest.ELLIPSIS)
    assert result.attempted >= 3
    assert result.failed == 0


def test_hot_path_rejects_empty_method_like_feed(engine: str) -> None:
    data = {"jsonrpc": "2.0", "method": ""}
    fed = cs.make_guard(engine).feed(ev.SseEvent(cs.POST, data, "e1"))
    assert reasons(fed) == ["malformed"]
    assert cs.make_guard(engine).on_event(cs.POST, "e1", data) == fed
