"""What the guard's actions tell the client beyond the decision: every ``Ignore`` names
the request or stream it concerns and says why, and every ``Fail`` carries a stable
reason, the key it concerns and the evidence it was decided on (what an embedding client
logs and shows the user)."""

from __future__ import annotations

from typing import Any

import pytest
from core_support import ENGINES, GET, POST, SESSION, cancel, elicit, make_guard, progress

from fsm import events as ev
from fsm.actions import Fail, Ignore, Resume, Wait
from fsm.errors import RequestCancelledError, ResumeBudgetSpentError, SessionExpiredError


@pytest.fixture(params=ENGINES)
def engine(request: pytest.FixtureRequest) -> str:
    return str(request.param)


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
