"""The tasks conformance kit against the library's task rules (pass) and the ext-tasks
0.2.2 requester as measured (found presenting a key twice). Derandomized, no example
database."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pytest
from hypothesis.stateful import run_state_machine_as_test

from fsm import actions as act
from fsm import properties as P
from fsm.tasks.task import TaskAction, TaskEvent
from fsm.testing.kit import ConformanceFailure
from fsm.testing.tasks_kit import TasksClientFactory, tasks_conformance_machine
from support.kit_runs import FIXED, first_failure
from support.tasks_clients import ExtTasks022Client, RepollingRequester, guarded_task


def failure_of(factory: TasksClientFactory, check: set[str] | None = None) -> ConformanceFailure:
    return first_failure(tasks_conformance_machine(factory, check=check))


def test_the_task_rules_conform() -> None:
    run_state_machine_as_test(tasks_conformance_machine(guarded_task), settings=FIXED)


def test_the_ext_tasks_requester_is_found_presenting_a_question_twice() -> None:
    """It de-duplicates keys, not questions: a re-ask under a new key is asked again."""
    err = failure_of(ExtTasks022Client, check={"P2"})
    assert err.name == "P2" and "asks again what" in err.why


def test_a_key_released_by_a_failed_update_is_judged_presented_twice() -> None:
    """The kit's judgement of a loop that polls on after a failed update, step by step:
    the update is lost, the released key is listed again and presented again."""
    kit = tasks_conformance_machine(RepollingRequester, questions=1)()
    kit.server_answers_poll()
    kit.user_answers(0)
    kit.server_answers_update("lose")
    with pytest.raises(ConformanceFailure) as info:
        kit.server_answers_poll()
    assert info.value.name == "P2"
    assert info.value.why.startswith("('task', 'k0') presented a second time")


def test_the_task_rules_pass_the_same_steps() -> None:
    kit = tasks_conformance_machine(guarded_task, questions=1)()
    kit.server_answers_poll()
    kit.user_answers(0)
    kit.server_answers_update("lose")
    kit.server_answers_poll()
    kit.teardown()
    assert kit.ended == 1


def test_the_ext_tasks_requester_is_found_answering_past_the_ttl() -> None:
    err = failure_of(ExtTasks022Client, check={"P6"})
    assert err.name == "P6" and "after the task's TTL passed" in err.why


def test_bad_bounds_are_refused() -> None:
    with pytest.raises(ValueError, match="questions"):
        tasks_conformance_machine(guarded_task, questions=0)


class NeverEnds:
    """The task rules with their outcome dropped: the task never ends."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self.inner = guarded_task(clock)

    def feed(self, event: TaskEvent) -> Sequence[TaskAction]:
        return [a for a in self.inner.feed(event) if not isinstance(a, act.Complete | act.Fail)]


def test_a_task_that_never_ends_is_found_by_the_drain() -> None:
    err = failure_of(NeverEnds)
    assert err.name == "P5"


def test_ext_tasks_ends_its_execution_when_an_update_fails() -> None:
    """ext-tasks 0.2.2 releases the keys of a failed update and rethrows: one prompt,
    one failed outcome, nothing presented again on those steps."""
    kit = tasks_conformance_machine(ExtTasks022Client, questions=1)()
    kit.server_answers_poll()
    kit.user_answers(0)
    kit.server_answers_update("lose")
    kit.server_answers_poll()
    kit.teardown()
    presented = [obs for obs, _ in kit.log if isinstance(obs, P.Presented)]
    assert len(presented) == 1 and kit.ended == 1 and not kit.violated
