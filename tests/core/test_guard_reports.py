"""What the guard's actions tell the client beyond the decision: every ``Ignore`` names
the request or stream it concerns and says why, and every ``Fail`` carries a stable
reason, the key it concerns and the evidence it was decided on (what an embedding client
logs and shows the user)."""

from __future__ import annotations

from typing import Any

import pytest
from core_support import GET, POST, SESSION, cancel, elicit, make_guard, progress

from fsm import SubmissionResult
from fsm import events as ev
from fsm.actions import Fail, Ignore, Resume, Wait
from fsm.errors import (
    GuardUsageError,
    RequestCancelledError,
    ResumeBudgetSpentError,
    SessionExpiredError,
)

K1, K99 = (SESSION, 1), (SESSION, 99)


@pytest.mark.parametrize(
    ("event", "reason", "key", "stream"),
    [
        (ev.SseEvent(POST, cancel(99), "e9"), "cancel-unknown-request", K99, None),
        (ev.LivenessAsserted(K99), "assertion-unknown-request", K99, None),
        (ev.StreamResumed(POST), "no-resume-pending", None, POST),
        (ev.ResumeRefused(POST, status=503), "no-resume-pending", None, POST),
        (ev.OriginResponse(GET), "no-origin-pending", None, GET),
    ],
    ids=["cancel-unknown", "assert-unknown", "resumed", "refused", "origin-response"],
)
def test_an_ignore_names_what_it_concerns_and_says_why(
    engine: str, event: Any, reason: str, key: Any, stream: str | None
) -> None:
    guard = make_guard(engine)
    (ignored,) = guard.feed(event)
    assert isinstance(ignored, Ignore)
    assert (ignored.reason, ignored.key, ignored.stream) == (reason, key, stream)
    assert (repr(key) if key else str(stream)) in ignored.detail


def test_a_cancel_of_a_request_already_ended_names_it(engine: str) -> None:
    guard = make_guard(engine)
    guard.feed(ev.SseEvent(POST, elicit(1), "e1"))
    guard.feed(ev.SseEvent(POST, cancel(1), "e2"))
    assert guard.feed(ev.SseEvent(POST, cancel(1), "e3")) == (
        Ignore("cancel-terminal-request", f"{K1!r} is cancelled", key=K1),
    )


def test_a_cancelled_request_without_origin_fails_naming_its_key(engine: str) -> None:
    guard = make_guard(engine)
    guard.feed(ev.SseEvent(GET, elicit(1), "g1"))
    fails = [
        a for a in guard.feed(ev.SseEvent(GET, cancel(1, "user left"), "g2")) if isinstance(a, Fail)
    ]
    assert len(fails) == 1
    error = fails[0].error
    assert isinstance(error, RequestCancelledError) and error.key == K1
    assert "user left" in str(error)


def _lose_and_refuse(guard: Any, status: int) -> tuple[Any, ...]:
    guard.feed(ev.SseEvent(POST, progress(), "e1"))
    guard.feed(ev.StreamLost(POST, clean=False))
    assert guard.feed(ev.TimerFired(POST)) == (Resume(POST, "e1"),)
    return tuple(guard.feed(ev.ResumeRefused(POST, status=status)))


def test_an_unresumable_stream_fails_with_the_servers_answer_as_evidence(engine: str) -> None:
    (fail,) = [a for a in _lose_and_refuse(make_guard(engine), 405) if isinstance(a, Fail)]
    error = fail.error
    assert isinstance(error, ResumeBudgetSpentError) and error.reason == "not-resumable"
    assert "resume GET -> HTTP 405" in str(error) and "cannot be resumed" in str(error)
    assert any("HTTP 405" in line for line in error.evidence)


def test_a_transient_resume_failure_that_spends_the_budget_says_what_came_back(
    engine: str,
) -> None:
    guard = make_guard(engine, max_resumes_without_progress=1)
    (fail,) = [a for a in _lose_and_refuse(guard, 503) if isinstance(a, Fail)]
    assert fail.error.reason == "resume-budget-spent"
    assert "resume GET -> HTTP 503" in str(fail.error)


def test_a_session_gone_on_a_resume_names_the_404(engine: str) -> None:
    guard = make_guard(engine)
    acts = _lose_and_refuse(guard, 404)
    errors = [a.error for a in acts if isinstance(a, Fail)]
    assert errors and all(isinstance(e, SessionExpiredError) for e in errors)
    assert all("resume GET -> HTTP 404" in str(e) for e in errors)


def test_session_expiry_is_reported_and_later_requests_are_not_presented(engine: str) -> None:
    guard = make_guard(engine)
    guard.feed(ev.SseEvent(POST, elicit(1), "e1"))
    fails = [a for a in guard.feed(ev.SessionExpired()) if isinstance(a, Fail)]
    assert fails and all("(HTTP 404 on the session)" in str(a.error) for a in fails)
    assert guard.expired
    guard.feed(ev.StreamOpened("post:8", 8))
    assert guard.feed(ev.SseEvent("post:8", elicit(2), "f1")) == (
        Ignore(
            "session-expired",
            f"{(SESSION, 2)!r} arrived after the session expired",
            key=(SESSION, 2),
        ),
    )


def test_a_stream_that_never_carried_an_event_id_fails_saying_so(engine: str) -> None:
    guard = make_guard(engine)
    (fail,) = [a for a in guard.feed(ev.StreamLost(POST, clean=False)) if isinstance(a, Fail)]
    assert fail.error.reason == "no-cursor"
    assert "abrupt cut" in str(fail.error) and "nothing to resume from" in str(fail.error)
    assert fail.error.evidence == ("abrupt cut", "no event id seen")


def test_a_full_history_ends_the_stream_with_its_own_reason(engine: str) -> None:
    guard = make_guard(engine, max_seen_event_ids=1, max_event_history=1)
    for n in range(3):
        guard.feed(ev.SseEvent(POST, progress(), f"e{n}"))
    (fail,) = [a for a in guard.feed(ev.StreamLost(POST, clean=True)) if isinstance(a, Fail)]
    assert fail.error.reason == "history-full"
    assert "could not be told from new events" in str(fail.error)
    assert fail.error.evidence == (
        "clean close",
        "max_seen_event_ids=1",
        "max_event_history=1",
    )


@pytest.mark.parametrize("cap", [1, 2, 3])
def test_a_stream_is_resumed_at_most_max_resumes_per_stream_times(engine: str, cap: int) -> None:
    guard = make_guard(engine, max_resumes_per_stream=cap)
    resumes = 0
    for n in range(10):
        guard.feed(ev.SseEvent(POST, progress(), f"e{n}"))  # progress every time
        acts = guard.feed(ev.StreamLost(POST, clean=False))
        if any(isinstance(a, Fail) for a in acts):
            (fail,) = [a for a in acts if isinstance(a, Fail)]
            assert fail.error.reason == "resume-cap"
            break
        resumes += len([a for a in guard.feed(ev.TimerFired(POST)) if isinstance(a, Resume)])
        guard.feed(ev.StreamResumed(POST))
    assert resumes == cap


def test_a_retry_field_in_a_replay_batch_sets_the_backoff(engine: str) -> None:
    guard = make_guard(engine)
    batch = ev.ReplayBatch(POST, (ev.SseEvent(POST, progress(), "e1", retry_ms=2500),))
    guard.feed(batch)
    assert guard.feed(ev.StreamLost(POST, clean=False)) == (Wait(POST, 2.5),)


def _answered_twice(guard: Any) -> tuple[Any, ...]:
    guard.feed(ev.SseEvent(POST, elicit(1), "e1"))
    guard.feed(ev.UserAnswered(K1, {"action": "accept"}))
    return tuple(guard.feed(ev.UserAnswered(K1, {"action": "decline"})))


def _answered_after_death(guard: Any) -> tuple[Any, ...]:
    guard.feed(ev.SseEvent(POST, elicit(1), "e1"))
    guard.feed(ev.SseEvent(POST, cancel(1), "e2"))
    return tuple(guard.feed(ev.UserAnswered(K1, {"action": "accept"})))


def _outcome_while_presented(guard: Any) -> tuple[Any, ...]:
    guard.feed(ev.SseEvent(POST, elicit(1), "e1"))
    return tuple(guard.feed(ev.SubmissionOutcome(K1, SubmissionResult(202))))


def _lost_while_waiting(guard: Any) -> tuple[Any, ...]:
    guard.feed(ev.SseEvent(POST, progress(), "e1"))
    guard.feed(ev.StreamLost(POST, clean=False))
    return tuple(guard.feed(ev.StreamLost(POST, clean=False)))


@pytest.mark.parametrize(
    ("drive", "expected"),
    [
        (_answered_twice, Ignore("already-answered", f"{K1!r} is submitting", key=K1)),
        (
            _answered_after_death,
            Ignore("answer-after-death", f"{K1!r} is cancelled; answer dropped", key=K1),
        ),
        (_outcome_while_presented, Ignore("no-submission-pending", f"{K1!r} is presented", key=K1)),
        (
            lambda g: g.feed(ev.SubmissionOutcome(K99, SubmissionResult(202))),
            Ignore("no-submission-pending", f"{K99!r} is unknown", key=K99),
        ),
        (_lost_while_waiting, Ignore("not-connected", f"{POST} is waiting", stream=POST)),
        (
            lambda g: g.feed(ev.TimerFired(POST)),
            Ignore("no-wait-pending", f"{POST} is open", stream=POST),
        ),
    ],
    ids=[
        "answered-twice",
        "answer-after-death",
        "outcome-presented",
        "outcome-unknown",
        "lost",
        "timer",
    ],
)
def test_an_ignore_after_some_history_says_where_things_stand(
    engine: str, drive: Any, expected: Ignore
) -> None:
    assert tuple(drive(make_guard(engine))) == (expected,)


def test_usage_errors_name_the_key_or_stream(engine: str) -> None:
    guard = make_guard(engine)
    with pytest.raises(
        GuardUsageError, match=r"answer for \('s1', 99\), which was never presented"
    ):
        guard.feed(ev.UserAnswered(K99, {"action": "accept"}))
    guard.feed(ev.SseEvent(POST, elicit(1), "e1"))
    with pytest.raises(GuardUsageError, match=r"answer for \('s1', 1\) is not a JSON object"):
        guard.feed(ev.UserAnswered(K1, ["accept"]))  # type: ignore[arg-type]
    with pytest.raises(GuardUsageError, match="unknown stream 'nowhere'"):
        guard.feed(ev.StreamLost("nowhere", clean=True))


def test_a_lost_resume_connection_is_resumed_again(engine: str) -> None:
    guard = make_guard(engine)
    guard.feed(ev.SseEvent(POST, progress(), "e1"))
    guard.feed(ev.StreamLost(POST, clean=False))
    guard.feed(ev.TimerFired(POST))
    assert guard.stream_state(POST) == "resuming"
    assert guard.feed(ev.StreamLost(POST, clean=False)) == (Wait(POST, 2.0),)
    assert guard.connection_resumed(POST) is False


def _submitted(guard: Any, rid: int = 1, stream: str = POST) -> None:
    guard.feed(ev.SseEvent(stream, elicit(rid), f"{stream}-{rid}"))
    guard.feed(ev.UserAnswered((SESSION, rid), {"action": "accept"}))


def test_a_terminal_rejection_fails_with_the_outcome_as_evidence(engine: str) -> None:
    guard = make_guard(engine)
    _submitted(guard, stream=GET)
    acts = guard.feed(ev.SubmissionOutcome(K1, SubmissionResult(410)))
    (fail,) = [a for a in acts if isinstance(a, Fail)]
    assert fail.error.key == K1
    assert (
        str(fail.error)
        == f"answer for {K1!r} rejected as terminal: HTTP 410 -> http-410 (terminal)"
    )


def test_a_submission_failing_every_attempt_fails_naming_its_key(engine: str) -> None:
    guard = make_guard(engine, max_submit_attempts=1)
    _submitted(guard, stream=GET)
    (fail,) = [
        a
        for a in guard.feed(ev.SubmissionOutcome(K1, SubmissionResult(503)))
        if isinstance(a, Fail)
    ]
    assert fail.error.key == K1 and "failed 1 times" in str(fail.error)


def test_a_session_gone_on_an_answer_fails_every_request_naming_each_key(engine: str) -> None:
    guard = make_guard(engine)
    _submitted(guard, 1, GET)
    guard.feed(ev.SseEvent(GET, elicit(2), "g2"))
    acts = guard.feed(ev.SubmissionOutcome(K1, SubmissionResult(404)))
    errors = {a.error.key: a.error for a in acts if isinstance(a, Fail) and a.error.key}
    assert set(errors) == {K1, (SESSION, 2)}
    for error in errors.values():
        assert isinstance(error, SessionExpiredError)
        assert str(error) == "session 's1' expired (HTTP 404 -> http-404 (terminal))"


def test_an_evicted_tombstone_of_a_reopened_stream_is_forgotten_quietly(engine: str) -> None:
    guard = make_guard(engine, max_tombstones=1)
    guard.feed(ev.SseEvent(GET, elicit(1)))
    guard.feed(ev.SseEvent(GET, cancel(1)))
    guard.feed(ev.StreamLost(GET, clean=True))  # no event id: the stream fails
    assert guard.stream_state(GET) == "dead"
    guard.feed(ev.StreamOpened(GET, None))
    guard.feed(ev.SseEvent(GET, elicit(2)))
    guard.feed(ev.SseEvent(GET, cancel(2)))  # evicts the tombstone of 1
    assert guard.tracked() == (0, 1, 2)


def test_snapshots_stay_bounded_while_requests_come_and_go(engine: str) -> None:
    """Evicting a request's tombstone also drops it from its stream's list."""
    guard = make_guard(engine, max_tombstones=4)
    sizes = []
    for rid in range(60):
        guard.feed(ev.SseEvent(GET, elicit(rid)))
        guard.feed(ev.SseEvent(GET, cancel(rid)))
        sizes.append(len(repr(guard.snapshot())))
    assert guard.tracked() == (0, 4, 2)
    assert sizes[-1] <= sizes[10] + 40  # ids grow from 2 to 2 digits: a few characters
