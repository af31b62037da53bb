"""The durable call's exact hand-off (``fsm/durable/calls.py``), pinned where ``make mutate``
found it unpinned: a restart re-shows each question with its method and params (none
included), re-sends only what was in flight, keeps an answer whose update died to send
again; a resumed call writes only when its record changes; a task's poll counters and
pacing never write."""

from __future__ import annotations

from typing import Any

from fsm import events as ev
from fsm.actions import Fail, Ignore, Persist, Reshown
from fsm.durable import DurableCall
from fsm.mrtr.call import MrtrCall, RoundResult
from fsm.outcomes import SubmissionResult
from fsm.sse.guard import Question
from fsm.tasks.task import (
    Poll,
    Polled,
    PollFailed,
    TaskCall,
    TaskConfig,
    TaskCreated,
    Update,
)

ASK = {"method": "elicitation/create", "params": {"message": "Delete 3 files?"}}
ROOTS = {"method": "roots/list"}  # no params
YES = {"action": "accept", "content": {"ok": True}}
LISTED = {"taskId": "t1", "status": "input_required", "inputRequests": {"k": ASK, "r": ROOTS}}


def clock() -> float:
    return 100.0


def kinds(actions: tuple[Any, ...]) -> list[type]:
    return [type(a) for a in actions]


def task_with_update_in_flight(config: TaskConfig | None = None) -> DurableCall:
    """Task ``t1`` lists ``k`` and ``r``; ``k`` is answered: its update and the next
    poll are both in flight."""
    call = DurableCall(TaskCall("t1", clock=clock, config=config))
    call.feed(TaskCreated({"taskId": "t1", "status": "working"}))
    call.feed(Polled(LISTED))
    assert kinds(call.feed(ev.UserAnswered(("t1", "k"), YES))) == [Persist, Update]
    return call


def test_a_task_restart_reshows_a_question_without_params_and_keeps_the_answer() -> None:
    record = task_with_update_in_flight().record()
    assert record.questions == (Question(("t1", "r"), "roots/list", None),)  # k is answered
    call, actions = DurableCall.restart(TaskCall("t1", clock=clock), record)
    assert kinds(actions) == [Persist, Reshown, Poll]
    assert actions[1] == Reshown(("t1", "r"), "roots/list", None)
    # the update died with the process: its answer is kept, to send while k is listed
    assert call.decider.state_of(("t1", "k")) == "answered"
    assert actions[2] == Poll("t1", 1.0)
    (update,) = [a for a in call.feed(Polled(LISTED)) if isinstance(a, Update)]
    assert update.input_responses == {"k": YES}


def test_an_update_that_dies_past_its_bound_ends_the_call_at_restart() -> None:
    record = task_with_update_in_flight(TaskConfig(max_resends=0)).record()
    _, actions = DurableCall.restart(
        TaskCall("t1", clock=clock, config=TaskConfig(max_resends=0)), record
    )
    (fail,) = [a for a in actions if isinstance(a, Fail)]  # after the prompt of r is withdrawn
    assert str(fail.error) == "t1: tasks/update failed 1 times in a row"


def test_an_mrtr_restart_reshows_the_question_and_resends_nothing_not_in_flight() -> None:
    call = DurableCall(MrtrCall("c1", clock=clock))
    asked = {"resultType": "input_required", "inputRequests": {"q": ASK}, "requestState": "s1"}
    call.feed(RoundResult(asked))
    _, actions = DurableCall.restart(MrtrCall("c1", clock=clock), call.record())
    assert kinds(actions) == [Persist, Reshown]  # no request was in flight: none is sent
    (shown,) = actions[1:]
    assert (shown.method, shown.params) == ("elicitation/create", {"message": "Delete 3 files?"})


def test_a_resumed_call_writes_only_when_its_record_changes() -> None:
    record = task_with_update_in_flight().record()
    call = DurableCall.resume(TaskCall("t1", clock=clock), record)
    again = call.feed(TaskCreated({"taskId": "t1", "status": "working"}))
    assert again == (Ignore("started", "the task is polled already", stream="t1"),)


def test_poll_failures_and_pacing_alone_never_write() -> None:
    call = DurableCall(TaskCall("t1", clock=clock))
    assert kinds(call.feed(TaskCreated({"taskId": "t1", "status": "working"}))) == [Persist, Poll]
    assert call.feed(PollFailed(SubmissionResult(None, error="ConnectError"))) == (Poll("t1", 1.0),)
    slower = {"taskId": "t1", "status": "working", "pollIntervalMs": 2000}
    assert call.feed(Polled(slower)) == (Poll("t1", 2.0),)
