"""The task rules' exact outputs (``fsm/tasks/task.py``), pinned where ``make mutate`` found
them unpinned: every ending's typed error in full (class, reason, message, key, stream,
evidence), the ignored inputs, the backoff and ``Retry-After`` pacing, the TTL deadline
from ``createdAt`` (or from when the client first saw the task), which keys one update
carries, and what a snapshot holds."""

from __future__ import annotations

import time
from typing import Any

import pytest
import tasks_support as ts

from fsm import events as ev
from fsm.actions import Fail, Ignore, Present
from fsm.errors import GuardUsageError
from fsm.outcomes import SubmissionResult
from fsm.tasks.outcomes import TASK_EXPIRED
from fsm.tasks.task import (
    Poll,
    Polled,
    PollFailed,
    TaskCall,
    TaskCancelled,
    TaskConfig,
    TaskCreated,
    TaskResumed,
    Tick,
    Update,
    UpdateAcked,
    UpdateFailed,
)

REFUSED = SubmissionResult(
    None, {"jsonrpc": "2.0", "id": 1, "error": {"code": -32000, "message": "no"}}
)


def error_of(actions: tuple[Any, ...]) -> dict[str, Any]:
    """The whole error of the call's one ``Fail``, the last action."""
    fail = actions[-1]
    assert isinstance(fail, Fail) and fail.interaction == "t", actions
    summary: dict[str, Any] = fail.error.to_json()
    return summary


def test_a_failed_task_carries_its_error_and_status_message_as_evidence() -> None:
    task, _ = ts.started()
    said = "x" * 300
    result = ts.status("failed", error={"code": 1, "data": {2, 1}}, statusMessage=said)
    assert error_of(task.feed(Polled(result))) == {
        "error": "TaskFailedError",
        "reason": "task-failed",
        "message": "t: the task reported status failed",
        "key": None,
        "stream": "t",
        # a value JSON cannot encode is carried as its repr; each is cut at 200 characters
        "evidence": [
            "status failed",
            'error {"code": 1, "data": "{1, 2}"}',
            f'statusMessage "{said[:199]}',
        ],
    }
    assert task.state == "failed"


def test_a_cancelled_task_without_details_has_only_its_status_as_evidence() -> None:
    task, _ = ts.started()
    assert error_of(task.feed(Polled(ts.status("cancelled")))) == {
        "error": "TaskCancelledError",
        "reason": "task-cancelled",
        "message": "t: the task reported status cancelled",
        "key": None,
        "stream": "t",
        "evidence": ["status cancelled"],
    }
    assert task.state == "cancelled"


@pytest.mark.parametrize(
    ("outcome", "expected", "state"),
    [
        (
            TASK_EXPIRED,
            {
                "error": "TaskExpiredError",
                "reason": "task-expired",
                "message": "t: the task is gone (tasks/get answered -32602)",
                "evidence": [
                    "tasks/get no response (None) JSON-RPC -32602 "
                    "'Failed to retrieve task: Task has expired'",
                    "rule task-gone",
                ],
            },
            "expired",
        ),
        (
            REFUSED,
            {
                "error": "CallRejectedError",
                "reason": "jsonrpc-error",
                "message": "t: the server rejected tasks/get (jsonrpc-error)",
                "evidence": [
                    "tasks/get no response (None) JSON-RPC -32000 'no'",
                    "rule jsonrpc-error",
                ],
            },
            "failed",
        ),
    ],
)
def test_a_terminal_poll_failure_ends_the_call_with_its_rule(
    outcome: SubmissionResult, expected: dict[str, Any], state: str
) -> None:
    task, _ = ts.started()
    assert error_of(task.feed(PollFailed(outcome))) == {**expected, "key": None, "stream": "t"}
    assert task.state == state


def test_a_terminal_update_failure_names_tasks_update() -> None:
    task, _ = ts.started()
    ts.asked(task, {"k": ts.ASK})
    ts.answer(task, "k")
    error = error_of(task.feed(UpdateFailed(TASK_EXPIRED)))
    assert (error["error"], error["reason"]) == ("TaskExpiredError", "task-expired")
    assert error["message"] == "t: the task is gone (tasks/update answered -32602)"
    assert task.state == "expired"


def test_a_rejected_answer_fails_the_call_with_that_key_and_rule() -> None:
    task, _ = ts.started()
    ts.asked(task, {"k": ts.ASK})
    ts.answer(task, "k")
    assert error_of(task.feed(UpdateFailed(REFUSED))) == {
        "error": "CallRejectedError",
        "reason": "jsonrpc-error",
        "message": "t: the server rejected the answer to 'k'",
        "key": ["t", "k"],
        "stream": "t",
        "evidence": ["tasks/update no response (None) JSON-RPC -32000 'no'", "rule jsonrpc-error"],
    }


def test_failed_polls_back_off_then_fail_counting_every_failure() -> None:
    task, _ = ts.started(backoff_initial_s=2.0)
    delays = [task.feed(PollFailed(ts.LOST)) for _ in range(3)]
    assert delays == [(Poll("t", 2.0),), (Poll("t", 4.0),), (Poll("t", 8.0),)]
    assert error_of(task.feed(PollFailed(ts.LOST))) == {
        "error": "SubmissionFailedError",
        "reason": "submission-failed",
        "message": "t: tasks/get failed 4 times in a row",
        "key": None,
        "stream": "t",
        "evidence": [
            "tasks/get no response (ConnectError)",
            "rule transport-error",
            "max_poll_errors=3",
        ],
    }


def test_retry_after_paces_the_next_poll_up_to_the_longest_wait() -> None:
    task, _ = ts.started()
    assert task.feed(PollFailed(SubmissionResult(429, retry_after=3.0))) == (Poll("t", 3.0),)
    assert task.feed(PollFailed(SubmissionResult(429, retry_after=300.0))) == (Poll("t", 60.0),)


def test_failed_updates_back_off_the_next_poll_and_an_ack_resets_the_count() -> None:
    task, _ = ts.started(backoff_initial_s=2.0, max_resends=2)
    ts.asked(task, {"k": ts.ASK})
    ts.answer(task, "k")
    listed = Polled(ts.status("input_required", {"k": ts.ASK}))
    assert task.feed(listed) == ()  # an update is in flight: no poll until it settles
    assert task.feed(UpdateFailed(ts.LOST)) == (Poll("t", 2.0),)
    update = task.feed(listed)
    assert [type(a) for a in update] == [Update]
    assert task.feed(UpdateFailed(ts.LOST)) == (Poll("t", 4.0),)
    assert [type(a) for a in task.feed(listed)] == [Update]
    assert task.feed(UpdateAcked()) == (Poll("t", 0.5),)  # acked: the interval, no backoff
    ts.asked(task, {"k": ts.ASK, "j": ts.OTHER})
    ts.answer(task, "j")
    task.feed(Polled(ts.status("input_required", {"j": ts.OTHER})))
    for delay in (2.0, 4.0):  # the ack reset the count: two failures again before the third
        assert task.feed(UpdateFailed(ts.LOST)) == (Poll("t", delay),)
        task.feed(Polled(ts.status("input_required", {"j": ts.OTHER})))
    error = error_of(task.feed(UpdateFailed(ts.LOST)))
    assert error["message"] == "t: tasks/update failed 3 times in a row"
    assert error["evidence"][-1] == "max_resends=2"


def test_inputs_nothing_waits_for_are_ignored_by_name() -> None:
    task, _ = ts.started()
    assert task.feed(UpdateAcked()) == (
        Ignore("not-awaiting", "no tasks/update in flight", stream="t"),
    )
    ts.asked(task, {"k": ts.ASK})
    ts.answer(task, "k")
    assert ts.answer(task, "k") == (
        Ignore("not-presented", "('t', 'k') is submitting", key=("t", "k"), stream="t"),
    )
    assert task.feed(Polled(ts.status("input_required", {"k": ts.ASK}))) == ()  # update in flight
    assert task.feed(PollFailed(ts.LOST)) == (
        Ignore("not-awaiting", "no tasks/get in flight", stream="t"),
    )


def test_a_key_is_known_only_under_this_task() -> None:
    task, _ = ts.started()
    ts.asked(task, {"k": ts.ASK})
    assert task.state_of(("t", "k")) == "presented"
    assert task.state_of(("u", "k")) is None
    assert task.state_of(("t", "never")) is None
    with pytest.raises(GuardUsageError, match=r"^t: \('u', 'k'\) was never listed by this task$"):
        task.feed(ev.UserAnswered(("u", "k"), ts.YES))


def test_one_update_at_a_time_carries_every_answered_listed_key() -> None:
    task, _ = ts.started()
    ts.asked(task, {"a": ts.ASK, "b": ts.OTHER, "c": {**ts.ASK, "params": {"message": "Sure?"}}})
    assert ts.answer(task, "b") == (
        Update("t", {"b": ts.YES}, {"b": ("t", "b")}),
    )  # "a" unanswered
    assert ts.answer(task, "a") == ()  # one update at a time
    assert task.feed(UpdateAcked()) == (Update("t", {"a": ts.YES}, {"a": ("t", "a")}),)
    task.feed(UpdateAcked())
    # "a" and "b" were acknowledged before "c", listed after them, is answered
    assert ts.answer(task, "c") == (Update("t", {"c": ts.YES}, {"c": ("t", "c")}),)


def test_an_acknowledged_answer_is_resent_at_most_max_resubmits_times() -> None:
    task, _ = ts.started(max_resubmits=2)
    listed = Polled(ts.status("input_required", {"k": ts.ASK}))
    ts.asked(task, {"k": ts.ASK})
    ts.answer(task, "k")
    sent = []
    for _ in range(4):
        task.feed(UpdateAcked())
        sent.append(any(isinstance(a, Update) for a in task.feed(listed)))
    assert sent == [True, True, False, False]


@pytest.mark.parametrize(
    ("created", "deadline"),
    [
        (ts.CREATED, ts.T0 + 60),  # createdAt, not the clock, starts the TTL
        ("2023-11-14T22:13:20", ts.T0 + 60),  # no zone: UTC
        ("2023-11-14T22:13:20." + "0" * 38 + "+00:00", ts.T0 + 60),  # 64 characters: read
        ("2023-11-14T22:13:20." + "0" * 39 + "+00:00", ts.T0 + 70),  # 65: from first seen
        (1_700_000_000, ts.T0 + 70),  # not a string: from first seen
        ("yesterday", ts.T0 + 70),
    ],
)
def test_the_ttl_runs_from_created_at_or_from_when_the_client_first_saw_it(
    created: Any, deadline: float
) -> None:
    now = [ts.T0 + 10.0]
    task = TaskCall("t", clock=lambda: now[0])
    task.feed(TaskCreated(ts.status(createdAt=created)))
    assert task.deadline() == deadline
    now[0] += 20.0
    task.feed(Polled(ts.status(createdAt=created)))
    assert task.deadline() == deadline  # a later poll does not move it
    assert task.snapshot().created == deadline - 60
    now[0] = deadline
    assert error_of(task.feed(Tick())) == {
        "error": "TaskExpiredError",
        "reason": "ttl-passed",
        "message": "t: the task's createdAt + ttlMs passed",
        "key": None,
        "stream": "t",
        "evidence": [f"deadline t={deadline:.3f}", f"checked at t={deadline:.3f}"],
    }


def test_polls_exceeded_names_the_bound_and_the_last_status() -> None:
    task, _ = ts.started(max_polls=1)
    assert error_of(task.feed(Polled(ts.status()))) == {
        "error": "TaskPollsExceededError",
        "reason": "polls-exceeded",
        "message": "t: polled 1 times without the task ending",
        "key": None,
        "stream": "t",
        "evidence": ["max_polls=1", "last status working"],
    }


def test_a_snapshot_holds_the_answers_the_cause_and_the_ttl() -> None:
    task, _ = ts.started()
    ts.asked(task, {"k": ts.ASK})
    ts.answer(task, "k")
    snap = task.snapshot()
    (key,) = snap.keys
    (question,) = snap.questions
    assert key.answer == question.answer == '{"action": "accept", "content": {"ok": true}}'
    assert question.prompt == "k"
    assert (snap.created, snap.deadline) == (ts.T0, ts.T0 + 60)
    task.feed(UpdateFailed(REFUSED))
    snap = task.snapshot()
    assert snap.cause is not None and snap.cause.reason == "jsonrpc-error"
    assert snap.keys[0].cause is not None and snap.keys[0].cause.key == ("t", "k")
    again = TaskCall("t", clock=lambda: ts.T0)
    again.restore(snap)
    assert again.snapshot() == snap


def test_a_restored_task_sends_answers_under_its_own_keys() -> None:
    task, _ = ts.started()
    ts.asked(task, {"k": ts.ASK})
    again = TaskCall("t", clock=lambda: ts.T0)
    again.restore(task.snapshot())
    assert again.feed(ev.UserAnswered(("t", "k"), ts.YES)) == (
        Update("t", {"k": ts.YES}, {"k": ("t", "k")}),
    )


def test_an_ended_task_ignores_everything_by_name() -> None:
    task, _ = ts.started()
    ts.asked(task, {"k": ts.ASK})
    task.feed(Polled(ts.status("completed")))
    assert task.snapshot().get_pending is False  # an ended call waits for nothing
    ended = (Ignore("task-ended", "t already ended", stream="t"),)
    assert task.feed(ev.UserAnswered(("t", "k"), ts.YES)) == ended
    assert task.feed(Tick()) == ended


def test_a_second_start_and_a_result_nothing_waits_for_are_ignored() -> None:
    task, _ = ts.started()
    started_already = (Ignore("started", "the task is polled already", stream="t"),)
    assert task.feed(TaskResumed()) == started_already
    assert task.feed(TaskCreated(ts.status())) == started_already
    task.feed(Polled(ts.status()))
    ts.asked(task, {"k": ts.ASK})
    ts.answer(task, "k")
    task.feed(Polled(ts.status("input_required", {"k": ts.ASK})))  # the update is in flight
    assert task.feed(Polled(ts.status("input_required", {"k": ts.ASK}))) == (
        Ignore("not-awaiting", "no tasks/get in flight", stream="t"),
    )


def test_the_application_cancelling_fails_the_call_with_its_reason() -> None:
    task, _ = ts.started()
    error = error_of(task.feed(TaskCancelled("the user closed the window")))
    assert (error["error"], error["reason"]) == ("TaskCancelledError", "cancelled")
    assert error["message"] == "the user closed the window"


def test_a_successful_poll_resets_the_poll_failures() -> None:
    task, _ = ts.started(backoff_initial_s=2.0)
    assert task.feed(PollFailed(ts.LOST)) == (Poll("t", 2.0),)
    assert task.feed(Polled(ts.status())) == (Poll("t", 0.5),)
    assert task.feed(PollFailed(ts.LOST)) == (Poll("t", 2.0),)  # counted from the start again


def test_the_task_machine_follows_the_status_and_the_keys_their_listing() -> None:
    task, _ = ts.started()
    assert task.snapshot().status == "working"
    ts.asked(task, {"k": ts.ASK})
    assert task.state == "input_required"
    assert [(k.key, k.listed) for k in task.snapshot().keys] == [("k", True)]
    assert task.snapshot().questions[0].prompt is None  # not answered yet
    task.feed(Polled(ts.status()))
    assert task.state == "working"
    assert [(k.key, k.listed, k.state) for k in task.snapshot().keys] == [("k", False, "withdrawn")]
    assert task.feed(Polled(ts.status("input_required", {"k": ts.ASK}))) == (
        Ignore("key-ended", "'k' is withdrawn", ("t", "k"), "t"),
        Poll("t", 0.5),
    )
    assert [(k.key, k.listed) for k in task.snapshot().keys] == [("k", True)]


def test_a_key_listed_again_does_not_hide_the_new_keys_after_it() -> None:
    task, _ = ts.started()
    ts.asked(task, {"a": ts.ASK})
    shown = ts.asked(task, {"a": ts.ASK, "b": ts.OTHER})
    assert [a.key for a in shown if isinstance(a, Present)] == [("t", "b")]


def test_the_same_params_under_another_method_are_another_question() -> None:
    task, _ = ts.started()
    ts.asked(task, {"a": ts.ASK})
    ts.answer(task, "a")
    task.feed(UpdateAcked())
    sampled = {"method": "sampling/createMessage", "params": ts.ASK["params"]}
    shown = task.feed(Polled(ts.status("input_required", {"b": sampled})))
    assert [type(a).__name__ for a in shown] == ["Present", "Poll"]


def test_a_malformed_result_quotes_at_most_80_characters_of_the_value() -> None:
    long = "x" * 100
    for field, quoted in (
        ("taskId", f"taskId {long[:80]!r} is not this call's task 't'"),
        ("status", f"unknown status {long[:80]!r}"),
    ):
        task, _ = ts.started()
        error = error_of(task.feed(Polled({**ts.status(), field: long})))
        assert error["message"] == f"t: malformed tasks/get result: {quoted}"


def test_a_resumed_task_that_may_not_poll_fails_with_the_initial_status() -> None:
    task = TaskCall("t", clock=lambda: ts.T0, config=TaskConfig(max_polls=0))
    assert error_of(task.feed(TaskResumed()))["evidence"] == ["max_polls=0", "last status working"]


@pytest.mark.parametrize("zone", ["UTC", "Asia/Tokyo", "America/New_York"])
def test_created_at_is_read_in_its_own_zone_whatever_the_machines(
    zone: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TZ", zone)
    time.tzset()
    try:
        for created in ("2023-11-14T22:13:20", "2023-11-15T07:13:20+09:00"):
            task = TaskCall("t", clock=lambda: ts.T0)
            task.feed(TaskCreated(ts.status(createdAt=created)))
            assert task.deadline() == ts.T0 + 60, created
    finally:
        monkeypatch.undo()
        time.tzset()


def test_a_key_listed_again_after_a_gap_does_not_hide_the_new_keys_after_it() -> None:
    task, _ = ts.started()
    ts.asked(task, {"a": ts.ASK})
    task.feed(Polled(ts.status()))  # "a" no longer listed: withdrawn
    shown = ts.asked(task, {"a": ts.ASK, "b": ts.OTHER})
    assert [a.key for a in shown if isinstance(a, Present)] == [("t", "b")]


def test_a_reask_counts_each_reuse_and_its_failure_names_the_key_and_question() -> None:
    task, _ = ts.started(max_reasks=2)
    ts.asked(task, {"k1": ts.ASK})
    ts.answer(task, "k1")
    task.feed(UpdateAcked())
    ts.asked(task, {"k2": ts.ASK})  # the stored answer, once
    assert [q.reuses for q in task.snapshot().questions] == [1]
    task.feed(UpdateAcked())
    ts.asked(task, {"k3": ts.ASK})  # and twice
    assert [q.reuses for q in task.snapshot().questions] == [2]
    task.feed(UpdateAcked())
    error = error_of(ts.asked(task, {"k4": ts.ASK}))  # past the budget
    (question,) = task.snapshot().questions
    assert f"key 'k4' re-asks {question.question}" in error["evidence"]
    assert error["message"] == (
        f"t: the server asked elicitation/create {question.question} again under key 'k4'"
        " after it was answered; the user is not asked twice"
    )


def test_a_fresh_task_snapshot_waits_for_no_poll() -> None:
    assert TaskCall("t", clock=lambda: ts.T0).snapshot().get_pending is False


def test_a_value_that_is_no_number_is_quoted_up_to_forty_characters() -> None:
    task, _ = ts.started()
    error = error_of(task.feed(Polled(ts.status("working", ttlMs="x" * 60))))
    assert error["message"].endswith(f"ttlMs is {'x' * 40!r}, not a number >= 0")
