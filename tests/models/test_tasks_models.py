"""The tasks-era models (their pins, the task rules passing every variant without a crash
and failing P2 with one (no durable store yet), the ext-tasks 0.2.2 requester found at
fault with its shortest counterexamples: ``pins.py``): what the counterexamples are, the
rows the rules cover, bounds, and proof that the world's restated properties can fail (a
client that breaks each one is caught)."""

from __future__ import annotations

from typing import NamedTuple

import pins
import pytest
from faulty import FaultyClient

from fsm.checker import check
from fsm.worlds.common import BoundsError
from fsm.worlds.tasks import USER_ANSWER, Input, Output, TasksBounds, TasksWorld


@pytest.mark.parametrize(
    ("name", "fault"),
    [
        ("ext-tasks-0.2.2[crash]", "client crashes"),
        ("guarded-tasks[answers,crash]", "client crashes"),
    ],
)
def test_the_counterexample_asks_an_answered_key_again(name: str, fault: str) -> None:
    steps = pins.counterexample(name, "P2").names
    assert steps == ["server answers the poll", "user answers key 0", fault, steps[-1]]
    assert steps[-1] == "server answers the poll"


def test_coverage_of_the_declared_rows() -> None:
    fired: set[str] = set()
    for name in pins.FAMILIES["tasks"].pins:
        if name.startswith("guarded"):
            _, report = pins.report(name)
            fired |= set(report.coverage.fired)
    for row in (
        "task-input: new -reuse-> answered",
        "task-input: submitted -resubmit-> submitting",
        "task-input: submitted -consume-> consumed",
        "task-input: submitting -retry-> answered",
        "task-input: presented -supersede-> withdrawn",
        "task-input: answered -supersede-> withdrawn",
        "task-input: presented -orphan-> dead",
        "task: input_required -expire-> expired",
        "task: input_required -fail-> failed",
        "task: input_required -exhaust-> failed",
        "task: working -complete-> completed",
    ):
        assert row in fired, row


# ------------------------------------------------- the restated properties can fail


class _Bad(NamedTuple):
    shown: frozenset[int] = frozenset()
    sent: bool = False
    ended: bool = False


class _BadClient(FaultyClient[_Bad]):
    """Presents each key it has not shown, then breaks one property on purpose: ``late``
    answers after the TTL passed (P6), ``resend`` updates again after -32602 (P3),
    ``revive`` presents a key the server withdrew (P1), ``fabricate`` answers without
    asking (P4), ``twice`` ends the call twice (P5), ``loop`` resends its answer on every
    ack, for ever (L1)."""

    start = _Bad()

    def react(self, c: _Bad, t: float, inp: Input) -> tuple[_Bad, tuple[Output, ...]]:
        if inp[0] == "status":
            if inp[1] in ("completed", "failed"):
                done: tuple[Output, ...] = (("end", "completed"),)
                return c._replace(ended=True), done * (2 if self.fault == "twice" else 1)
            keys = [k for k, _ in inp[2]]
            if self.fault == "fabricate" and keys:
                return c, (("update", tuple((k, USER_ANSWER) for k in keys)),)
            new = [k for k in keys if k not in c.shown]
            if self.fault == "revive":  # keys the server no longer lists, shown again
                new += sorted(c.shown - set(keys))
            out: tuple[Output, ...] = tuple(("present", k) for k in new)
            return c._replace(shown=c.shown | set(new)), (*out, ("poll",))
        if inp[0] == "answer":
            return c._replace(sent=True), (("update", ((inp[1], USER_ANSWER),)),)
        if inp[0] == "acked" and self.fault == "loop":
            return c, (("update", ((0, USER_ANSWER),)),)
        if inp[0] == "acked":
            return c, (("poll",),)
        if inp == ("error", "update", "expired") and self.fault == "resend":
            return c, (("update", ((0, USER_ANSWER),)),)
        if inp[0] == "error":
            return c._replace(ended=True), (("end", "failed"),)
        return c, ()


@pytest.mark.parametrize(
    ("fault", "bounds", "prop"),
    [
        ("late", TasksBounds(expiries=1), "P6"),
        ("resend", TasksBounds(purges=1), "P3"),
        ("revive", TasksBounds(supersedes=1), "P1"),
        ("fabricate", TasksBounds(), "P4"),
        ("twice", TasksBounds(), "P5"),
        ("loop", TasksBounds(), "L1"),
    ],
)
def test_each_restated_property_catches_a_client_that_breaks_it(
    fault: str, bounds: TasksBounds, prop: str
) -> None:
    report = check(TasksWorld(_BadClient(fault), bounds, name=fault))
    report.assert_violated(prop)


def test_bounds_are_checked_and_set_from_text() -> None:
    with pytest.raises(BoundsError, match=r"TasksBounds.crashes: -1 is not an integer >= 0"):
        TasksBounds(crashes=-1)
    model, _ = pins.report("guarded-tasks[answers]")
    crashing = model.with_bounds({"crashes": "1"})
    assert crashing.bounds.crashes == 1 and crashing.name.endswith("[crashes=1]")
    assert "P2" in {r.name for r in check(crashing).results if r.verdict.value == "violated"}
    with pytest.raises(BoundsError, match="no bound 'requests'"):
        model.with_bounds({"requests": "2"})


def test_ext_tasks_presents_an_answered_question_again_under_its_new_key() -> None:
    assert pins.counterexample("ext-tasks-0.2.2[reask]", "P2").names == [
        "server answers the poll",
        "user answers key 0",
        "server acknowledges the update",
        "server takes the answers",
        "server answers the poll",
    ]
