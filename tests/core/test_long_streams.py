"""Resumption over long streams against servers that replay what they please.

A stream carries 10,000+ events; then the network cuts it again and again, and each
resumed connection replays from wherever the server chooses before (maybe) sending new
events:

* ``start``: everything from the start of its buffer, whatever the client asked;
* ``back``: from a point some events before the ``Last-Event-ID``;
* ``restamp``: its old events again under fresh ids (a server that cannot be told from
  one making progress: only ``max_resumes_per_stream`` stops it);
* ``interleave``: everything from the start, then its new events, then old ones again on
  the same connection (a broken server: ids are unique within a session). The repeats come
  on a live stretch, where the guard checks the window only: they must still never become
  the cursor a resume names.

Whatever the window (down to 1 id), history cap and server, the guard must stop resuming
within its budgets, never resume from a cursor behind the newest event it has seen, and
end the interaction with exactly one outcome.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest
from core_support import ORIGIN, POST, make_guard, of, progress, response
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from fsm import Guard
from fsm import events as ev
from fsm.actions import Action, Complete, Fail, Resume, Wait
from fsm.errors import ResumeBudgetSpentError

DATA = progress()


@dataclass
class Run:
    """One stream's life: what the guard was told and what it did."""

    guard: Guard
    sent: list[str] = field(default_factory=list)
    """The ids of the server's buffer, oldest first (what it may replay)."""
    newest: int = -1
    """Index in ``sent`` of the newest event the guard was given."""
    resumes: int = 0
    outcomes: list[Action] = field(default_factory=list)

    def deliver(self, index: int, event_id: str | None = None) -> None:
        eid = self.sent[index] if event_id is None else event_id
        self.guard.feed(ev.SseEvent(POST, DATA, eid))
        self.newest = max(self.newest, index)

    def new_events(self, n: int, prefix: str = "e") -> None:
        """``n`` events under ids the stream never carried (``prefix``: a restamping
        server's old events under fresh ids look the same to the client)."""
        for _ in range(n):
            self.sent.append(f"{prefix}{len(self.sent)}")
            self.deliver(len(self.sent) - 1)

    def lose(self, *, clean: bool) -> Resume | None:
        """Cut the stream; fire the backoff timer if the guard waits. The Resume, or None
        once the guard ended the stream."""
        acts = self.guard.feed(ev.StreamLost(POST, clean=clean))
        self.outcomes += of(acts, Fail) + of(acts, Complete)
        if not of(acts, Wait):
            return None
        acts = self.guard.feed(ev.TimerFired(POST))
        resumes = of(acts, Resume)
        assert len(resumes) == 1, acts
        self.resumes += 1
        self.guard.feed(ev.StreamResumed(POST))
        return resumes[0]


SERVERS = st.sampled_from(["start", "back", "restamp", "interleave"])
WINDOWS = st.sampled_from([1, 2, 7, 64, 1024])
HISTORIES = st.sampled_from([0, 3, 5_000, 131_072])


def _interleaving(window: int, repeats: int, fresh: list[int], ends: bool) -> Any:
    """An explicit example: an ``interleave`` server over a default history."""
    return example(
        server="interleave",
        window=window,
        history=131_072,
        length=10_000,
        back=1,
        repeats=repeats,
        fresh=fresh,
        clean=ends,
        completes=ends,
    )


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    server=SERVERS,
    window=WINDOWS,
    history=HISTORIES,
    length=st.integers(10_000, 10_500),
    back=st.integers(1, 20_000),
    repeats=st.integers(0, 2_000),
    fresh=st.lists(st.integers(0, 3), max_size=12),
    clean=st.booleans(),
    completes=st.booleans(),
)
@_interleaving(1, 3, [2, 2], ends=False)  # repeats on a live stretch, past a window of one
@_interleaving(1024, 1_000, [1, 0, 3], ends=True)  # within a window of 1,024 (batches of 256)
def test_resumption_terminates_and_never_goes_back(
    server: str,
    window: int,
    history: int,
    length: int,
    back: int,
    repeats: int,
    fresh: list[int],
    clean: bool,
    completes: bool,
) -> None:
    budget, cap = 3, 40
    run = Run(
        make_guard(
            "tables",
            streams=((POST, ORIGIN),),
            max_seen_event_ids=window,
            max_event_history=history,
            max_resumes_without_progress=budget,
            max_resumes_per_stream=cap,
        )
    )
    run.new_events(length)
    rounds = iter(fresh)
    stalled = 0
    while True:
        resume = run.lose(clean=clean)
        if resume is None:
            break
        # P7: the cursor is the newest event seen, never one behind it
        assert resume.cursor == run.sent[run.newest]
        cursor = run.sent.index(resume.cursor)
        if server == "restamp":
            run.new_events(min(len(run.sent), 50), prefix="r")
        else:
            start = 0 if server == "start" else max(0, cursor + 1 - back)
            for i in range(start, len(run.sent)):
                run.deliver(i)
        more = next(rounds, 0)
        run.new_events(more)
        if server == "interleave":  # old ids again, after the new ones
            for i in range(min(repeats, len(run.sent))):
                run.deliver(i)
        stalled = 0 if more else stalled + 1
        if server != "restamp":
            assert stalled <= budget  # the budget without progress, never reset by a replay
        if completes and next(rounds, None) is None:
            acts = run.guard.feed(ev.SseEvent(POST, response(ORIGIN), None))
            run.outcomes += of(acts, Complete) + of(acts, Fail)
            break
    assert run.resumes <= cap
    assert len(run.outcomes) == 1, run.outcomes
    outcome = run.outcomes[0]
    if isinstance(outcome, Fail):
        assert isinstance(outcome.error, ResumeBudgetSpentError)
        full = window + history < len(run.sent)
        expected = {"resume-budget-spent", "resume-cap"} | ({"history-full"} if full else set())
        if server == "interleave":  # the window may hold nothing but repeats
            expected.add("cursor-unknown")
        assert outcome.error.reason in expected
        if outcome.error.reason == "history-full":
            assert full
    # memory: the window and the fingerprints stay within their bounds
    hist = run.guard._streams[POST].history
    assert len(hist.recent) < window + hist.batch and hist.count <= history


@pytest.mark.parametrize("window", [1, 2, 1024])
def test_replay_of_everything_is_no_progress_at_any_length(window: int) -> None:
    """The reported case: 1,100 events, then a server that replays its whole buffer on
    every resume. Each resume brings nothing new, so the budget runs out."""
    run = Run(make_guard("tables", streams=((POST, ORIGIN),), max_seen_event_ids=window))
    run.new_events(1_100)
    while (resume := run.lose(clean=False)) is not None:
        assert resume.cursor == "e1099"
        for i in range(len(run.sent)):
            run.deliver(i)
    assert run.resumes == 3  # the default budget without progress
    [fail] = run.outcomes
    assert isinstance(fail, Fail) and fail.error.reason == "resume-budget-spent"


def test_a_full_history_makes_the_next_loss_terminal() -> None:
    run = Run(
        make_guard("tables", streams=((POST, ORIGIN),), max_seen_event_ids=4, max_event_history=10)
    )
    run.new_events(14)  # exactly window + history: nothing forgotten yet
    resume = run.lose(clean=True)
    assert resume is not None and resume.cursor == "e13"
    run.new_events(1)  # the 15th id: the oldest is forgotten
    assert run.lose(clean=True) is None
    [fail] = run.outcomes
    assert isinstance(fail, Fail) and fail.error.reason == "history-full"
    assert "max_event_history=10" in fail.error.evidence


def test_a_restamping_server_is_stopped_by_the_absolute_cap() -> None:
    run = Run(make_guard("tables", streams=((POST, ORIGIN),), max_resumes_per_stream=5))
    run.new_events(10)
    while run.lose(clean=False) is not None:
        run.new_events(10, prefix="r")
    assert run.resumes == 5
    [fail] = run.outcomes
    assert isinstance(fail, Fail) and fail.error.reason == "resume-cap"


def test_without_the_absolute_cap_no_resume_count_is_kept() -> None:
    guard = make_guard("tables", streams=((POST, ORIGIN),), max_resumes_per_stream=None)
    run = Run(guard)
    run.new_events(3)
    for _ in range(50):  # a server making real progress on every resume
        assert run.lose(clean=False) is not None
        run.new_events(1)
    assert guard._streams[POST].resumes == 0


@pytest.mark.parametrize(
    ("window", "repeats", "cursor"),
    [(1, 1, None), (2, 1, "e3001"), (7, 3, "e3001"), (1024, 500, "e3001"), (1024, 1_300, None)],
)
def test_repeats_on_a_live_stretch_never_become_the_cursor(
    window: int, repeats: int, cursor: str | None
) -> None:
    """A resumed connection replays everything, sends two new events (its stretch is live
    from the first), then repeats old ids. The window alone takes the repeats as new; the
    loss looks them up and resumes from the newest new id, or, when the window holds
    nothing but repeats (the newest new id is no longer known), ends the stream."""
    run = Run(make_guard("tables", streams=((POST, ORIGIN),), max_seen_event_ids=window))
    run.new_events(3_000)
    resume = run.lose(clean=False)
    assert resume is not None and resume.cursor == "e2999"
    for i in range(3_000):
        run.deliver(i)
    run.new_events(2)
    for i in range(repeats):
        run.deliver(i)
    assert run.guard.cursor(POST) == cursor  # looked up on the live stretch too
    resume = run.lose(clean=False)
    if cursor is None:
        assert resume is None
        [fail] = run.outcomes
        assert isinstance(fail, Fail) and fail.error.reason == "cursor-unknown"
        held = len(run.guard._streams[POST].history.recent)
        assert fail.error.evidence == (
            "abrupt cut",
            f"{held} event ids repeated on a live connection",
            "event ids must be unique",
        )
        assert str(fail.error).endswith(
            f"the last {held} all repeated older ones, so the newest new one is not known"
        ), str(fail.error)
    else:
        assert resume is not None and resume.cursor == cursor


def test_a_stream_that_completed_after_repeats_reports_the_newest_new_id() -> None:
    run = Run(make_guard("tables", streams=((POST, ORIGIN),), max_seen_event_ids=2))
    run.new_events(10)  # e0-e7 left the window
    run.deliver(3)  # a repeat on the live stretch: the window takes it
    acts = run.guard.feed(ev.SseEvent(POST, response(ORIGIN), None))
    assert of(acts, Complete)
    assert run.guard.cursor(POST) == "e9"
