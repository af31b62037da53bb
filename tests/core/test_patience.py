"""Patience with a server that still holds the old connection (:mod:`fsm.sse.guard`).

A server refuses a resume while it holds the half-open connection the client lost: the
TypeScript SDK with an event store answers 409 "Conflict: Stream already has an active
connection", IBM ContextForge 409 with ``Retry-After`` while its listener claim lasts,
Render 400 "session already exists" for about two minutes. Such refusals spend no budget
of resumes without progress: they are retried with backoff and jitter, never sooner than
``Retry-After``, until ``resume_patience_s`` have passed (by the clock, or by the waits
the guard asked for when the clock says less). Everything else is judged as before.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from core_support import POST, FakeClock, elicit, make_guard, of, progress, response

from fsm import Guard, GuardConfig, SubmissionResult
from fsm import events as ev
from fsm import properties as P
from fsm.actions import Complete, Fail, Present, Resume, Submit, Wait
from fsm.errors import ResumeBudgetSpentError
from fsm.outcomes import Classifier
from fsm.sse.observe import ObservedGuard

TS_CONFLICT = {
    "jsonrpc": "2.0",
    "id": None,
    "error": {"code": -32000, "message": "Conflict: Stream already has an active connection"},
}
HELD: dict[str, ev.ResumeRefused] = {
    "typescript-409": ev.ResumeRefused(POST, 409, body=TS_CONFLICT),
    "bare-409": ev.ResumeRefused(POST, 409),
    "contextforge-409-retry-after": ev.ResumeRefused(POST, 409, retry_after=2.0),
    "render-400-text": ev.ResumeRefused(
        POST, 400, text="Session registration failed: session already exists"
    ),
    "go-409": ev.ResumeRefused(
        POST,
        409,
        body={"error": {"code": -32000, "message": "stream ID conflicts with ongoing stream"}},
    ),
    "429-retry-after": ev.ResumeRefused(POST, 429, retry_after=1.0),
    "503-retry-after": ev.ResumeRefused(POST, 503, retry_after=1.0),
}
"""Refusals of a server that still holds the old connection (or says when to return)."""

NOT_HELD: dict[str, tuple[ev.ResumeRefused, str]] = {
    "400": (ev.ResumeRefused(POST, 400, text="Bad Request: Missing session ID"), "not-resumable"),
    "429": (ev.ResumeRefused(POST, 429), "resume-budget-spent"),
    "503": (ev.ResumeRefused(POST, 503), "resume-budget-spent"),
    "500-already-exists": (
        ev.ResumeRefused(POST, 500, text="session already exists"),
        "resume-budget-spent",
    ),
    "connect-error": (ev.ResumeRefused(POST, error="ConnectError"), "resume-budget-spent"),
}
"""Refusals judged as before: terminal, or retried within the budget without progress."""


def draws(*values: float) -> Any:
    """A jitter source returning ``values`` in turn, then the last one forever."""
    it: Iterator[float] = iter(values)
    last = [values[-1]]

    def draw() -> float:
        last[0] = next(it, last[0])
        return last[0]

    return draw


def lost(engine: str, clock: FakeClock | None = None, **config: Any) -> Guard:
    """A guard whose call stream carried ``e1`` and was just lost, its first resume sent."""
    config.setdefault("resume_jitter", lambda: 1.0)
    guard = make_guard(engine, clock, max_resumes_without_progress=3, **config)
    guard.feed(ev.SseEvent(POST, elicit(1), "e1"))
    guard.feed(ev.StreamLost(POST, clean=False))
    assert of(guard.feed(ev.TimerFired(POST)), Resume) == [Resume(POST, "e1")]
    return guard


def refuse(guard: Guard, refusal: ev.ResumeRefused, times: int, cursor: str = "e1") -> list[float]:
    """Feed ``refusal`` to ``times`` resumes; the waits asked (each followed by a resume
    from ``cursor``)."""
    waits = []
    for _ in range(times):
        [wait] = of(guard.feed(refusal), Wait)
        waits.append(wait.delay_s)
        assert of(guard.feed(ev.TimerFired(POST)), Resume) == [Resume(POST, cursor)]
    return waits


@pytest.mark.parametrize("name", sorted(HELD))
def test_a_server_holding_the_old_connection_is_waited_out(engine: str, name: str) -> None:
    """Ten refusals, more than the budget of resumes without progress (3); then the
    server lets go and the resume brings the result: one presentation, one outcome."""
    guard = lost(engine, backoff_max_s=2.0)
    refuse(guard, HELD[name], 5)
    key = ("s1", 1)
    assert of(guard.feed(ev.UserAnswered(key, {"action": "accept"})), Submit)
    assert guard.feed(ev.SubmissionOutcome(key, SubmissionResult(202))) == ()
    refuse(guard, HELD[name], 5)
    assert guard.feed(ev.StreamResumed(POST)) == ()
    assert not of(guard.feed(ev.SseEvent(POST, elicit(1), "e1")), Present)  # replayed
    assert guard.feed(ev.SseEvent(POST, response(7), "e2")) == (Complete(POST),)


@pytest.mark.parametrize("name", sorted(NOT_HELD))
def test_other_refusals_keep_their_classification(engine: str, name: str) -> None:
    refusal, reason = NOT_HELD[name]
    guard = lost(engine)
    out: list[Any] = []
    for _ in range(5):
        acts = guard.feed(refusal)
        out += acts
        if not of(acts, Wait):
            break
        guard.feed(ev.TimerFired(POST))
    [fail] = of(out, Fail)
    assert isinstance(fail.error, ResumeBudgetSpentError) and fail.error.reason == reason
    assert len(of(out, Wait)) == (0 if reason == "not-resumable" else 2)


def test_patient_waits_back_off_from_retry_with_equal_jitter(engine: str) -> None:
    """From the server's ``retry:`` (here 300 ms), doubling up to ``backoff_max_s``; each
    wait is half its step plus the jitter's draw times the other half."""
    guard = make_guard(engine, backoff_max_s=2.0, resume_jitter=draws(0.0, 1.0, 0.5, 0.0, 1.0, 0.5))
    guard.feed(ev.SseEvent(POST, progress(), "e1", retry_ms=300))
    guard.feed(ev.StreamLost(POST, clean=False))
    guard.feed(ev.TimerFired(POST))
    waits = refuse(guard, HELD["bare-409"], 6)
    assert waits == pytest.approx([0.15, 0.6, 0.9, 1.0, 2.0, 1.5])


def test_without_retry_the_steps_start_at_backoff_initial(engine: str) -> None:
    guard = lost(engine, backoff_initial_s=0.5, backoff_max_s=30.0)
    assert refuse(guard, HELD["bare-409"], 4) == [0.5, 1.0, 2.0, 4.0]


def test_retry_after_is_honoured_as_a_floor(engine: str) -> None:
    """Never sooner than the server asked; a ``Retry-After: 0`` still backs off."""
    guard = lost(engine, backoff_initial_s=0.5)
    assert refuse(guard, ev.ResumeRefused(POST, 409, retry_after=7.0), 2) == [7.0, 7.0]
    assert refuse(guard, ev.ResumeRefused(POST, 409, retry_after=0.0), 2) == [2.0, 4.0]


def test_patience_ends_at_its_horizon_by_the_clock(engine: str) -> None:
    """Refusals spread over the horizon end the stream with one typed error: the last
    wait is cut to what is left, and the refusal after it ends the stream."""
    clock = FakeClock(1000.0)
    guard = lost(engine, clock, resume_patience_s=60.0)
    out: list[Any] = []
    for _ in range(20):
        acts = guard.feed(ev.ResumeRefused(POST, 409, body=TS_CONFLICT))
        out += acts
        waits = of(acts, Wait)
        if not waits:
            break
        clock.advance(waits[0].delay_s + 0.25)  # each refused GET takes a quarter second
        guard.feed(ev.TimerFired(POST))
    [fail] = of(out, Fail)
    error = fail.error
    assert isinstance(error, ResumeBudgetSpentError) and error.reason == "resume-patience-spent"
    assert "resume_patience_s=60" in str(error)
    assert any("Conflict: Stream already has an active connection" in e for e in error.evidence)
    assert clock.now - 1000.0 == pytest.approx(60.0, abs=1.0)
    assert sum(w.delay_s for w in of(out, Wait)) < 60.0  # the clock said more: it counts
    assert guard.stream_state(POST) == "dead"


def test_patience_ends_by_the_waits_asked_when_the_clock_stands_still(engine: str) -> None:
    """A stopped clock (a model's, or a broken one) cannot make the patience endless."""
    guard = lost(engine, resume_patience_s=10.0, backoff_initial_s=1.0, backoff_max_s=4.0)
    out: list[Any] = []
    for _ in range(50):
        acts = guard.feed(HELD["bare-409"])
        out += acts
        if not of(acts, Wait):
            break
        guard.feed(ev.TimerFired(POST))
    assert [w.delay_s for w in of(out, Wait)] == [1.0, 2.0, 4.0, 3.0]  # the last cut to fit
    [fail] = of(out, Fail)
    assert fail.error.reason == "resume-patience-spent"
    assert "after 5 refusals in 10 s" in str(fail.error)


def test_zero_patience_gives_up_at_the_first_refusal(engine: str) -> None:
    guard = lost(engine, resume_patience_s=0.0)
    [fail] = of(guard.feed(HELD["typescript-409"]), Fail)
    assert fail.error.reason == "resume-patience-spent"


def test_resumes_that_open_but_bring_nothing_new_still_spend_the_budget(engine: str) -> None:
    """Held, let go, replay nothing new, cut: each such resume spends the budget without
    progress (3 here), however patient the guard is between them. The patience starts
    afresh after each resume that opened."""
    guard = lost(engine, clock=FakeClock(), resume_patience_s=5.0)
    resumes = 1
    out: list[Any] = []
    for _ in range(10):
        for _ in range(3):  # three refusals each time: the patience allows about five
            out += guard.feed(HELD["bare-409"])
            out += guard.feed(ev.TimerFired(POST))
            resumes += 1
        guard.feed(ev.StreamResumed(POST))
        guard.feed(ev.SseEvent(POST, elicit(1), "e1"))  # a replay: no progress
        acts = guard.feed(ev.StreamLost(POST, clean=False))
        out += acts
        if of(acts, Fail):
            break
        out += guard.feed(ev.TimerFired(POST))
        resumes += 1
    [fail] = of(out, Fail)
    assert fail.error.reason == "resume-budget-spent"
    assert resumes == 3 * 4  # three opened resumes, each after three refused ones
    assert len(of(out, Resume)) == resumes - 1  # (the first was sent by ``lost``)


def test_patient_refusals_count_towards_the_resume_cap(engine: str) -> None:
    guard = lost(engine, max_resumes_per_stream=4)
    refuse(guard, HELD["bare-409"], 3)
    [fail] = of(guard.feed(HELD["bare-409"]), Fail)
    assert fail.error.reason == "resume-cap"


def test_a_resume_that_opens_ends_the_patience(engine: str) -> None:
    """Four holds in a row, each as long as the patience allows, each let go and followed
    by progress: the patience and the budget start afresh every time."""
    guard = lost(engine, resume_patience_s=3.0, backoff_initial_s=1.0)
    for n in range(2, 6):
        assert refuse(guard, HELD["bare-409"], 2, cursor=f"e{n - 1}") == [1.0, 2.0]
        guard.feed(ev.StreamResumed(POST))
        guard.feed(ev.SseEvent(POST, progress(), f"e{n}"))
        guard.feed(ev.StreamLost(POST, clean=False))
        assert of(guard.feed(ev.TimerFired(POST)), Resume) == [Resume(POST, f"e{n}")]
    assert guard.stream_state(POST) == "resuming"


def test_a_snapshot_keeps_the_patience(engine: str) -> None:
    """Restored mid-patience, a guard decides as the original does; a snapshot from
    before the patience existed (one field short) restores with none."""
    clock = FakeClock(5.0)
    guard = lost(engine, clock, resume_patience_s=3.0, backoff_initial_s=1.0)
    refuse(guard, HELD["bare-409"], 1)
    snap = guard.snapshot()
    (stream,) = (s for s in snap.streams if s.id == POST)
    assert stream.held == (5.0, 1.0, 1)
    twin = Guard(clock=clock, config=guard.config, engine=engine)  # type: ignore[arg-type]
    twin.restore(snap)
    for g in (guard, twin):
        assert of(g.feed(HELD["bare-409"]), Wait) == [Wait(POST, 2.0)]
        g.feed(ev.TimerFired(POST))
        [fail] = of(g.feed(HELD["bare-409"]), Fail)
        assert fail.error.reason == "resume-patience-spent"
    old = snap._replace(streams=tuple(tuple(s)[:-1] for s in snap.streams))  # type: ignore[arg-type]
    twin.restore(old)
    assert all(s.held is None for s in twin.snapshot().streams)


def test_the_classifier_marks_patient_rows_only() -> None:
    resumes = Classifier.for_resumes()
    for name, refusal in HELD.items():
        assert resumes.classify(refusal.result()).patient, name
    for name, (refusal, _) in NOT_HELD.items():
        assert not resumes.classify(refusal.result()).patient, name
    # the answer POST table has no patient rows: a 409 answer is as terminal as before
    answers = Classifier()
    assert not answers.classify(SubmissionResult(409)).patient
    assert not answers.classify(SubmissionResult(429, retry_after=1.0)).patient


def test_the_default_patience_covers_the_servers_that_hold() -> None:
    """At least a minute; 150 s by default, beyond Render's two minutes of refusals."""
    assert GuardConfig().resume_patience_s == 150.0
    with pytest.raises(ValueError, match="resume_patience_s"):
        GuardConfig(resume_patience_s=-1.0)


def test_the_online_monitor_does_not_count_resumes_the_server_held(engine: str) -> None:
    """An observed guard waiting out ten refusals of a server that still holds the old
    connection is no L1 violation: those resumes are observed ``held`` and, as for the
    guard, spend nothing of the budget of resumes without progress, which stays the
    monitor's bound."""
    config = GuardConfig(max_resumes_per_stream=11, backoff_max_s=1.0, resume_jitter=lambda: 1.0)
    observed = ObservedGuard(Guard(clock=FakeClock(), config=config, engine=engine))  # type: ignore[arg-type]
    assert observed.monitor.budgets.max_resumes_without_progress == 3
    observed.feed(ev.SessionStarted("s1"))
    observed.feed(ev.StreamOpened(POST, 7))
    observed.feed(ev.SseEvent(POST, elicit(1), "e1"))
    observed.feed(ev.StreamLost(POST, clean=False))
    observed.feed(ev.TimerFired(POST))
    for _ in range(10):
        assert of(observed.feed(HELD["typescript-409"]), Wait)
        assert of(observed.feed(ev.TimerFired(POST)), Resume)
    assert observed.violations == []
    resumes = [obs for obs, _ in observed.log if isinstance(obs, P.Resumed)]
    assert [r.held for r in resumes] == [False] + [True] * 10
    [fail] = of(observed.feed(HELD["typescript-409"]), Fail)  # the cap: 11 resumes in all
    assert fail.error.reason == "resume-cap"
    assert observed.violations == []


def test_resumes_after_refusals_that_are_not_patient_still_count() -> None:
    """The bounded L1 counts every resume without progress that is not ``held``: a
    client resuming a fourth time after plain refusals violates it, one resuming ten
    times through a hold does not."""
    budgets = P.Budgets(max_resumes_without_progress=3)
    plain, held = P.Monitor(budgets), P.Monitor(budgets)
    for _ in range(10):
        held.observe(P.Resumed(POST, "e1", held=True))
    found = [v.name for _ in range(4) for v in plain.observe(P.Resumed(POST, "e1"))]
    assert found == ["L1"] and held.violations == []
