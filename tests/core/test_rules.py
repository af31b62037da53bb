"""Every decision rule of the guard's contract (:mod:`fsm.sse.guard`), through the public API:
events in, actions out, with an injected fake clock. Each test runs on both engines."""

from __future__ import annotations

import core_support as cs
import pytest

from fsm import LIVE_MARKER, Guard, SubmissionResult
from fsm import events as ev
from fsm.actions import Complete, Fail, Ignore, Present, Resume, Submit, Wait, Withdraw
from fsm.errors import (
    GuardUsageError,
    RequestCancelledError,
    ResumeBudgetSpentError,
    SessionExpiredError,
    StaleRequestError,
)

KEY1 = (cs.SESSION, 1)
ANSWER = {"action": "accept", "content": {"confirm": False, "note": "only the logs"}}


def sse(
    data: object, event_id: str | None = None, *, stream: str = cs.POST, **kw: object
) -> ev.SseEvent:
    return ev.SseEvent(stream, data, event_id, **kw)  # type: ignore[arg-type]


def replay(data: object, event_id: str | None = None, *, stream: str = cs.POST) -> ev.SseEvent:
    return ev.SseEvent(stream, data, event_id, replayed=True)  # type: ignore[arg-type]


def present_one(guard: Guard, rid: object = 1, stream: str = cs.POST, eid: str = "e1") -> None:
    acts = guard.feed(sse(cs.elicit(rid), eid, stream=stream))
    assert [type(a) for a in acts] == [Present]


def presented_with_ttl(engine: str) -> tuple[Guard, cs.FakeClock]:
    """A guard whose requests live 1 s (``request_ttl_s``) on a fake clock, and the clock;
    request 1 presented on the POST stream."""
    clock = cs.FakeClock()
    guard = cs.make_guard(engine, clock, request_ttl_s=1.0)
    present_one(guard)
    return guard, clock


def submitted(guard: Guard, key: tuple[str, object] = KEY1) -> None:
    """Answer ``key`` and have the transport accept it."""
    acts = guard.feed(ev.UserAnswered(key, ANSWER))  # type: ignore[arg-type]
    assert acts == (Submit(key, ANSWER, 1, 0.0),)  # type: ignore[arg-type]
    assert guard.feed(ev.SubmissionOutcome(key, SubmissionResult(202))) == ()  # type: ignore[arg-type]
    assert guard.state_of(key) == "submitted"  # type: ignore[arg-type]


# ---------------------------------------------------------------- rule 1 and 2


def test_first_delivery_is_presented_once_with_its_deadline_recorded(engine: str) -> None:
    clock = cs.FakeClock(100.0)
    guard = cs.make_guard(
        engine, clock, request_ttl_s=30.0, ttl_by_method={"sampling/createMessage": 5.0}
    )
    acts = guard.feed(sse(cs.elicit(1), "e1"))
    assert acts == (Present(KEY1, "elicitation/create", cs.elicit(1)["params"]),)
    assert guard.state_of(KEY1) == "presented"
    sampling = {"jsonrpc": "2.0", "id": 2, "method": "sampling/createMessage", "params": {}}
    assert cs.of(guard.feed(sse(sampling, "g1", stream=cs.GET)), Present)
    # the deadlines are per request (30 s and 5 s), observable through the stale rule
    clock.now = 106.0
    assert cs.of(guard.feed(replay(sampling, "g1", stream=cs.GET)), Fail)
    assert guard.state_of((cs.SESSION, 2)) == "dead"
    assert guard.feed(replay(cs.elicit(1), "e1")) == (
        Ignore("duplicate-delivery", f"{KEY1!r} already presented", key=KEY1),
    )


def test_deadline_is_exact_replay_at_the_deadline_is_still_live(engine: str) -> None:
    clock = cs.FakeClock(0.0)
    guard = cs.make_guard(engine, clock, request_ttl_s=10.0)
    present_one(guard)
    clock.now = 10.0
    assert [a.reason for a in cs.of(guard.feed(replay(cs.elicit(1), "e1")), Ignore)] == [
        "duplicate-delivery"
    ]
    clock.now = 10.001
    assert cs.of(guard.feed(replay(cs.elicit(1), "e1")), Fail)


def test_duplicate_delivery_within_deadline_is_ignored(engine: str) -> None:
    clock = cs.FakeClock()
    guard = cs.make_guard(engine, clock)
    present_one(guard)
    clock.advance(5)
    for item in (sse(cs.elicit(1), "e9"), replay(cs.elicit(1), "e1"), replay(cs.elicit(1))):
        acts = guard.feed(item)
        assert not cs.of(acts, Present)
        assert [a.reason for a in cs.of(acts, Ignore)] == ["duplicate-delivery"]
    assert guard.state_of(KEY1) == "presented"


def test_fresh_duplicate_past_deadline_is_live_not_presented(engine: str) -> None:
    """A fresh (non-replayed) delivery asserts liveness (rule 5): not dead, not shown again."""
    guard, clock = presented_with_ttl(engine)
    clock.advance(100)
    acts = guard.feed(sse(cs.elicit(1), "e2", replayed=False))
    assert [a.reason for a in cs.of(acts, Ignore)] == ["duplicate-delivery"]
    assert guard.state_of(KEY1) == "presented"


# ---------------------------------------------------------------- rule 3: stale


@pytest.mark.parametrize("stream", [cs.POST, cs.GET])
def test_stale_replay_is_withdrawn_and_fails_with_evidence(engine: str, stream: str) -> None:
    clock = cs.FakeClock(0.0)
    guard = cs.make_guard(engine, clock, request_ttl_s=30.0)
    present_one(guard, stream=stream)
    clock.now = 41.5
    acts = guard.feed(replay(cs.elicit(1), "e1", stream=stream))
    assert [type(a) for a in acts] == [Withdraw, Fail]
    assert acts[0] == Withdraw(KEY1, "stale-request")
    fail = acts[1]
    assert isinstance(fail, Fail) and isinstance(fail.error, StaleRequestError)
    assert fail.error.key == KEY1 and fail.error.stream == stream
    assert fail.error.reason == "stale-request"
    assert fail.error.evidence == (
        "presented at t=0.0",
        "deadline t=30.0",
        f"replayed at t=41.5 on {stream} without liveness assertion",
    )
    # a POST stream fails as a whole (the origin needs the request); GET: the request's own
    assert fail.interaction == (cs.POST if stream == cs.POST else f"{cs.GET}#1")
    assert guard.state_of(KEY1) == "dead"
    for again in (
        replay(cs.elicit(1), "e1", stream=stream),
        sse(cs.elicit(1), "e5", stream=stream),
    ):
        later = guard.feed(again)
        assert not cs.of(later, Present) and not cs.of(later, Fail)


def test_stale_request_on_post_stream_kills_the_stream_no_resume(engine: str) -> None:
    guard, clock = presented_with_ttl(engine)
    clock.advance(2)
    guard.feed(replay(cs.elicit(1), "e1"))
    assert guard.stream_state(cs.POST) == "dead"
    assert [a.reason for a in cs.of(guard.feed(ev.StreamLost(cs.POST, clean=False)), Ignore)] == [
        "not-connected"
    ]
    assert not cs.of(guard.feed(ev.TimerFired(cs.POST)), Resume)


def test_replay_past_deadline_with_live_marker_is_not_dead(engine: str) -> None:
    clock = cs.FakeClock()
    # the marker is part of params, so the first delivery carries it too
    guard = cs.make_guard(engine, clock, request_ttl_s=1.0)
    first = cs.elicit(1, meta={LIVE_MARKER: True})
    assert cs.of(guard.feed(sse(first, "e1")), Present)
    clock.advance(50)
    acts = guard.feed(replay(first, "e1"))
    assert [a.reason for a in cs.of(acts, Ignore)] == ["duplicate-delivery"]
    assert not cs.of(acts, Fail) and not cs.of(acts, Present)
    assert guard.state_of(KEY1) == "presented"
    # the marker must be exactly True: a truthy string is not an assertion
    guard3 = cs.make_guard(engine, clock, request_ttl_s=1.0)
    weak = cs.elicit(1, meta={LIVE_MARKER: "yes"})
    assert cs.of(guard3.feed(sse(weak, "e1")), Present)
    clock.advance(50)
    assert cs.of(guard3.feed(replay(weak, "e1")), Fail)


def test_liveness_asserted_event_keeps_a_replayed_request_alive(engine: str) -> None:
    guard, clock = presented_with_ttl(engine)
    assert guard.feed(ev.LivenessAsserted(KEY1)) == ()
    clock.advance(50)
    acts = guard.feed(replay(cs.elicit(1), "e1"))
    assert not cs.of(acts, Fail) and not cs.of(acts, Present)
    assert guard.state_of(KEY1) == "presented"


def test_request_cancelled_later_in_same_batch_is_never_presented(engine: str) -> None:
    guard = cs.make_guard(engine)
    batch = ev.ReplayBatch(
        cs.POST,
        (
            sse(cs.elicit(1), "e1"),
            sse(cs.progress(), "e2"),
            sse(cs.cancel(1), "e3"),
            sse(cs.elicit(2), "e4"),
        ),
    )
    acts = guard.feed(batch)
    assert [p.key for p in cs.of(acts, Present)] == [(cs.SESSION, 2)]
    assert (
        Ignore("cancelled-later-in-batch", "cancelled later in the same replay", key=KEY1) in acts
    )
    assert guard.state_of(KEY1) == "cancelled"
    assert not cs.of(acts, Fail) and not cs.of(acts, Withdraw)
    assert guard.stream_state(cs.POST) == "open"
    assert guard.cursor(cs.POST) == "e4"


def test_cancel_earlier_in_batch_does_not_suppress_a_later_request(engine: str) -> None:
    guard = cs.make_guard(engine)
    acts = guard.feed(ev.ReplayBatch(cs.POST, (sse(cs.cancel(1), "e1"), sse(cs.elicit(1), "e2"))))
    assert [p.key for p in cs.of(acts, Present)] == [KEY1]


def test_one_stale_request_in_a_batch_does_not_drop_the_others(engine: str) -> None:
    clock = cs.FakeClock()
    guard = cs.make_guard(engine, clock, request_ttl_s=1.0)
    present_one(guard, rid=1, stream=cs.GET, eid="g1")
    clock.advance(10)
    batch = ev.ReplayBatch(
        cs.GET,
        (
            sse(cs.elicit(1), "g1", stream=cs.GET),
            sse(cs.elicit(2), "g2", stream=cs.GET),
            sse(cs.progress(), "g3", stream=cs.GET),
            sse(cs.elicit(3), "g4", stream=cs.GET),
        ),
    )
    acts = guard.feed(batch)
    assert [type(a) for a in acts] == [Withdraw, Fail, Present, Present]
    assert [p.key for p in cs.of(acts, Present)] == [(cs.SESSION, 2), (cs.SESSION, 3)]
    assert guard.cursor(cs.GET) == "g4"
    assert guard.stream_state(cs.GET) == "open"


# ---------------------------------------------------------------- rule 2: resubmission


def test_submitted_and_replayed_without_assertion_is_neither_dead_nor_resubmitted(
    engine: str,
) -> None:
    guard, clock = presented_with_ttl(engine)
    submitted(guard)
    clock.advance(100)
    acts = guard.feed(replay(cs.elicit(1), "e1"))
    assert [a.reason for a in cs.of(acts, Ignore)] == ["duplicate-delivery"]
    assert not cs.of(acts, Submit) and not cs.of(acts, Present) and not cs.of(acts, Fail)
    assert guard.state_of(KEY1) == "submitted"


def test_submitted_and_redelivered_with_assertion_resubmits_stored_answer(engine: str) -> None:
    guard, clock = presented_with_ttl(engine)
    submitted(guard)
    clock.advance(100)
    assert guard.feed(ev.LivenessAsserted(KEY1)) == ()
    acts = guard.feed(replay(cs.elicit(1), "e1"))
    assert acts == (Submit(KEY1, ANSWER, 2, 0.0),)
    assert acts[0].answer == ANSWER
    assert guard.state_of(KEY1) == "submitting"


def test_fresh_redelivery_of_submitted_request_resubmits_never_presents(engine: str) -> None:
    guard = cs.make_guard(engine)
    present_one(guard)
    submitted(guard)
    acts = guard.feed(sse(cs.elicit(1), "e2", replayed=False))
    assert acts == (Submit(KEY1, ANSWER, 2, 0.0),)


def test_resubmissions_are_bounded(engine: str) -> None:
    guard = cs.make_guard(engine, max_submit_attempts=2)
    present_one(guard)
    submitted(guard)
    assert cs.of(guard.feed(sse(cs.elicit(1), "e2", replayed=False)), Submit)
    guard.feed(ev.SubmissionOutcome(KEY1, SubmissionResult(202)))
    acts = guard.feed(sse(cs.elicit(1), "e3", replayed=False))
    assert not cs.of(acts, Submit) and not cs.of(acts, Present)


def test_answer_is_submitted_for_the_key_the_user_answered(engine: str) -> None:
    guard = cs.make_guard(engine)
    present_one(guard, rid=1, eid="e1")
    present_one(guard, rid=2, eid="e2")
    acts = guard.feed(ev.UserAnswered((cs.SESSION, 2), {"action": "decline"}))
    assert acts == (Submit((cs.SESSION, 2), {"action": "decline"}, 1, 0.0),)
    assert guard.state_of(KEY1) == "presented"
    assert [
        a.reason for a in cs.of(guard.feed(ev.UserAnswered((cs.SESSION, 2), ANSWER)), Ignore)
    ] == ["already-answered"]


# ---------------------------------------------------------------- cancellation


def test_cancel_on_post_stream_withdraws_but_origin_continues(engine: str) -> None:
    guard = cs.make_guard(engine)
    present_one(guard)
    acts = guard.feed(sse(cs.cancel(1, "deadline"), "e2"))
    assert acts == (Withdraw(KEY1, "cancelled"),)
    assert guard.state_of(KEY1) == "cancelled"
    assert guard.stream_state(cs.POST) == "open"
    assert guard.feed(sse(cs.response(cs.ORIGIN), "e3")) == (Complete(cs.POST),)


def test_cancel_on_get_stream_fails_the_request_interaction_once(engine: str) -> None:
    guard = cs.make_guard(engine)
    present_one(guard, stream=cs.GET, eid="g1")
    acts = guard.feed(sse(cs.cancel(1, "deadline"), "g2", stream=cs.GET))
    assert [type(a) for a in acts] == [Withdraw, Fail]
    fail = acts[1]
    assert isinstance(fail, Fail) and isinstance(fail.error, RequestCancelledError)
    assert fail.interaction == f"{cs.GET}#1"
    assert "deadline" in str(fail.error)
    assert guard.stream_state(cs.GET) == "open"
    again = guard.feed(sse(cs.cancel(1), "g3", stream=cs.GET))
    assert [a.reason for a in cs.of(again, Ignore)] == ["cancel-terminal-request"]
    assert not cs.of(again, Fail)


# ---------------------------------------------------------------- origin response


@pytest.mark.parametrize("via", ["sse", "out-of-band"])
def test_origin_response_completes_once_and_withdraws_presented_requests(
    engine: str, via: str
) -> None:
    guard = cs.make_guard(engine)
    present_one(guard, rid=1, eid="e1")
    present_one(guard, rid=2, eid="e2")
    submitted(guard, (cs.SESSION, 2))
    event = sse(cs.response(cs.ORIGIN), "e3") if via == "sse" else ev.OriginResponse(cs.POST)
    acts = guard.feed(event)
    assert set(cs.of(acts, Withdraw)) == {Withdraw(KEY1, "complete")}
    assert cs.of(acts, Complete) == [Complete(cs.POST)]
    assert not cs.of(acts, Fail)
    assert guard.state_of(KEY1) == "dead"
    assert guard.state_of((cs.SESSION, 2)) == "resolved"
    assert guard.stream_state(cs.POST) == "done"
    for again in (ev.OriginResponse(cs.POST), sse(cs.response(cs.ORIGIN), "e4")):
        assert not cs.of(guard.feed(again), Complete)


# ---------------------------------------------------------------- session expiry


def _busy_guard(engine: str) -> Guard:
    guard = cs.make_guard(engine, streams=((cs.POST, cs.ORIGIN), (cs.GET, None), ("post:8", 8)))
    present_one(guard, rid=1, stream=cs.POST, eid="e1")
    present_one(guard, rid=2, stream=cs.GET, eid="g1")
    present_one(guard, rid=3, stream="post:8", eid="f1")
    submitted(guard, (cs.SESSION, 3))
    acts = guard.feed(ev.UserAnswered(KEY1, ANSWER))
    assert cs.of(acts, Submit)
    return guard


def _expire_via(guard: Guard, how: str) -> tuple[object, ...]:
    if how == "event":
        return guard.feed(ev.SessionExpired())
    if how == "submission-404":
        return guard.feed(ev.SubmissionOutcome(KEY1, SubmissionResult(404)))
    assert guard.feed(ev.StreamLost("post:8", clean=False)) != ()
    assert cs.of(guard.feed(ev.TimerFired("post:8")), Resume)
    return guard.feed(ev.ResumeRefused("post:8", status=404))


@pytest.mark.parametrize("how", ["event", "submission-404", "resume-404"])
def test_session_expiry_ends_everything_once(engine: str, how: str) -> None:
    guard = _busy_guard(engine)
    guard.feed(sse(cs.progress(), "f2", stream="post:8"))  # a cursor for the resume path
    acts = _expire_via(guard, how)
    fails = cs.of(acts, Fail)
    assert sorted(f.interaction for f in fails) == sorted(
        [cs.POST, cs.GET, f"{cs.GET}#2", "post:8"]
    )
    assert all(isinstance(f.error, SessionExpiredError) for f in fails)
    assert cs.of(acts, Withdraw) == [Withdraw((cs.SESSION, 2), "session-expired")]
    assert not cs.of(acts, Complete)
    for sid in (cs.POST, cs.GET, "post:8"):
        assert guard.stream_state(sid) == "dead"
    for rid in (1, 2, 3):
        assert guard.state_of((cs.SESSION, rid)) == "dead"
    assert guard.tracked()[0] == 0
    # nothing afterwards: no resume, no second outcome
    later = [
        *guard.feed(ev.SessionExpired()),
        *guard.feed(ev.TimerFired("post:8")),
        *guard.feed(ev.SubmissionOutcome(KEY1, SubmissionResult(500))),
        *guard.feed(sse(cs.elicit(9), "e9")),
    ]
    assert not cs.of(later, Resume) and not cs.of(later, Fail) and not cs.of(later, Present)
    assert not cs.of(later, Submit)


# ---------------------------------------------------------------- resumption


def test_stream_lost_waits_then_resumes_with_newest_cursor(engine: str) -> None:
    guard = cs.make_guard(engine, backoff_initial_s=0.5)
    guard.feed(sse(cs.progress(), "e1"))
    guard.feed(sse(cs.progress(), "e2"))
    assert guard.feed(ev.StreamLost(cs.POST, clean=True)) == (Wait(cs.POST, 0.5),)
    assert guard.stream_state(cs.POST) == "waiting"
    assert guard.feed(ev.TimerFired(cs.POST)) == (Resume(cs.POST, "e2"),)
    assert guard.feed(ev.StreamResumed(cs.POST)) == ()
    # the server replays e1 (older, seen) then a new e3: cursor is e3, never back to e1
    acts = guard.feed(sse(cs.progress(), "e1"))
    assert [a.reason for a in cs.of(acts, Ignore)] == ["duplicate-event"]
    assert guard.cursor(cs.POST) == "e2"
    guard.feed(sse(cs.progress(), "e3"))
    guard.feed(sse(cs.progress(), "e2"))
    assert guard.cursor(cs.POST) == "e3"
    guard.feed(ev.StreamLost(cs.POST, clean=False))
    assert guard.feed(ev.TimerFired(cs.POST)) == (Resume(cs.POST, "e3"),)


def test_retry_field_sets_the_wait(engine: str) -> None:
    guard = cs.make_guard(engine, backoff_initial_s=5.0)
    guard.feed(sse(None, "e1", retry_ms=1500))
    assert guard.cursor(cs.POST) == "e1"
    assert guard.feed(ev.StreamLost(cs.POST, clean=False)) == (Wait(cs.POST, 1.5),)


def test_backoff_grows_without_retry_field(engine: str) -> None:
    guard = cs.make_guard(
        engine, backoff_initial_s=1.0, backoff_factor=2.0, max_resumes_without_progress=5
    )
    guard.feed(sse(cs.progress(), "e1"))
    waits = []
    acts = guard.feed(ev.StreamLost(cs.POST, clean=False))
    for _ in range(3):
        waits += [a.delay_s for a in cs.of(acts, Wait)]
        guard.feed(ev.TimerFired(cs.POST))
        acts = guard.feed(ev.ResumeRefused(cs.POST, status=503))
    waits += [a.delay_s for a in cs.of(acts, Wait)]
    assert waits == [1.0, 2.0, 4.0, 8.0]


def _lose_and_retry(guard: Guard) -> list[object]:
    """Resume until the guard stops asking; return every action."""
    out: list[object] = list(guard.feed(ev.StreamLost(cs.POST, clean=False)))
    for _ in range(20):
        if not cs.of(out[-1:], Wait):
            break
        out += guard.feed(ev.TimerFired(cs.POST))
        out += guard.feed(ev.ResumeRefused(cs.POST, error="ConnectError"))
    return out


def test_resume_budget_without_progress_fails(engine: str) -> None:
    guard = cs.make_guard(engine, max_resumes_without_progress=3)
    guard.feed(sse(cs.progress(), "e1"))
    acts = _lose_and_retry(guard)
    assert len(cs.of(acts, Resume)) == 3
    assert all(r == Resume(cs.POST, "e1") for r in cs.of(acts, Resume))
    fails = cs.of(acts, Fail)
    assert len(fails) == 1 and isinstance(fails[0].error, ResumeBudgetSpentError)
    assert fails[0].error.reason == "resume-budget-spent"
    assert guard.stream_state(cs.POST) == "dead"


PROGRESS_PATHS = {
    "feed": lambda guard, event_id: guard.feed(sse(cs.progress(), event_id)),
    "on_event": lambda guard, event_id: guard.on_event(cs.POST, event_id, cs.progress()),
    "on_plain_notification": lambda guard, event_id: guard.on_plain_notification(cs.POST, event_id),
}
"""The three ways a progress notification reaches the guard (the last two are hot paths)."""


@pytest.mark.parametrize("path", sorted(PROGRESS_PATHS))
def test_progress_resets_the_resume_budget(engine: str, path: str) -> None:
    deliver = PROGRESS_PATHS[path]
    guard = cs.make_guard(engine, max_resumes_without_progress=2)
    guard.feed(sse(cs.progress(), "e0"))
    for i in range(1, 6):  # five outages, each followed by progress: never gives up
        guard.feed(ev.StreamLost(cs.POST, clean=False))
        guard.feed(ev.TimerFired(cs.POST))
        guard.feed(ev.ResumeRefused(cs.POST, status=502))
        assert guard.feed(ev.TimerFired(cs.POST)) == (Resume(cs.POST, f"e{i - 1}"),)
        guard.feed(ev.StreamResumed(cs.POST))
        assert deliver(guard, f"e{i}") == ()
    assert guard.stream_state(cs.POST) == "open"
    # a replayed (already seen) id is not progress
    guard.feed(ev.StreamLost(cs.POST, clean=False))
    guard.feed(ev.TimerFired(cs.POST))
    guard.feed(ev.StreamResumed(cs.POST))
    guard.feed(sse(cs.progress(), "e5"))
    guard.feed(ev.StreamLost(cs.POST, clean=False))
    guard.feed(ev.TimerFired(cs.POST))
    guard.feed(ev.StreamResumed(cs.POST))
    guard.feed(sse(cs.progress(), "e4"))
    fails = cs.of(guard.feed(ev.StreamLost(cs.POST, clean=False)), Fail)
    assert len(fails) == 1 and fails[0].error.reason == "resume-budget-spent"


def test_no_cursor_fails_immediately(engine: str) -> None:
    guard = cs.make_guard(engine)
    guard.feed(sse(cs.progress()))  # an event without id gives no cursor
    acts = guard.feed(ev.StreamLost(cs.POST, clean=True))
    assert [type(a) for a in acts] == [Fail]
    assert isinstance(acts[0].error, ResumeBudgetSpentError)  # type: ignore[union-attr]
    assert acts[0].error.reason == "no-cursor"  # type: ignore[union-attr]
    assert guard.stream_state(cs.POST) == "dead"


@pytest.mark.parametrize("status", [405, 400, 406, 410, 403])
def test_resume_refused_as_unsupported_is_not_resumable(engine: str, status: int) -> None:
    guard = cs.make_guard(engine)
    guard.feed(sse(cs.progress(), "e1"))
    guard.feed(ev.StreamLost(cs.POST, clean=False))
    guard.feed(ev.TimerFired(cs.POST))
    acts = guard.feed(ev.ResumeRefused(cs.POST, status=status))
    assert [type(a) for a in acts] == [Fail]
    assert acts[0].error.reason == "not-resumable"  # type: ignore[union-attr]
    assert guard.stream_state(cs.POST) == "dead"
    assert not cs.of(guard.feed(ev.TimerFired(cs.POST)), Resume)


@pytest.mark.parametrize(
    ("status", "error", "retry_after", "delay"),
    [
        (429, None, None, None),
        (500, None, 7.0, 7.0),
        (503, None, None, None),
        (None, "ConnectError", None, None),
    ],
)
def test_resume_refused_transiently_waits_within_the_budget(
    engine: str,
    status: int | None,
    error: str | None,
    retry_after: float | None,
    delay: float | None,
) -> None:
    guard = cs.make_guard(engine, max_resumes_without_progress=2)
    guard.feed(sse(cs.progress(), "e1"))
    guard.feed(ev.StreamLost(cs.POST, clean=False))
    guard.feed(ev.TimerFired(cs.POST))
    refused = ev.ResumeRefused(cs.POST, status=status, error=error, retry_after=retry_after)
    waits = cs.of(guard.feed(refused), Wait)
    assert len(waits) == 1 and guard.stream_state(cs.POST) == "waiting"
    if delay is not None:
        assert waits[0].delay_s == delay
    assert cs.of(guard.feed(ev.TimerFired(cs.POST)), Resume) == [Resume(cs.POST, "e1")]
    # the budget still bounds it: a second refusal without progress ends the stream
    fails = cs.of(guard.feed(refused), Fail)
    assert len(fails) == 1 and fails[0].error.reason == "resume-budget-spent"


def test_dead_stream_orphans_its_presented_requests(engine: str) -> None:
    guard = cs.make_guard(engine, max_resumes_without_progress=1)
    present_one(guard)
    acts = _lose_and_retry(guard)
    assert {type(a) for a in acts[-2:]} == {Fail, Withdraw}
    assert cs.of(acts, Withdraw) == [Withdraw(KEY1, "resume-budget-spent")]
    assert guard.state_of(KEY1) == "dead"
    assert len(cs.of(acts, Fail)) == 1


# ---------------------------------------------------------------- usage errors


def test_answer_for_unknown_key_raises_usage_error_state_unchanged(engine: str) -> None:
    guard = cs.make_guard(engine)
    present_one(guard)
    before = guard.snapshot()
    with pytest.raises(GuardUsageError):
        guard.feed(ev.UserAnswered((cs.SESSION, 99), ANSWER))
    with pytest.raises(GuardUsageError):
        guard.feed(ev.UserAnswered(("other-session", 1), ANSWER))
    with pytest.raises(GuardUsageError):
        guard.feed(ev.UserAnswered(KEY1, ["not", "an", "object"]))  # type: ignore[arg-type]
    with pytest.raises(GuardUsageError):
        guard.feed(ev.TimerFired("never-opened"))
    with pytest.raises(GuardUsageError):
        guard.feed(ev.StreamOpened(cs.POST, cs.ORIGIN))  # already open
    with pytest.raises(GuardUsageError):
        guard.feed("not an event")  # type: ignore[arg-type]
    assert guard.snapshot() == before
    assert guard.state_of(KEY1) == "presented"


def test_snapshot_restore_round_trip_decides_identically(engine: str) -> None:
    guard, clock = presented_with_ttl(engine)
    present_one(guard, rid=2, eid="e2")
    submitted(guard, (cs.SESSION, 2))
    twin = Guard(clock=clock, config=guard.config, engine=engine)  # type: ignore[arg-type]
    twin.restore(guard.snapshot())
    assert twin.snapshot() == guard.snapshot()
    assert twin.tracked() == guard.tracked()
    clock.advance(5)
    assert (
        twin.feed(replay(cs.elicit(1), "e1")).__repr__()
        == guard.feed(replay(cs.elicit(1), "e1")).__repr__()
    )


def test_cursor_never_moves_back_even_after_its_id_left_the_seen_window(engine: str) -> None:
    guard = cs.make_guard(engine, max_seen_event_ids=2)
    for i in (1, 2, 3):
        guard.feed(sse(cs.progress(), f"e{i}"))
    guard.feed(ev.StreamLost(cs.POST, clean=False))
    assert guard.feed(ev.TimerFired(cs.POST)) == (Resume(cs.POST, "e3"),)
    guard.feed(ev.StreamResumed(cs.POST))
    guard.feed(sse(cs.progress(), "e1"))  # a server replaying from too far back
    assert guard.cursor(cs.POST) == "e3"


def test_live_marker_added_on_replay_only_is_honoured(engine: str) -> None:
    guard, clock = presented_with_ttl(engine)
    clock.advance(50)
    acts = guard.feed(replay(cs.elicit(1, meta={LIVE_MARKER: True}), "e1"))
    assert [a.reason for a in cs.of(acts, Ignore)] == ["duplicate-delivery"]
