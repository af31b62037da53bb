"""The SSE guard's hand-off to a durable store: write-ahead ``Persist`` actions, none
for progress, and a restart that never asks an answered question again."""

from __future__ import annotations

from typing import Any

from fsm import events as ev
from fsm.actions import Action, Complete, Persist, Present, Reshown, Submit, Wait
from fsm.outcomes import SubmissionResult
from fsm.sse.guard import Guard, GuardConfig, GuardSnapshot, SseDelta, SseStored

KEY = ("s1", 1)
ASK = {"jsonrpc": "2.0", "id": 1, "method": "elicitation/create", "params": {"message": "Go?"}}
PROGRESS = {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progress": 1}}
EMPTY = SseStored(GuardSnapshot("", (), (), False))


class Client:
    """A guard and the store it writes to (deltas applied in memory)."""

    def __init__(self, stored: SseStored = EMPTY) -> None:
        self.guard = Guard(clock=lambda: 0.0, config=GuardConfig(durable=True))
        self.stored = stored
        self.writes = 0

    def do(self, actions: tuple[Action, ...]) -> tuple[Action, ...]:
        for a in actions:
            if isinstance(a, Persist):
                assert isinstance(a.delta, SseDelta)
                self.stored = self.stored.apply(a.delta)
                self.writes += 1
        return actions

    def feed(self, event: ev.Event) -> tuple[Action, ...]:
        return self.do(self.guard.feed(event))

    def restart(self) -> tuple[Client, tuple[Action, ...]]:
        """A new process: a fresh guard from the store alone."""
        fresh = Client(self.stored)
        return fresh, fresh.do(fresh.guard.restart(self.stored))


def asked() -> Client:
    c = Client()
    c.feed(ev.SessionStarted("s1"))
    c.feed(ev.StreamOpened("post:2", origin=2))
    c.feed(ev.SseEvent("post:2", ASK, "e1"))
    return c


def kinds(actions: tuple[Action, ...]) -> list[str]:
    return [type(a).__name__ for a in actions]


def test_a_question_is_recorded_before_it_is_shown() -> None:
    c = Client()
    c.feed(ev.SessionStarted("s1"))
    c.feed(ev.StreamOpened("post:2", origin=2))
    out = c.feed(ev.SseEvent("post:2", ASK, "e1"))
    assert kinds(out) == ["Persist", "Present"]
    delta = out[0].delta  # type: ignore[union-attr]
    assert isinstance(delta, SseDelta)
    assert [q.key for q in delta.questions] == [KEY]
    assert [(r.key, r.state) for r in delta.requests] == [(KEY, "presented")]


def test_an_answer_is_recorded_before_it_is_submitted() -> None:
    c = asked()
    out = c.feed(ev.UserAnswered(KEY, {"action": "accept"}))
    assert kinds(out) == ["Persist", "Submit"]
    (rec,) = out[0].delta.requests  # type: ignore[union-attr]
    assert rec.state == "submitting" and rec.answer == '{"action": "accept"}'


def test_progress_events_write_nothing() -> None:
    c = asked()
    before = c.writes
    for i in range(50):
        assert c.feed(ev.SseEvent("post:2", PROGRESS, f"p{i}")) == ()
        assert c.guard.on_event("post:2", f"q{i}", PROGRESS) == ()
    assert c.writes == before


def test_a_guard_not_durable_never_persists() -> None:
    g = Guard(clock=lambda: 0.0)
    g.feed(ev.SessionStarted("s1"))
    g.feed(ev.StreamOpened("post:2", origin=2))
    assert kinds(g.feed(ev.SseEvent("post:2", ASK, "e1"))) == ["Present"]


def test_an_answered_question_is_never_asked_again_after_a_restart() -> None:
    c = asked()
    c.feed(ev.UserAnswered(KEY, {"action": "accept"}))
    c.feed(ev.SubmissionOutcome(KEY, SubmissionResult(202)))
    c, out = c.restart()
    assert kinds(out) == ["Wait"]  # the stream is resumed; nothing is shown
    c.feed(ev.TimerFired("post:2"))
    c.feed(ev.StreamResumed("post:2"))
    replay = c.feed(ev.SseEvent("post:2", ASK, "e1", replayed=True))
    assert not any(isinstance(a, Present) for a in replay)


def test_an_answer_in_flight_at_the_crash_is_resubmitted_not_asked() -> None:
    c = asked()
    c.feed(ev.UserAnswered(KEY, {"action": "accept"}))
    c, out = c.restart()
    subs = [a for a in out if isinstance(a, Submit)]
    assert kinds(out)[0] == "Persist"
    assert [(s.key, s.answer, s.attempt) for s in subs] == [(KEY, {"action": "accept"}, 2)]
    assert not any(isinstance(a, Present) for a in out)


def test_a_question_shown_at_the_crash_is_reshown_once_marked() -> None:
    c = asked()
    c, out = c.restart()
    assert kinds(out) == ["Persist", "Wait", "Reshown"]
    (again,) = [a for a in out if isinstance(a, Reshown)]
    assert (again.key, again.params) == (KEY, {"message": "Go?"})
    c, out = c.restart()  # a second crash while it shows: never a third showing
    assert not any(isinstance(a, Present) for a in out)
    c.feed(ev.UserAnswered(KEY, {"action": "decline"}))  # the re-shown prompt's answer
    assert c.guard.state_of(KEY) == "submitting"


def test_an_ended_interaction_is_not_ended_again_after_a_restart() -> None:
    c = asked()
    c.feed(ev.UserAnswered(KEY, {"action": "accept"}))
    c.feed(ev.SubmissionOutcome(KEY, SubmissionResult(202)))
    done = c.feed(ev.SseEvent("post:2", {"jsonrpc": "2.0", "id": 2, "result": {}}, "e2"))
    assert kinds(done)[0] == "Persist" and any(isinstance(a, Complete) for a in done)
    c, out = c.restart()
    assert out == ()
    assert c.guard.live_streams() == []


def test_a_restart_resumes_from_the_stored_cursor() -> None:
    c = asked()
    c, out = c.restart()
    (wait,) = [a for a in out if isinstance(a, Wait)]
    resume = c.feed(ev.TimerFired(wait.stream))
    assert [getattr(a, "cursor", None) for a in resume] == ["e1"]


def test_forgotten_tombstones_leave_the_store() -> None:
    c = Client()
    c.guard = Guard(clock=lambda: 0.0, config=GuardConfig(durable=True, max_tombstones=2))
    c.feed(ev.SessionStarted("s1"))
    c.feed(ev.StreamOpened("get"))
    for i in range(1, 6):
        ask: dict[str, Any] = {**ASK, "id": i}
        c.feed(ev.SseEvent("get", ask, f"e{i}"))
        c.feed(
            ev.SseEvent(
                "get",
                {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": i}},
                f"c{i}",
            )
        )
    assert len(c.stored.snapshot.requests) == 2
    assert c.stored.questions == ()


def test_a_stream_cut_by_a_crash_before_any_event_id_ends_once() -> None:
    c = Client()
    c.feed(ev.SessionStarted("s1"))
    c.feed(ev.StreamOpened("post:2", origin=2))  # stored: known after a crash
    c, out = c.restart()
    assert kinds(out) == ["Persist", "Fail"]
    c, out = c.restart()
    assert out == ()
