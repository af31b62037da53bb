"""The task rules (fsm.tasks.task): each key presented once across polls, one prompt per
question, a vanished key dead, the empty ack no proof, the task's end ending every key
with one typed error, paced and bounded polling, exactly one outcome, and a typed
snapshot that restores."""

from __future__ import annotations

from typing import Any

import pytest
import tasks_support as ts
from core_support import FakeClock

from fsm import actions as act
from fsm import tasks
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

# ------------------------------------------------------------------ presenting


def test_a_key_is_presented_once_across_polls() -> None:
    task, _ = ts.started()
    first = ts.asked(task, {"k1": ts.ASK})
    assert first == (
        act.Present(("t", "k1"), "elicitation/create", ts.ASK["params"]),
        tasks.Poll("t", 0.5),
    )
    again = ts.asked(task, {"k1": ts.ASK})
    assert again == (tasks.Poll("t", 0.5),)
    assert task.state_of(("t", "k1")) == "presented"


def test_an_answer_goes_out_in_one_update_and_the_ack_is_not_proof() -> None:
    task, _ = ts.started()
    ts.asked(task, {"k1": ts.ASK})
    out = ts.answer(task, "k1")
    assert out == (tasks.Update("t", {"k1": ts.YES}, {"k1": ("t", "k1")}),)
    assert task.feed(tasks.UpdateAcked()) == ()  # the poll is still pending: no second request
    assert task.state_of(("t", "k1")) == "submitted"
    # Still listed after the ack: the stored answer is resent once, the user not asked.
    assert ts.asked(task, {"k1": ts.ASK}) == (
        tasks.Update("t", {"k1": ts.YES}, {"k1": ("t", "k1")}),
    )
    assert task.feed(tasks.UpdateAcked()) == (tasks.Poll("t", 0.5),)
    assert ts.asked(task, {"k1": ts.ASK}) == (tasks.Poll("t", 0.5),)  # max_resubmits=1 spent
    # Consumed only when a later poll no longer lists the key.
    assert task.feed(tasks.Polled(ts.status("working"))) == (tasks.Poll("t", 0.5),)
    assert task.state_of(("t", "k1")) == "consumed"


def test_a_reask_under_a_new_key_is_answered_from_the_store_then_fails_once() -> None:
    task, _ = ts.started()
    ts.asked(task, {"k1": ts.ASK})
    ts.answer(task, "k1")
    task.feed(tasks.UpdateAcked())
    out = ts.asked(task, {"k2": ts.ASK})  # k1 consumed, the same question under k2
    assert out == (tasks.Update("t", {"k2": ts.YES}, {"k2": ("t", "k1")}),)
    assert task.state_of(("t", "k1")) == "consumed"
    task.feed(tasks.UpdateAcked())
    error = ts.fail_of(ts.asked(task, {"k3": ts.ASK}))
    assert isinstance(error, QuestionReaskedError) and error.key == ("t", "k3")


def test_on_reask_fail_fails_at_the_first_reask() -> None:
    task, _ = ts.started(on_reask="fail")
    ts.asked(task, {"k1": ts.ASK})
    ts.answer(task, "k1")
    task.feed(tasks.UpdateAcked())
    assert isinstance(ts.fail_of(ts.asked(task, {"k2": ts.ASK})), QuestionReaskedError)


def test_a_supersession_under_a_new_key_is_a_new_prompt_and_the_old_one_goes() -> None:
    task, _ = ts.started()
    ts.asked(task, {"k1": ts.ASK})
    out = ts.asked(task, {"k2": ts.ASK})  # k1 superseded by k2, the question not yet answered
    assert ts.kinds(out) == ["Withdraw", "Present", "Poll"]
    assert out[0] == act.Withdraw(("t", "k1"), "superseded")
    assert task.state_of(("t", "k1")) == "withdrawn"
    assert ts.kinds(ts.answer(task, "k1")) == ["Ignore"]
    assert ts.answer(task, "k2") == (tasks.Update("t", {"k2": ts.YES}, {"k2": ("t", "k2")}),)


def test_a_vanished_key_is_withdrawn_and_its_late_answer_never_sent() -> None:
    task, _ = ts.started()
    ts.asked(task, {"k1": ts.ASK})
    out = ts.asked(task, {"k2": ts.OTHER})
    assert ts.kinds(out) == ["Withdraw", "Present", "Poll"]
    assert out[0] == act.Withdraw(("t", "k1"), "superseded")
    late = ts.answer(task, "k1")
    assert ts.kinds(late) == ["Ignore"] and late[0].reason == "not-presented"  # type: ignore[union-attr]
    again = ts.asked(task, {"k2": ts.OTHER, "k1": ts.ASK})  # a unique key that ended stays ended
    assert again == (
        act.Ignore("key-ended", "'k1' is withdrawn", ("t", "k1"), "t"),
        tasks.Poll("t", 0.5),
    )
    assert ts.asked(task, {"k2": ts.OTHER, "k1": ts.ASK}) == (tasks.Poll("t", 0.5),)  # said once


@pytest.mark.parametrize("restore", [False, True], ids=["live", "restored"])
def test_a_key_gone_while_its_update_is_in_flight_is_consumed_by_the_next_poll(
    restore: bool,
) -> None:
    task, _ = ts.started()
    ts.asked(task, {"k1": ts.ASK})
    ts.answer(task, "k1")  # the update is in flight, and so is the poll
    assert task.feed(tasks.Polled(ts.status("working"))) == ()  # k1 gone: no verdict before the ack
    assert task.state_of(("t", "k1")) == "submitting"
    if restore:  # the verdict pending survives a snapshot
        restored = tasks.TaskCall("t", clock=lambda: ts.T0)
        restored.restore(task.snapshot())
        task = restored
    assert task.feed(tasks.UpdateAcked()) == (tasks.Poll("t", 0.5),)
    assert task.state_of(("t", "k1")) == "submitted"
    task.feed(tasks.Polled(ts.status("working")))
    assert task.state_of(("t", "k1")) == "consumed"


def test_an_answer_whose_update_failed_is_resent_only_while_listed() -> None:
    task, _ = ts.started()
    ts.asked(task, {"k1": ts.ASK, "k2": ts.OTHER})
    ts.answer(task, "k1")
    out = task.feed(tasks.UpdateFailed(ts.LOST))
    assert out == ()  # the poll is pending; nothing is re-prompted
    assert task.state_of(("t", "k1")) == "answered"
    assert ts.asked(task, {"k1": ts.ASK, "k2": ts.OTHER}) == (
        tasks.Update("t", {"k1": ts.YES}, {"k1": ("t", "k1")}),
    )
    task.feed(tasks.UpdateFailed(ts.LOST))
    out = ts.asked(task, {"k2": ts.OTHER})  # k1 gone before the answer got through
    assert out == (tasks.Poll("t", 0.5),)
    assert task.state_of(("t", "k1")) == "withdrawn"


def test_update_failures_in_a_row_are_bounded() -> None:
    task, _ = ts.started(max_resends=1)
    ts.asked(task, {"k1": ts.ASK})
    ts.answer(task, "k1")
    task.feed(tasks.UpdateFailed(ts.LOST))
    ts.asked(task, {"k1": ts.ASK})
    error = ts.fail_of(task.feed(tasks.UpdateFailed(ts.LOST)))
    assert isinstance(error, SubmissionFailedError)


def test_a_rejected_answer_fails_the_task_once_naming_the_key() -> None:
    task, _ = ts.started()
    ts.asked(task, {"k1": ts.ASK})
    ts.answer(task, "k1")
    rejected = SubmissionResult(200, {"error": {"code": -32600, "message": "bad"}})
    error = ts.fail_of(task.feed(tasks.UpdateFailed(rejected)))
    assert isinstance(error, CallRejectedError) and error.key == ("t", "k1")


# ------------------------------------------------------------------ the task's end


@pytest.mark.parametrize(
    ("event", "error"),
    [
        (tasks.Polled(ts.status("failed", error={"message": "boom"})), TaskFailedError),
        (tasks.Polled(ts.status("cancelled")), TaskCancelledError),
        (tasks.PollFailed(TASK_EXPIRED), TaskExpiredError),
    ],
    ids=["failed", "cancelled", "purged"],
)
def test_the_end_of_the_task_ends_every_key_with_one_typed_error(
    event: Any, error: type[InteractionFailed]
) -> None:
    task, _ = ts.started()
    ts.asked(task, {"k1": ts.ASK, "k2": ts.OTHER})
    out = task.feed(event)
    assert ts.kinds(out) == ["Withdraw", "Withdraw", "Fail"]
    assert isinstance(ts.fail_of(out), error)
    assert {task.state_of(("t", k)) for k in ("k1", "k2")} == {"dead"}
    after = task.feed(tasks.Polled(ts.status("completed")))
    assert ts.kinds(after) == ["Ignore"] and after[0].reason == "task-ended"  # type: ignore[union-attr]


def test_an_update_answered_minus_32602_expires_the_task() -> None:
    task, _ = ts.started()
    ts.asked(task, {"k1": ts.ASK})
    ts.answer(task, "k1")
    error = ts.fail_of(task.feed(tasks.UpdateFailed(TASK_EXPIRED)))
    assert isinstance(error, TaskExpiredError) and error.reason == "task-expired"


def test_the_ttl_ends_the_call_on_a_tick_and_keeps_a_late_answer_out() -> None:
    task, clock = ts.started()
    ts.asked(task, {"k1": ts.ASK})
    assert task.deadline() == ts.T0 + 60.0
    clock.advance(59.0)
    assert task.feed(tasks.Tick()) == ()
    clock.advance(1.0)
    out = task.feed(tasks.Tick())
    assert ts.kinds(out) == ["Withdraw", "Fail"]
    assert isinstance(ts.fail_of(out), TaskExpiredError)

    task, clock = ts.started()
    ts.asked(task, {"k1": ts.ASK})
    clock.advance(61.0)  # no tick was scheduled: the late answer finds the TTL passed
    out = ts.answer(task, "k1")
    assert ts.kinds(out) == ["Withdraw", "Fail"]


def test_completion_consumes_sent_answers_and_completes_once() -> None:
    task, _ = ts.started()
    ts.asked(task, {"k1": ts.ASK, "k2": ts.OTHER})
    ts.answer(task, "k1")
    task.feed(tasks.UpdateAcked())
    out = task.feed(tasks.Polled(ts.status("completed")))
    assert ts.kinds(out) == ["Withdraw", "Complete"]
    assert task.state_of(("t", "k1")) == "consumed"
    assert task.state_of(("t", "k2")) == "dead"


def test_the_application_can_cancel() -> None:
    task, _ = ts.started()
    ts.asked(task, {"k1": ts.ASK})
    out = task.feed(tasks.TaskCancelled())
    assert ts.kinds(out) == ["Withdraw", "Fail"]
    assert ts.fail_of(out).reason == "cancelled"


# ------------------------------------------------------------------ pacing and bounds


def test_polling_honours_the_interval_and_clamps_an_absurd_one() -> None:
    task, _ = ts.started(max_poll_interval_s=30.0)
    assert task.feed(tasks.Polled(ts.status(pollIntervalMs=2500))) == (tasks.Poll("t", 2.5),)
    assert task.feed(tasks.Polled(ts.status(pollIntervalMs=10**12))) == (tasks.Poll("t", 30.0),)


def test_a_zero_interval_is_raised_to_the_minimum() -> None:
    task, _ = ts.started()
    assert task.feed(tasks.Polled(ts.status(pollIntervalMs=0))) == (tasks.Poll("t", 0.1),)


def test_a_final_status_past_the_ttl_still_counts() -> None:
    task, clock = ts.started()
    clock.advance(120.0)  # the app slept through the TTL; the poll says completed
    assert ts.kinds(task.feed(tasks.Polled(ts.status("completed")))) == ["Complete"]
    task, clock = ts.started()
    clock.advance(120.0)
    assert isinstance(ts.fail_of(task.feed(tasks.Polled(ts.status()))), TaskExpiredError)


def test_the_task_starts_once() -> None:
    task, _ = ts.started()
    again = task.feed(tasks.TaskCreated(ts.status()))
    assert ts.kinds(again) == ["Ignore"] and again[0].reason == "started"  # type: ignore[union-attr]
    again = task.feed(tasks.TaskResumed())
    assert ts.kinds(again) == ["Ignore"] and again[0].reason == "started"  # type: ignore[union-attr]


def test_polls_are_bounded() -> None:
    task, _ = ts.started(max_polls=3)
    task.feed(tasks.Polled(ts.status()))
    task.feed(tasks.Polled(ts.status()))
    error = ts.fail_of(task.feed(tasks.Polled(ts.status())))
    assert isinstance(error, TaskPollsExceededError)


def test_poll_errors_back_off_and_are_bounded() -> None:
    task, _ = ts.started(max_poll_errors=1)
    out = task.feed(tasks.PollFailed(ts.LOST))
    assert out == (tasks.Poll("t", 0.5),)  # backoff 0.5 s, at least the interval
    assert isinstance(ts.fail_of(task.feed(tasks.PollFailed(ts.LOST))), SubmissionFailedError)


def test_a_result_nobody_asked_for_is_ignored() -> None:
    task, _ = ts.started()
    ts.asked(task, {"k1": ts.ASK})
    ts.answer(task, "k1")
    task.feed(tasks.UpdateAcked())
    out = task.feed(tasks.UpdateAcked())
    assert ts.kinds(out) == ["Ignore"] and out[0].reason == "not-awaiting"  # type: ignore[union-attr]
    ts.asked(task, {"k1": ts.ASK})  # the poll in flight; its answer resends k1 (an update out)
    out = ts.asked(task, {"k1": ts.ASK})  # no poll was asked for while the update is out
    assert ts.kinds(out) == ["Ignore"] and out[0].reason == "not-awaiting"  # type: ignore[union-attr]


def test_an_answer_to_a_key_never_listed_is_a_usage_error() -> None:
    task, _ = ts.started()
    with pytest.raises(GuardUsageError):
        ts.answer(task, "nope")


# ------------------------------------------------------------------ snapshots


def test_a_snapshot_is_typed_and_restores_the_same_decisions() -> None:
    task, clock = ts.started()
    ts.asked(task, {"k1": ts.ASK, "k2": ts.OTHER})
    ts.answer(task, "k1")
    snap = task.snapshot()
    assert isinstance(snap, tasks.TaskSnapshot) and hash(snap) == hash(task.snapshot())
    assert [k.key for k in snap.keys] == ["k1", "k2"] and snap.update == ("k1",)
    copy = tasks.TaskCall("t", clock=clock)
    copy.restore(snap)
    assert copy.snapshot() == snap
    assert copy.feed(tasks.UpdateAcked()) == task.feed(tasks.UpdateAcked())


def test_a_restart_without_a_store_presents_a_still_listed_answered_key_again() -> None:
    """What the durable store is for: a fresh TaskCall knows nothing of the answer."""
    task, clock = ts.started()
    ts.asked(task, {"k1": ts.ASK})
    ts.answer(task, "k1")
    task.feed(tasks.UpdateAcked())
    fresh = tasks.TaskCall("t", clock=clock)
    assert fresh.feed(tasks.TaskResumed()) == (tasks.Poll("t", 0.0),)
    assert ts.kinds(ts.asked(fresh, {"k1": ts.ASK})) == ["Present", "Poll"]


def test_both_engines_decide_alike() -> None:
    """The compiled tables and the ``transitions`` runtime fire the same rows."""
    runs: list[list[tuple[tasks.TaskAction, ...]]] = []
    for engine in ("tables", "transitions"):
        fired: list[tuple[str, str, str, str]] = []
        clock = FakeClock(ts.T0)
        task = tasks.TaskCall(
            "t",
            clock=clock,
            engine=engine,  # type: ignore[arg-type]
            on_fire=lambda *row, sink=fired: sink.append(row),
        )
        out = [task.feed(tasks.TaskCreated(ts.status()))]
        out.append(ts.asked(task, {"k1": ts.ASK, "k2": ts.OTHER}))
        out.append(ts.answer(task, "k1"))
        out.append(task.feed(tasks.UpdateFailed(ts.LOST)))
        out.append(ts.asked(task, {"k1": ts.ASK}))
        out.append(task.feed(tasks.UpdateAcked()))
        out.append(task.feed(tasks.Polled(ts.status("completed"))))
        runs.append(out)
        assert ("task-input", "presented", "supersede", "withdrawn") in fired
    assert runs[0] == runs[1]
