"""Bad input to the task rules: every malformed ``tasks/get`` result ends the call with one
``MalformedTaskError`` (prompts withdrawn first), never an exception, and what one task
remembers stays within ``max_keys``."""

from __future__ import annotations

import sys
from typing import Any

import pytest
from tasks_support import ASK, OTHER, asked, fail_of, kinds, started, status

from fsm import actions as act
from fsm.errors import MalformedTaskError
from fsm.tasks.task import Polled, TaskCall, TaskConfig, TaskCreated


def _big(n: int) -> dict[str, Any]:
    return {f"k{i}": {"method": "elicitation/create", "params": {"n": i}} for i in range(n)}


@pytest.mark.parametrize(
    ("result", "needle"),
    [
        (["not", "an", "object"], "result is list, not an object"),
        (status("paused"), "unknown status 'paused'"),
        (status("input_required", ["k1"]), "inputRequests is list, not a map"),
        (status("input_required"), "inputRequests is NoneType, not a map"),
        (status("input_required", {"k1": "ask"}), "is not a {method, params} object"),
        (status("input_required", {"k1": {"method": "tools/call"}}), "asks 'tools/call'"),
        (
            status("input_required", {"k1": {"method": "elicitation/create", "params": [1]}}),
            "params is not an object",
        ),
        (status("input_required", {"k" * 300: ASK}), "longer than max_key_chars=256"),
        (status("working", taskId="other"), "taskId 'other' is not this call's task 't'"),
        (status("working", ttlMs="soon"), "ttlMs is 'soon', not a number >= 0"),
        (status("working", pollIntervalMs=float("nan")), "pollIntervalMs is 'nan'"),
        (status("input_required", _big(65)), "65 inputRequests (max_input_requests=64)"),
    ],
    ids=[
        "not-an-object",
        "unknown-status",
        "input-requests-a-list",
        "input-required-without-requests",
        "request-not-an-object",
        "method-not-served",
        "params-not-an-object",
        "key-too-long",
        "task-id-changed",
        "ttl-not-a-number",
        "interval-nan",
        "huge-map",
    ],
)
def test_a_malformed_result_fails_the_call_once(result: Any, needle: str) -> None:
    task, _ = started()
    asked(task, {"k1": ASK})
    out = task.feed(Polled(result))
    assert kinds(out) == ["Withdraw", "Fail"]
    assert out[0] == act.Withdraw(("t", "k1"), "malformed-task")
    error = fail_of(out)
    assert isinstance(error, MalformedTaskError) and needle in str(error)


def test_a_key_reused_with_a_different_question_is_a_protocol_violation() -> None:
    task, _ = started()
    asked(task, {"k1": ASK})
    error = fail_of(asked(task, {"k1": OTHER}))
    assert isinstance(error, MalformedTaskError)
    assert "key 'k1' reused with a different question" in str(error)


def test_memory_per_task_is_bounded_by_max_keys() -> None:
    task, _ = started(max_keys=20, max_polls=100)
    for poll in range(19):  # a server that supersedes its question every poll
        out = asked(task, {f"k{poll}": {"method": "elicitation/create", "params": {"n": poll}}})
        assert "Present" in kinds(out)
    assert len(task.snapshot().keys) == 19
    out = asked(task, {"k19": ASK, "k20": OTHER})
    error = fail_of(out)
    assert isinstance(error, MalformedTaskError) and "max_keys=20" in str(error)
    assert len(task.snapshot().keys) <= 20


def test_input_requests_on_another_status_are_ignored() -> None:
    """Documented: only ``input_required`` carries questions; a stray map is not read."""
    task, _ = started()
    out = task.feed(Polled(status("working", ["garbage"])))
    assert kinds(out) == ["Poll"]


@pytest.mark.parametrize(
    "garbage",
    [None, 0, "x", [], {}, {"status": None}, {"status": "input_required", "inputRequests": 7}],
)
def test_garbage_as_the_created_task_never_raises(garbage: Any) -> None:
    task = TaskCall("t", clock=lambda: 0.0)
    out = task.feed(TaskCreated(garbage))
    assert isinstance(fail_of(out), MalformedTaskError)


@pytest.mark.parametrize(
    ("knobs", "needle"),
    [
        ({"max_polls": -1}, "^TaskConfig.max_polls: -1 is not an integer >= 0$"),
        ({"max_resends": True}, "^TaskConfig.max_resends: True is not an integer >= 0$"),
        ({"max_reasks": -1}, "^TaskConfig.max_reasks: -1 is not an integer >= 0$"),
        (
            {"on_reask": "ask-again"},
            "^TaskConfig.on_reask: 'ask-again' is not one of resubmit, fail$",
        ),
    ],
)
def test_a_config_out_of_its_bounds_is_refused_at_construction(
    knobs: dict[str, Any], needle: str
) -> None:
    with pytest.raises(ValueError, match=needle):
        TaskConfig(**knobs)


def test_the_largest_float_is_a_ttl_and_an_interval_in_range() -> None:
    """The range of ``ttlMs`` and ``pollIntervalMs`` ends at the largest finite float,
    itself included (past it: a number no float holds, one ``MalformedTaskError``)."""
    largest = sys.float_info.max
    task, _ = started()
    out = task.feed(Polled(status("working", ttlMs=largest, pollIntervalMs=largest)))
    assert "Fail" not in kinds(out), out
