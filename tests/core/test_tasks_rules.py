"""The task rules (fsm.tasks.task): each key presented once across polls, one prompt per
question, a vanished key dead, the empty ack no proof, the task's end ending every key
with one typed error, paced and bounded polling, exactly one outcome, and a typed
snapshot that restores."""

from __future__ import annotations

from typing import Any

import pytest
from core_support import FakeClock
from tasks_support import (
    ASK,
    LOST,
    OTHER,
    T0,
    YES,
    answer,
    asked,
    fail_of,
    kinds,
    started,
    status,
)

from fsm import actions as act
from fsm.errors import (
    CallRejectedError,
    GuardUsageError,
    InteractionFailed,
    QuestionReaskedError,
    SubmissionFailedError,
    TaskCancelledError,
    TaskExpiredError,
    TaskFailedError,
    TaskPollsExceededError,
)
from fsm.outcomes import SubmissionResult
from fsm.tasks.outcomes import TASK_EXPIRED
from fsm.tasks.task import (
    Poll,
    Polled,
    PollFailed,
    TaskAction,
    TaskCall,
    TaskCancelled,
    TaskCreated,
    TaskResumed,
    TaskSnapshot,
    Tick,
    Update,
    UpdateAcked,
    UpdateFailed,
)

# ------------------------------------------------------------------ presenting


def test_a_key_is_presented_once_across_polls() -> None:
    task, _ = started()
    first = asked(task, {"k1": ASK})
    assert first == (act.Present(("t", "k1"), "elicitation/create", ASK["params"]), Poll("t", 0.5))
    again = asked(task, {"k1": ASK})
    assert again == (Poll("t", 0.5),)
    assert task.state_of(("t", "k1")) == "presented"


def test_an_answer_goes_out_in_one_update_and_the_ack_is_not_proof() -> None:
    task, _ = started()
    asked(task, {"k1": ASK})
    out = answer(task, "k1")
    assert out == (Update("t", {"k1": YES}, {"k1": ("t", "k1")}),)
    assert task.feed(UpdateAcked()) == ()  # the poll is still pending: no second request
    assert task.state_of(("t", "k1")) == "submitted"
    # Still listed after the ack: the stored answer is resent once, the user not asked.
    assert asked(task, {"k1": ASK}) == (Update("t", {"k1": YES}, {"k1": ("t", "k1")}),)
    assert task.feed(UpdateAcked()) == (Poll("t", 0.5),)
    assert asked(task, {"k1": ASK}) == (Poll("t", 0.5),)  # max_resubmits=1 spent
    # Consumed only when a later poll no longer lists the key.
    assert task.feed(Polled(status("working"))) == (Poll("t", 0.5),)
    assert task.state_of(("t", "k1")) == "consumed"


def test_a_reask_under_a_new_key_is_answered_from_the_store_then_fails_once() -> None:
    task, _ = started()
    asked(task, {"k1": ASK})
    answer(task, "k1")
    task.feed(UpdateAcked())
    out = asked(task, {"k2": ASK})  # k1 consumed, the same question under k2
    assert out == (Update("t", {"k2": YES}, {"k2": ("t", "k1")}),)
    assert task.state_of(("t", "k1")) == "consumed"
    task.feed(UpdateAcked())
    error = fail_of(asked(task, {"k3": ASK}))
    assert isinstance(error, QuestionReaskedError) and error.key == ("t", "k3")


def test_on_reask_fail_fails_at_the_first_reask() -> None:
    task, _ = started(on_reask="fail")
    asked(task, {"k1": ASK})
    answer(task, "k1")
    task.feed(UpdateAcked())
    assert isinstance(fail_of(asked(task, {"k2": ASK})), QuestionReaskedError)


def test_a_supersession_under_a_new_key_is_a_new_prompt_and_the_old_one_goes() -> None:
    task, _ = started()
    asked(task, {"k1": ASK})
    out = asked(task, {"k2": ASK})  # k1 superseded by k2, the question not yet answered
    assert kinds(out) == ["Withdraw", "Present", "Poll"]
    assert out[0] == act.Withdraw(("t", "k1"), "superseded")
    assert task.state_of(("t", "k1")) == "withdrawn"
    assert kinds(answer(task, "k1")) == ["Ignore"]
    assert answer(task, "k2") == (Update("t", {"k2": YES}, {"k2": ("t", "k2")}),)


def test_a_vanished_key_is_withdrawn_and_its_late_answer_never_sent() -> None:
    task, _ = started()
    asked(task, {"k1": ASK})
    out = asked(task, {"k2": OTHER})
    assert kinds(out) == ["Withdraw", "Present", "Poll"]
    assert out[0] == act.Withdraw(("t", "k1"), "superseded")
    late = answer(task, "k1")
    assert kinds(late) == ["Ignore"] and late[0].reason == "not-presented"  # type: ignore[union-attr]
    again = asked(task, {"k2": OTHER, "k1": ASK})  # a unique key that ended stays ended
    assert again == (act.Ignore("key-ended", "'k1' is withdrawn", ("t", "k1"), "t"), Poll("t", 0.5))
    assert asked(task, {"k2": OTHER, "k1": ASK}) == (Poll("t", 0.5),)  # said once


@pytest.mark.parametrize("restore", [False, True], ids=["live", "restored"])
def test_a_key_gone_while_its_update_is_in_flight_is_consumed_by_the_next_poll(
    restore: bool,
) -> None:
    task, _ = started()
    asked(task, {"k1": ASK})
    answer(task, "k1")  # the update is in flight, and so is the poll
    assert task.feed(Polled(status("working"))) == ()  # k1 gone: no verdict before the ack
    assert task.state_of(("t", "k1")) == "submitting"
    if restore:  # the verdict pending survives a snapshot
        restored = TaskCall("t", clock=lambda: T0)
        restored.restore(task.snapshot())
        task = restored
    assert task.feed(UpdateAcked()) == (Poll("t", 0.5),)
    assert task.state_of(("t", "k1")) == "submitted"
    task.feed(Polled(status("working")))
    assert task.state_of(("t", "k1")) == "consumed"


def test_an_answer_whose_update_failed_is_resent_only_while_listed() -> None:
    task, _ = started()
    asked(task, {"k1": ASK, "k2": OTHER})
    answer(task, "k1")
    out = task.feed(UpdateFailed(LOST))
    assert out == ()  # the poll is pending; nothing is re-prompted
    assert task.state_of(("t", "k1")) == "answered"
    assert asked(task, {"k1": ASK, "k2": OTHER}) == (Update("t", {"k1": YES}, {"k1": ("t", "k1")}),)
    task.feed(UpdateFailed(LOST))
    out = asked(task, {"k2": OTHER})  # k1 gone before the answer got through
    assert out == (Poll("t", 0.5),)
    assert task.state_of(("t", "k1")) == "withdrawn"


def test_update_failures_in_a_row_are_bounded() -> None:
    task, _ = started(max_resends=1)
    asked(task, {"k1": ASK})
    answer(task, "k1")
    task.feed(UpdateFailed(LOST))
    asked(task, {"k1": ASK})
    error = fail_of(task.feed(UpdateFailed(LOST)))
    assert isinstance(error, SubmissionFailedError)


def test_a_rejected_answer_fails_the_task_once_naming_the_key() -> None:
    task, _ = started()
    asked(task, {"k1": ASK})
    answer(task, "k1")
    rejected = SubmissionResult(200, {"error": {"code": -32600, "message": "bad"}})
    error = fail_of(task.feed(UpdateFailed(rejected)))
    assert isinstance(error, CallRejectedError) and error.key == ("t", "k1")


# ------------------------------------------------------------------ the task's end


@pytest.mark.parametrize(
    ("event", "error"),
    [
        (Polled(status("failed", error={"message": "boom"})), TaskFailedError),
        (Polled(status("cancelled")), TaskCancelledError),
        (PollFailed(TASK_EXPIRED), TaskExpiredError),
    ],
    ids=["failed", "cancelled", "purged"],
)
def test_the_end_of_the_task_ends_every_key_with_one_typed_error(
    event: Any, error: type[InteractionFailed]
) -> None:
    task, _ = started()
    asked(task, {"k1": ASK, "k2": OTHER})
    out = task.feed(event)
    assert kinds(out) == ["Withdraw", "Withdraw", "Fail"]
    assert isinstance(fail_of(out), error)
    assert {task.state_of(("t", k)) for k in ("k1", "k2")} == {"dead"}
    after = task.feed(Polled(status("completed")))
    assert kinds(after) == ["Ignore"] and after[0].reason == "task-ended"  # type: ignore[union-attr]


def test_an_update_answered_minus_32602_expires_the_task() -> None:
    task, _ = started()
    asked(task, {"k1": ASK})
    answer(task, "k1")
    error = fail_of(task.feed(UpdateFailed(TASK_EXPIRED)))
    assert isinstance(error, TaskExpiredError) and error.reason == "task-expired"


def test_the_ttl_ends_the_call_on_a_tick_and_keeps_a_late_answer_out() -> None:
    task, clock = started()
    asked(task, {"k1": ASK})
    assert task.deadline() == T0 + 60.0
    clock.advance(59.0)
    assert task.feed(Tick()) == ()
    clock.advance(1.0)
    out = task.feed(Tick())
    assert kinds(out) == ["Withdraw", "Fail"]
    assert isinstance(fail_of(out), TaskExpiredError)

    task, clock = started()
    asked(task, {"k1": ASK})
    clock.advance(61.0)  # no tick was scheduled: the late answer finds the TTL passed
    out = answer(task, "k1")
    assert kinds(out) == ["Withdraw", "Fail"]


def test_completion_consumes_sent_answers_and_completes_once() -> None:
    task, _ = started()
    asked(task, {"k1": ASK, "k2": OTHER})
    answer(task, "k1")
    task.feed(UpdateAcked())
    out = task.feed(Polled(status("completed")))
    assert kinds(out) == ["Withdraw", "Complete"]
    assert task.state_of(("t", "k1")) == "consumed"
    assert task.state_of(("t", "k2")) == "dead"


def test_the_application_can_cancel() -> None:
    task, _ = started()
    asked(task, {"k1": ASK})
    out = task.feed(TaskCancelled())
    assert kinds(out) == ["Withdraw", "Fail"]
    assert fail_of(out).reason == "cancelled"


# ------------------------------------------------------------------ pacing and bounds


def test_polling_honours_the_interval_and_clamps_an_absurd_one() -> None:
    task, _ = started(max_poll_interval_s=30.0)
    assert task.feed(Polled(status(pollIntervalMs=2500))) == (Poll("t", 2.5),)
    assert task.feed(Polled(status(pollIntervalMs=10**12))) == (Poll("t", 30.0),)


def test_a_zero_interval_is_raised_to_the_minimum() -> None:
    task, _ = started()
    assert task.feed(Polled(status(pollIntervalMs=0))) == (Poll("t", 0.1),)


def test_a_final_status_past_the_ttl_still_counts() -> None:
    task, clock = started()
    clock.advance(120.0)  # the app slept through the TTL; the poll says completed
    assert kinds(task.feed(Polled(status("completed")))) == ["Complete"]
    task, clock = started()
    clock.advance(120.0)
    assert isinstance(fail_of(task.feed(Polled(status()))), TaskExpiredError)


def test_the_task_starts_once() -> None:
    task, _ = started()
    again = task.feed(TaskCreated(status()))
    assert kinds(again) == ["Ignore"] and again[0].reason == "started"  # type: ignore[union-attr]
    again = task.feed(TaskResumed())
    assert kinds(again) == ["Ignore"] and again[0].reason == "started"  # type: ignore[union-attr]


def test_polls_are_bounded() -> None:
    task, _ = started(max_polls=3)
    task.feed(Polled(status()))
    task.feed(Polled(status()))
    error = fail_of(task.feed(Polled(status())))
    assert isinstance(error, TaskPollsExceededError)


def test_poll_errors_back_off_and_are_bounded() -> None:
    task, _ = started(max_poll_errors=1)
    out = task.feed(PollFailed(LOST))
    assert out == (Poll("t", 0.5),)  # backoff 0.5 s, at least the interval
    assert isinstance(fail_of(task.feed(PollFailed(LOST))), SubmissionFailedError)


def test_a_result_nobody_asked_for_is_ignored() -> None:
    task, _ = started()
    asked(task, {"k1": ASK})
    answer(task, "k1")
    task.feed(UpdateAcked())
    out = task.feed(UpdateAcked())
    assert kinds(out) == ["Ignore"] and out[0].reason == "not-awaiting"  # type: ignore[union-attr]
    asked(task, {"k1": ASK})  # the poll in flight; its answer resends k1 (an update out)
    out = asked(task, {"k1": ASK})  # no poll was asked for while the update is out
    assert kinds(out) == ["Ignore"] and out[0].reason == "not-awaiting"  # type: ignore[union-attr]


def test_an_answer_to_a_key_never_listed_is_a_usage_error() -> None:
    task, _ = started()
    with pytest.raises(GuardUsageError):
        answer(task, "nope")


# ------------------------------------------------------------------ snapshots


def test_a_snapshot_is_typed_and_restores_the_same_decisions() -> None:
    task, clock = started()
    asked(task, {"k1": ASK, "k2": OTHER})
    answer(task, "k1")
    snap = task.snapshot()
    assert isinstance(snap, TaskSnapshot) and hash(snap) == hash(task.snapshot())
    assert [k.key for k in snap.keys] == ["k1", "k2"] and snap.update == ("k1",)
    copy = TaskCall("t", clock=clock)
    copy.restore(snap)
    assert copy.snapshot() == snap
    assert copy.feed(UpdateAcked()) == task.feed(UpdateAcked())


def test_a_restart_without_a_store_presents_a_still_listed_answered_key_again() -> None:
    """What the durable store is for: a fresh TaskCall knows nothing of the answer."""
    task, clock = started()
    asked(task, {"k1": ASK})
    answer(task, "k1")
    task.feed(UpdateAcked())
    fresh = TaskCall("t", clock=clock)
    assert fresh.feed(TaskResumed()) == (Poll("t", 0.0),)
    assert kinds(asked(fresh, {"k1": ASK})) == ["Present", "Poll"]


def test_both_engines_decide_alike() -> None:
    """The compiled tables and the ``transitions`` runtime fire the same rows."""
    runs: list[list[tuple[TaskAction, ...]]] = []
    for engine in ("tables", "transitions"):
        fired: list[tuple[str, str, str, str]] = []
        clock = FakeClock(T0)
        task = TaskCall(
            "t",
            clock=clock,
            engine=engine,  # type: ignore[arg-type]
            on_fire=lambda *row, sink=fired: sink.append(row),
        )
        out = [task.feed(TaskCreated(status()))]
        out.append(asked(task, {"k1": ASK, "k2": OTHER}))
        out.append(answer(task, "k1"))
        out.append(task.feed(UpdateFailed(LOST)))
        out.append(asked(task, {"k1": ASK}))
        out.append(task.feed(UpdateAcked()))
        out.append(task.feed(Polled(status("completed"))))
        runs.append(out)
        assert ("task-input", "presented", "supersede", "withdrawn") in fired
    assert runs[0] == runs[1]
