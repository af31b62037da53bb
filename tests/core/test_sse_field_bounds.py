"""What an upstream puts in an SSE event's ``retry:`` and ``id:`` fields can neither crash
the stream's task nor hold a call for ever nor grow memory per call.

* ``retry:``: the parser converts at most :data:`~fsm.adapters._transport.sse.RETRY_DIGITS`
  digits (a longer value is clamped: Python refuses ``int`` of more than 4,300 digits);
  the guard honours a server's ``retry:`` and ``Retry-After`` up to
  ``GuardConfig.max_server_wait_s`` (10**400 ms overflowed a float, 10**30 ms waited
  10**27 s).
* ``id:``: an id is a cursor only if a resume can send it back as ``Last-Event-ID``
  (:func:`~fsm.adapters._transport.sse.usable_event_id`: at most
  :data:`~fsm.adapters._transport.sse.MAX_EVENT_ID` visible ASCII characters, no space
  at either end); any other is read as no id, by the parser and by the hot path alike.
"""

from __future__ import annotations

import math

import pytest
from core_support import POST, make_guard, of, progress

from fsm import GuardConfig, SubmissionResult
from fsm import events as ev
from fsm.actions import Fail, Resume, Submit, Wait
from fsm.adapters._transport.sse import (
    MAX_EVENT_ID,
    RETRY_DIGITS,
    SseParser,
    hot_event,
    usable_event_id,
)

PROGRESS = b'data: {"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1}}'

# --------------------------------------------------------------------------- retry:


@pytest.mark.parametrize(
    ("value", "read"),
    [
        (b"50", 50),
        (b"1000", 1000),
        (b"0", 0),
        (b"9" * RETRY_DIGITS, 10**RETRY_DIGITS - 1),
        (b"0" * 4000 + b"1500", 1500),  # leading zeros aside
        (b"1" + b"0" * 30, 10**RETRY_DIGITS - 1),
        (b"1" * 5000, 10**RETRY_DIGITS - 1),  # int() refuses more than 4,300 digits
        (b"0" * 5000, 0),
    ],
    ids=["50", "1000", "0", "ten-digits", "zeros-then-1500", "10**30", "5000-digits", "zeros"],
)
def test_a_retry_field_is_read_without_unbounded_conversion(value: bytes, read: int) -> None:
    parser = SseParser()
    [frame] = parser.feed(b"id: e1\nretry: " + value + b"\n" + PROGRESS + b"\n\n")
    assert (frame.event_id, frame.retry) == ("e1", read)


def test_a_long_retry_line_cut_across_reads_is_clamped_too() -> None:
    parser = SseParser()
    frames = parser.feed(b"id: e1\nretry: " + b"7" * 3000)
    frames += parser.feed(b"7" * 3000 + b"\n" + PROGRESS + b"\n\n")
    assert [(f.event_id, f.retry) for f in frames] == [("e1", 10**RETRY_DIGITS - 1)]


@pytest.mark.parametrize(
    ("retry_ms", "wait"),
    [(50, 0.05), (1000, 1.0), (45_000, 45.0), (10**12, 60.0), (10**30, 60.0), (10**400, 60.0)],
)
def test_a_servers_retry_is_honoured_up_to_max_server_wait(
    engine: str, retry_ms: int, wait: float
) -> None:
    """Ordinary values as given; a huge one (10**400 overflowed a float) waits the cap."""
    guard = make_guard(engine)
    guard.feed(ev.SseEvent(POST, progress(), "e1", retry_ms=retry_ms))
    assert of(guard.feed(ev.StreamLost(POST, clean=False)), Wait) == [Wait(POST, wait)]
    assert of(guard.feed(ev.TimerFired(POST)), Resume) == [Resume(POST, "e1")]


def test_the_cap_is_configurable(engine: str) -> None:
    guard = make_guard(engine, max_server_wait_s=0.5)
    guard.feed(ev.SseEvent(POST, progress(), "e1", retry_ms=10**30))
    assert of(guard.feed(ev.StreamLost(POST, clean=False)), Wait) == [Wait(POST, 0.5)]


@pytest.mark.parametrize("retry_after", [math.inf, 1e300, math.nan])
def test_a_retry_after_that_never_ends_waits_the_cap(engine: str, retry_after: float) -> None:
    """A retryable refusal (a 5xx) with an endless ``Retry-After``: the cap, not for ever."""
    guard = make_guard(engine)
    guard.feed(ev.SseEvent(POST, progress(), "e1"))
    guard.feed(ev.StreamLost(POST, clean=False))
    guard.feed(ev.TimerFired(POST))
    acts = guard.feed(ev.ResumeRefused(POST, 500, retry_after=retry_after))
    assert of(acts, Wait) == [Wait(POST, 60.0)]


@pytest.mark.parametrize("retry_after", [math.inf, 1e300])
def test_a_patient_refusal_with_an_endless_retry_after_waits_within_the_patience(
    engine: str, retry_after: float
) -> None:
    guard = make_guard(engine, resume_jitter=lambda: 0.0)
    guard.feed(ev.SseEvent(POST, progress(), "e1", retry_ms=10**400))
    guard.feed(ev.StreamLost(POST, clean=False))
    guard.feed(ev.TimerFired(POST))
    acts = guard.feed(ev.ResumeRefused(POST, 409, retry_after=retry_after))
    [wait] = of(acts, Wait)
    assert wait.delay_s == 60.0  # the cap, not for ever


def test_patient_delay_reads_huge_values_without_overflow() -> None:
    config = GuardConfig(resume_jitter=lambda: 1.0)
    assert config.patient_delay(0, 10**400, None) == 60.0
    assert config.patient_delay(0, 10**400, math.inf) == 60.0
    assert config.patient_delay(0, 300, 2.0) == 2.0  # ordinary values as before
    assert config.patient_delay(0, None, None) == 1.0


def test_a_submission_retry_after_that_never_ends_waits_the_cap(engine: str) -> None:
    guard = make_guard(engine)
    guard.feed(ev.SseEvent(POST, progress(), "e1"))
    ask = {"jsonrpc": "2.0", "id": 1, "method": "elicitation/create", "params": {"m": "?"}}
    guard.feed(ev.SseEvent(POST, ask, "e2"))
    answer = {"action": "accept"}
    guard.feed(ev.UserAnswered(("s1", 1), answer))
    acts = guard.feed(ev.SubmissionOutcome(("s1", 1), SubmissionResult(429, retry_after=1e300)))
    assert [a.delay_s for a in of(acts, Submit)] == [60.0]


# --------------------------------------------------------------------------- id:

UNUSABLE = {
    "not-utf8": b"\xff\xfe",
    "non-ascii": "é".encode(),
    "control": b"\x01",
    "del": b"\x7f",
    "tab": b"a\tb",
    "leading-space": b" e9",
    "trailing-space": b"e9 ",
    "too-long": b"x" * (MAX_EVENT_ID + 1),
    "a-megabyte": b"x" * (1 << 20),
}
USABLE = {
    "short": b"e9",
    "inner-space": b"a b",
    "longest": b"y" * MAX_EVENT_ID,
    "punctuation": b"!~._-:/",
    "reset": b"",
}


@pytest.mark.parametrize("raw", UNUSABLE.values(), ids=UNUSABLE.keys())
def test_an_id_that_cannot_be_sent_back_is_read_as_no_id(raw: bytes) -> None:
    """By the parser, as one with a NUL: the event itself is read and passed on as it came
    (its bytes, its data); by the hot path: not taken (the parser reads it)."""
    event = b"id: " + raw + b"\n" + PROGRESS + b"\n\n"
    assert not usable_event_id(raw)
    [frame] = SseParser().feed(event)
    assert frame.event_id is None and frame.raw == event and frame.has_data
    if event.isascii():
        assert hot_event(event, 0) is None
    pieces = SseParser()  # an id line cut across reads (a long line) reads alike
    cut = pieces.feed(event[: len(event) // 3]) + pieces.feed(event[len(event) // 3 :])
    assert [f.event_id for f in cut] == [None] and b"".join(cut[0].parts) == event


@pytest.mark.parametrize("raw", USABLE.values(), ids=USABLE.keys())
def test_an_id_that_can_be_sent_back_is_the_events_id(raw: bytes) -> None:
    event = b"id: " + raw + b"\n" + PROGRESS + b"\n\n"
    assert usable_event_id(raw)
    [frame] = SseParser().feed(event)
    assert frame.event_id == raw.decode()
    assert hot_event(event, 0) == (len(event), raw.decode())


def test_an_unusable_id_leaves_the_previous_id_of_its_event() -> None:
    [frame] = SseParser().feed(b"id: e1\nid: \x01\n" + PROGRESS + b"\n\n")
    assert frame.event_id == "e1"


@pytest.mark.parametrize("raw", UNUSABLE.values(), ids=UNUSABLE.keys())
def test_a_stream_resumes_from_its_last_usable_id_or_ends_without_a_cursor(
    engine: str, raw: bytes
) -> None:
    """Fed as the parser reads it, an event with an unusable id moves no cursor: the
    resume names the last usable id, and a stream that carried no other ends ``no-cursor``
    (one outcome) instead of resuming with a header no HTTP client can send."""
    [frame] = SseParser().feed(b"id: " + raw + b"\n" + PROGRESS + b"\n\n")
    guard = make_guard(engine)
    guard.feed(ev.SseEvent(POST, progress(), "e1"))
    guard.feed(ev.SseEvent(POST, progress(), frame.event_id))
    guard.feed(ev.StreamLost(POST, clean=False))
    assert of(guard.feed(ev.TimerFired(POST)), Resume) == [Resume(POST, "e1")]
    fresh = make_guard(engine)
    fresh.feed(ev.SseEvent(POST, progress(), frame.event_id))
    [fail] = of(fresh.feed(ev.StreamLost(POST, clean=False)), Fail)
    assert fail.error.reason == "no-cursor"
