"""An MRTR call and a task survive a crash at every store write: the write-ahead order
(a question recorded before it is shown, an answer before it is sent), a restart that
re-shows an unanswered question once (marked) and never asks an answered one, and one
outcome across restarts. The server is a script (the deciders are sans-IO)."""

from __future__ import annotations

from typing import Any

import pytest

from fsm import events as ev
from fsm.actions import Complete, Fail, Persist, Present, Reshown
from fsm.durable import CallRecord, DurableCall, MemoryStore
from fsm.mrtr.call import MrtrCall, Retry, RoundResult
from fsm.tasks.task import Poll, Polled, TaskCall, TaskCreated, Update, UpdateAcked

ASK = {"method": "elicitation/create", "params": {"message": "Delete 3 files?"}}
YES = {"action": "accept", "content": {"ok": True}}
CLOCK = lambda: 100.0  # noqa: E731


def mrtr_result(request_state: str | None) -> dict[str, Any]:
    """The scripted MRTR server, by the state a request carries: the first request gets
    the question, its answer gets the same question again under a new key (a re-ask),
    and the re-ask's answer the result."""
    if request_state is None:
        return {"resultType": "input_required", "inputRequests": {"q": ASK}, "requestState": "s1"}
    if request_state == "s1":
        return {"resultType": "input_required", "inputRequests": {"q2": ASK}, "requestState": "s2"}
    return {"content": [{"type": "text", "text": "done"}]}


LISTED = {"taskId": "t1", "status": "input_required", "inputRequests": {"k": ASK}}
DONE = {"taskId": "t1", "status": "completed", "result": {"content": []}}


class Run:
    """One client's life across crashes: the store survives, the decider does not. The
    user answers every prompt shown; the scripted server answers every request sent."""

    def __init__(self, era: str, crash_at: int | None) -> None:
        self.era, self.crash_at = era, crash_at
        self.store = MemoryStore()
        self.shown: list[Present] = []
        self.prompts: list[Present] = []
        self.outcomes: list[Any] = []
        self.crashed = False
        self.answered = False  # the task server's state
        self.call = self._fresh()
        self.inflight: list[Any] = ["call"]  # the requests the server answers, in order

    def _fresh(self) -> DurableCall:
        if self.era == "mrtr":
            return DurableCall(MrtrCall("c1", clock=CLOCK))
        return DurableCall(TaskCall("t1", clock=CLOCK))

    def take(self, actions: tuple[Any, ...]) -> bool:
        """Take actions in order; False when the process died before one of them."""
        for a in actions:
            if isinstance(a, Persist):
                if not self.crashed and self.store.writes == self.crash_at:
                    self.crashed = True
                    return False
                assert isinstance(a.delta, CallRecord)
                self.store.write(a.delta)
            elif isinstance(a, Present):
                self.shown.append(a)
                self.prompts.append(a)
            elif isinstance(a, Retry | Update | Poll):
                self.inflight.append(a)
            elif isinstance(a, Complete | Fail):
                self.outcomes.append(a)
        return True

    def restart(self) -> None:
        """A new process: prompts and requests died; the call starts from the store."""
        self.prompts, self.inflight = [], []
        record = self.store.calls().get("c1" if self.era == "mrtr" else "t1")
        if record is None:  # nothing was recorded: the application issues the call again
            self.call, self.inflight = self._fresh(), ["call"]
            return
        self.call, actions = DurableCall.restart(self._fresh().decider, record)
        assert self.take(actions)

    def feed(self, event: Any) -> None:
        if not self.take(self.call.feed(event)):
            self.restart()

    def step(self) -> None:
        """The next thing that happens: the user answers, or the server replies."""
        if self.prompts:
            self.feed(ev.UserAnswered(self.prompts.pop(0).key, YES))
            return
        assert self.inflight, "the call waits for nothing"
        sent = self.inflight.pop(0)
        if self.era == "mrtr":
            state = sent.request_state if isinstance(sent, Retry) else None
            self.feed(RoundResult(mrtr_result(state)))
        elif sent == "call":
            self.feed(TaskCreated({"taskId": "t1", "status": "working"}))
        elif isinstance(sent, Update):
            self.answered = True
            self.feed(UpdateAcked())
        else:
            self.feed(Polled(DONE if self.answered else LISTED))


def drive(run: Run) -> Run:
    for _ in range(50):
        if run.outcomes:
            return run
        run.step()
    raise AssertionError("no outcome")


def writes(era: str) -> int:
    return drive(Run(era, None)).store.writes


@pytest.mark.parametrize(
    ("era", "crash_at"),
    [("mrtr", i) for i in range(writes("mrtr"))] + [("tasks", i) for i in range(writes("tasks"))],
)
def test_a_crash_at_every_write_never_asks_an_answered_question(era: str, crash_at: int) -> None:
    """The process dies before write ``crash_at`` (0: the first) and restarts."""
    run = drive(Run(era, crash_at))
    assert run.crashed
    plain = [p for p in run.shown if not isinstance(p, Reshown)]
    assert len(plain) == 1, "the question is presented once"
    assert len(run.shown) <= 2, "and re-shown at most once, marked"
    assert len(run.outcomes) == 1 and isinstance(run.outcomes[0], Complete)
    if isinstance(run.shown[-1], Reshown):  # re-shown: the crash fell before its answer
        assert run.shown[-1].key == plain[0].key
    assert not [r for r in run.inflight if isinstance(r, Retry | Update)], "no answer left"


def test_the_write_counts_are_pinned() -> None:
    """MRTR: the question, its answer, the re-ask's resubmission, the end; a task: its
    creation, the question, the answer, the poll that came back while the update was in
    flight, the ack, the end (no write for a poll that changed nothing)."""
    assert (writes("mrtr"), writes("tasks")) == (4, 6)


def test_a_question_is_recorded_before_it_is_shown() -> None:
    call = DurableCall(MrtrCall("c1", clock=CLOCK))
    actions = call.feed(RoundResult(mrtr_result(None)))
    assert [type(a) for a in actions] == [Persist, Present]
    record = actions[0].delta
    assert isinstance(record, CallRecord) and record.questions[0].key == actions[1].key
    answered = call.feed(ev.UserAnswered(actions[1].key, YES))
    assert [type(a) for a in answered] == [Persist, Retry]
    stored = answered[0].delta
    assert isinstance(stored, CallRecord) and stored.questions == ()  # answered: not on screen
    assert stored.snapshot.questions[0].answer is not None


def test_an_mrtr_call_that_never_asks_writes_nothing() -> None:
    call = DurableCall(MrtrCall("c1", clock=CLOCK))
    assert [type(a) for a in call.feed(RoundResult(mrtr_result("s2")))] == [Complete]


def test_a_second_crash_does_not_show_a_question_a_third_time() -> None:
    store = MemoryStore()
    call = DurableCall(MrtrCall("c1", clock=CLOCK))
    for a in call.feed(RoundResult(mrtr_result(None))):
        if isinstance(a, Persist):
            store.write(a.delta)  # type: ignore[arg-type]
    for _ in range(2):
        record = store.calls()["c1"]
        call, actions = DurableCall.restart(MrtrCall("c1", clock=CLOCK), record)
        for a in actions:
            if isinstance(a, Persist):
                store.write(a.delta)  # type: ignore[arg-type]
        shown = [a for a in actions if isinstance(a, Reshown)]
        assert len(shown) == (1 if _ == 0 else 0)
    (question,) = store.calls()["c1"].questions
    assert call.decider.state_of(question.key) == "presented"


def test_an_ended_call_restarts_to_nothing() -> None:
    run = drive(Run("tasks", None))
    record = run.store.calls()["t1"]
    assert record.ended
    _, actions = DurableCall.restart(TaskCall("t1", clock=CLOCK), record)
    assert actions == ()


def test_a_restart_resends_what_was_in_flight() -> None:
    """A task restarted while its question is listed and unanswered polls again (the
    tasks/get died with the process) and re-shows the question once."""
    run = Run("tasks", None)
    run.step()  # created
    run.step()  # listed: shown
    assert run.store.writes == 2
    run.prompts.clear()  # the user has not answered yet; the poll in flight comes back
    run.step()
    assert run.store.writes == 2, "a poll that changed nothing writes nothing"
    _, actions = DurableCall.restart(TaskCall("t1", clock=CLOCK), run.store.calls()["t1"])
    assert [type(a) for a in actions] == [Persist, Reshown, Poll]


def test_a_record_of_another_call_or_era_is_refused() -> None:
    run = drive(Run("mrtr", None))
    record = run.store.calls()["c1"]
    with pytest.raises(ValueError, match="another call"):
        DurableCall.restart(MrtrCall("c2", clock=CLOCK), record)
    with pytest.raises(ValueError, match="another era"):
        DurableCall.restart(TaskCall("c1", clock=CLOCK), record)
