"""The tasks-era models: pinned state spaces, the task rules passing every variant without
a crash and failing P2 with one (no durable store yet), the ext-tasks 0.2.2 requester
found at fault with its shortest counterexamples, and proof that the world's restated
properties can fail (a client that breaks each one is caught)."""

from __future__ import annotations

from typing import NamedTuple

import pytest
from shipped import Shipped, pin_tests

from fsm.checker import check
from fsm.worlds.common import BoundsError
from fsm.worlds.tasks import USER_ANSWER, Input, Output, TasksBounds, TasksWorld

MODEL_FILES = ("guarded_tasks.py", "ext_tasks_0_2_2.py")

PINNED: dict[str, tuple[int, int]] = {
    "guarded-tasks[never,ttl]": (4, 3),
    "guarded-tasks[never,supersede,ttl]": (12, 13),
    "guarded-tasks[never,fail,ttl]": (10, 11),
    "guarded-tasks[answers]": (46, 50),
    "guarded-tasks[answers,ttl]": (77, 103),
    "guarded-tasks[answers,supersede]": (191, 214),
    "guarded-tasks[answers,supersede,ttl]": (320, 438),
    "guarded-tasks[answers,reask]": (126, 141),
    "guarded-tasks[answers,reask,ttl]": (212, 289),
    "guarded-tasks[answers,fail]": (90, 101),
    "guarded-tasks[answers,fail,ttl]": (142, 199),
    "guarded-tasks[answers,purge]": (92, 99),
    "guarded-tasks[answers,purge,ttl]": (143, 195),
    "guarded-tasks[answers,drop]": (72, 83),
    "guarded-tasks[answers,drop,ttl]": (122, 165),
    "guarded-tasks[answers,lost]": (112, 131),
    "guarded-tasks[answers,lost,ttl]": (183, 259),
    "guarded-tasks[answers,supersede,reask]": (537, 605),
    "guarded-tasks[answers,supersede,reask,ttl]": (898, 1235),
    "guarded-tasks[answers,supersede,fail]": (377, 431),
    "guarded-tasks[answers,supersede,fail,ttl]": (595, 846),
    "guarded-tasks[answers,supersede,purge]": (385, 422),
    "guarded-tasks[answers,supersede,purge,ttl]": (598, 828),
    "guarded-tasks[answers,supersede,drop]": (372, 440),
    "guarded-tasks[answers,supersede,drop,ttl]": (631, 874),
    "guarded-tasks[answers,supersede,lost]": (509, 603),
    "guarded-tasks[answers,supersede,lost,ttl]": (835, 1190),
    "guarded-tasks[answers,reask,fail]": (247, 287),
    "guarded-tasks[answers,reask,fail,ttl]": (391, 566),
    "guarded-tasks[answers,reask,purge]": (264, 285),
    "guarded-tasks[answers,reask,purge,ttl]": (407, 562),
    "guarded-tasks[answers,reask,drop]": (232, 279),
    "guarded-tasks[answers,reask,drop,ttl]": (392, 548),
    "guarded-tasks[answers,reask,lost]": (364, 436),
    "guarded-tasks[answers,reask,lost,ttl]": (599, 858),
    "guarded-tasks[answers,fail,purge]": (204, 221),
    "guarded-tasks[answers,fail,purge,ttl]": (297, 408),
    "guarded-tasks[answers,fail,drop]": (144, 169),
    "guarded-tasks[answers,fail,drop,ttl]": (229, 324),
    "guarded-tasks[answers,fail,lost]": (216, 257),
    "guarded-tasks[answers,fail,lost,ttl]": (335, 490),
    "guarded-tasks[answers,purge,drop]": (144, 159),
    "guarded-tasks[answers,purge,drop,ttl]": (227, 310),
    "guarded-tasks[answers,purge,lost]": (224, 253),
    "guarded-tasks[answers,purge,lost,ttl]": (340, 482),
    "guarded-tasks[answers,drop,lost]": (168, 209),
    "guarded-tasks[answers,drop,lost,ttl]": (279, 399),
    "guarded-tasks[answers] x2": (526, 736),
    "guarded-tasks[answers,supersede] x2": (4204, 6042),
    "guarded-tasks[answers,reask] x2": (2215, 3037),
    "guarded-tasks[answers,drop] x2": (1019, 1582),
    "guarded-tasks[answers,lost] x2": (1686, 2476),
    "guarded-tasks[answers,lost,ttl] x2": (2616, 4441),
    "guarded-tasks[answers,crash]": (164, 223),
    "ext-tasks-0.2.2[reask]": (15, 17),
    "ext-tasks-0.2.2[update-fails]": (11, 12),
    "ext-tasks-0.2.2[crash]": (43, 60),
}

# (steps, loop_start) of each expected shortest counterexample.
SHORTEST = {
    "guarded-tasks[answers,crash]": {"P2": (4, None)},
    "ext-tasks-0.2.2[reask]": {"P2": (5, None)},
    "ext-tasks-0.2.2[crash]": {"P2": (4, None)},
}

SHIPPED = Shipped(MODEL_FILES)
_report = SHIPPED.report


test_every_tasks_model_is_pinned, test_state_space_is_pinned = pin_tests(SHIPPED, PINNED)


@pytest.mark.parametrize(
    "name", sorted(n for n in PINNED if n.startswith("guarded") and n not in SHORTEST)
)
def test_the_task_rules_satisfy_every_property(name: str) -> None:
    model, report = _report(name)
    report.assert_properties()
    assert report.result("presented").path is not None  # not vacuous
    if model.bounds.user == "answers":
        assert report.result("completed").path is not None


@pytest.mark.parametrize("name", sorted(SHORTEST))
def test_what_must_fail_fails_exactly_as_pinned(name: str) -> None:
    SHIPPED.assert_violates_exactly(name, SHORTEST[name])


@pytest.mark.parametrize(
    ("name", "fault"),
    [
        ("ext-tasks-0.2.2[crash]", "client crashes"),
        ("guarded-tasks[answers,crash]", "client crashes"),
    ],
)
def test_the_counterexample_asks_an_answered_key_again(name: str, fault: str) -> None:
    _, report = _report(name)
    steps = [str(s.action) for s in report.assert_violated("P2").steps]
    assert steps == ["server answers the poll", "user answers key 0", fault, steps[-1]]
    assert steps[-1] == "server answers the poll"


def test_coverage_of_the_declared_rows() -> None:
    fired: set[str] = set()
    for name in PINNED:
        if name.startswith("guarded"):
            _, report = _report(name)
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


class _BadClient:
    """Presents each key it has not shown, then breaks one property on purpose: ``late``
    answers after the TTL passed (P6), ``resend`` updates again after -32602 (P3),
    ``revive`` presents a key the server withdrew (P1), ``fabricate`` answers without
    asking (P4), ``twice`` ends the call twice (P5), ``loop`` resends its answer on every
    ack, for ever (L1)."""

    def __init__(self, fault: str) -> None:
        self.fault = self.name = fault

    def init(self) -> _Bad:
        return _Bad()

    def step(self, c: _Bad, t: float, inp: Input) -> tuple[_Bad, tuple[Output, ...]]:
        if c.ended:
            return c, ()
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
    model, _ = _report("guarded-tasks[answers]")
    crashing = model.with_bounds({"crashes": "1"})
    assert crashing.bounds.crashes == 1 and crashing.name.endswith("[crashes=1]")
    assert "P2" in {r.name for r in check(crashing).results if r.verdict.value == "violated"}
    with pytest.raises(BoundsError, match="no bound 'requests'"):
        model.with_bounds({"requests": "2"})


def test_ext_tasks_presents_an_answered_question_again_under_its_new_key() -> None:
    _, report = _report("ext-tasks-0.2.2[reask]")
    steps = [str(s.action) for s in report.assert_violated("P2").steps]
    assert steps == [
        "server answers the poll",
        "user answers key 0",
        "server acknowledges the update",
        "server takes the answers",
        "server answers the poll",
    ]


def test_ext_tasks_ends_its_execution_once_when_an_update_fails() -> None:
    """A failed update releases its keys and rethrows: the execution fails, nothing is
    presented twice (a second prompt needs ``resumeTask``: the crash model)."""
    _, report = _report("ext-tasks-0.2.2[update-fails]")
    report.assert_properties()
