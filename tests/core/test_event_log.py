"""An observed guard's event log: records in time order, each with its wall-clock time, a
versioned schema, a stream the session closed recorded as ``closed`` (not a failure),
and a public way to log a bare ``Guard``."""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime

import pytest
from core_support import SESSION, elicit, response

import fsm
from fsm import Guard, trace
from fsm import actions as act
from fsm import events as ev
from fsm import properties as P
from fsm.audit import audit_text
from fsm.errors import StreamAbandonedError
from fsm.outcomes import SubmissionResult
from fsm.sse.observe import ObservedGuard, did

START = 1_750_000_000.0
"""The wall clock when the log begins (2025-06-15T15:06:40Z)."""


class Ticking:
    """A clock that moves on every reading (as a real monotonic clock does)."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        self.now += 0.125
        return self.now


def _call(og: ObservedGuard) -> None:
    """A tool call whose stream carries one question: presented, answered, completed."""
    og.feed(ev.SessionStarted(SESSION))
    og.feed(ev.StreamOpened("post:1", origin=1))
    og.feed(ev.SseEvent("post:1", elicit(1), "e1"))
    og.feed(ev.UserAnswered((SESSION, 1), {"action": "accept"}))
    og.feed(ev.SubmissionOutcome((SESSION, 1), SubmissionResult(202)))
    og.feed(ev.SseEvent("post:1", response(1), "e2"))


def _records(text: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in text.splitlines()]


def test_records_are_in_time_order() -> None:
    """What one event told the client and what the client did are each stamped with one
    reading: a delivery is not stamped earlier than the event id seen before it."""
    seen: list[float] = []
    og = ObservedGuard(Guard(clock=Ticking()), on_observation=lambda o, t: seen.append(t))
    _call(og)
    records = [trace.to_record(obs, t) for obs, t in og.log]
    kinds = [r["kind"] for r in records]
    assert kinds[:5] == ["session_began", "began", "event_seen", "delivered", "presented"]
    stamps = [r["t"] for r in records]
    assert stamps == sorted(stamps), list(zip(kinds, stamps, strict=True))
    assert seen == [t for _, t in og.log] == sorted(seen)


def test_every_record_carries_its_wall_clock_time() -> None:
    og = ObservedGuard(Guard(clock=Ticking()), wall_clock=lambda: START)
    _call(og)
    header, *records = _records(og.event_log())
    assert header == {
        "kind": "header",
        "schema": "dead-or-resumable/trace/2",
        "t": og.timebase.t0,
        "wall": "2025-06-15T15:06:40.000000Z",
    }
    assert len(records) == len(og.log) > 5
    for record in records:
        wall = datetime.fromisoformat(str(record["wall"]).replace("Z", "+00:00"))
        assert wall.tzinfo == UTC
        elapsed = float(record["t"]) - og.timebase.t0  # type: ignore[arg-type]
        assert abs(wall.timestamp() - (START + elapsed)) < 1e-6
    walls = [r["wall"] for r in records]
    assert walls == sorted(walls)  # fixed-width ISO 8601: text order is time order


def test_a_bare_guard_logs_to_a_sink_as_it_happens() -> None:
    assert "ObservedGuard" in fsm.__all__ and fsm.ObservedGuard is ObservedGuard
    sink = io.StringIO()
    og = ObservedGuard(Guard(clock=Ticking()), sink=sink)
    assert _records(sink.getvalue())[0]["schema"] == trace.SCHEMA  # the header comes first
    _call(og)
    assert sink.getvalue() == og.event_log()
    result = audit_text(sink.getvalue(), complete=True)
    assert result.ok and result.records == len(og.log)


def test_a_kept_log_past_its_limit_keeps_the_newest_and_the_sink_all() -> None:
    sink = io.StringIO()
    og = ObservedGuard(Guard(clock=Ticking()), sink=sink, log_limit=3)
    _call(og)
    assert len(_records(og.event_log())) == 1 + 3
    assert _records(og.event_log())[1:] == _records(sink.getvalue())[-3:]


def test_a_stream_the_session_closed_ends_closed_not_failed() -> None:
    og = ObservedGuard(Guard(clock=Ticking()))
    og.feed(ev.SessionStarted(SESSION))
    og.feed(ev.StreamOpened("get"))
    (fail,) = og.feed(ev.StreamAbandoned("get", ev.SESSION_CLOSED, "the client closed it"))
    assert isinstance(fail, act.Fail) and isinstance(fail.error, StreamAbandonedError)
    ended = [o for o, _ in og.log if isinstance(o, P.Ended)]
    assert ended == [P.Ended("get", "closed", "session-closed")]
    assert og.violations == []

    # any other abandonment is a failure
    other = StreamAbandonedError("gone", stream="get", reason="abandoned")
    assert did(act.Fail("get", other), now=0.0) == [P.Ended("get", "failed", "abandoned")]


def test_the_audit_reads_a_closed_end_as_an_end() -> None:
    og = ObservedGuard(Guard(clock=Ticking()))
    og.feed(ev.SessionStarted(SESSION))
    og.feed(ev.StreamOpened("get"))
    og.feed(ev.SseEvent("get", None, "g1"))
    og.feed(ev.StreamAbandoned("get", ev.SESSION_CLOSED))
    text = og.event_log()
    assert audit_text(text, complete=True).ok

    resumed = trace.record_line(P.Resumed("get", "g1"), 1000.0)
    late = audit_text(text + resumed + "\n")  # a closed stream is not resumed
    assert late.finding is not None and late.finding.name == "M"
    again = trace.record_line(P.Ended("get", "closed", "session-closed"), 1000.0)
    twice = audit_text(text + again + "\n")  # nor does it end twice
    assert twice.finding is not None and twice.finding.name == "P5"


def test_the_schema_is_versioned_and_older_logs_still_read() -> None:
    record = '{"kind": "began", "interaction": "post:1", "t": 1.5}'
    for schema in ("dead-or-resumable/trace/1", "dead-or-resumable/trace/2"):
        text = f'{{"kind": "header", "schema": "{schema}"}}\n{record}\n'
        assert [(n, o, t) for n, o, t in trace.loads(text)] == [(2, P.Began("post:1"), 1.5)]
    assert trace.SCHEMA in trace.SCHEMAS
    for bad in ('"dead-or-resumable/trace/99"', '["dead-or-resumable/trace/2"]'):
        with pytest.raises(trace.TraceFormatError, match="unknown schema") as caught:
            list(trace.loads(f'{{"kind": "header", "schema": {bad}}}\n{record}\n'))
        assert caught.value.line == 1
    with pytest.raises(trace.TraceFormatError, match="wall must be a string"):
        list(trace.loads('{"kind": "began", "interaction": "post:1", "t": 1, "wall": 1}'))


def test_a_wall_time_out_of_range_is_clamped() -> None:
    timebase = trace.Timebase(0.0, 0.0)
    assert timebase.wall(1.5) == "1970-01-01T00:00:01.500000Z"
    assert timebase.wall(1e300) == "9999-12-31T23:59:59.999999Z"
    assert timebase.wall(-1e300) == timebase.wall(float("nan")) == "0001-01-01T00:00:00.000000Z"


def test_an_answer_the_guard_ignores_is_not_the_answer_it_submits() -> None:
    """The guard acts on the first answer to a request and ignores a later one
    (``already-answered``): resubmitting the first after a failed POST is no P4, because
    the later answer is not logged as the user's answer for the request. Found by the
    hostile fuzz test."""
    og = ObservedGuard(Guard(clock=lambda: 0.0))
    og.guard.feed(ev.SessionStarted(SESSION))
    og.feed(ev.StreamOpened("post:1", 7))
    og.feed(ev.SseEvent("post:1", elicit(1), "e1"))
    key = (SESSION, 1)
    accept = {"action": "accept", "content": {"confirm": True}}
    assert any(isinstance(a, act.Submit) for a in og.feed(ev.UserAnswered(key, accept)))
    (ignored,) = og.feed(ev.UserAnswered(key, {"action": "decline"}))
    assert isinstance(ignored, act.Ignore) and ignored.reason == "already-answered"
    again = og.feed(ev.SubmissionOutcome(key, SubmissionResult(status=None)))
    assert [a.answer for a in again if isinstance(a, act.Submit)] == [accept]
    assert og.violations == []
    assert [o.answer for o, _ in og.log if isinstance(o, P.Answered)] == [accept]
