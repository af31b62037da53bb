"""The MRTR-era models: pinned state spaces, the guarded rules passing every variant, the
mcp 2.3.0 driver found at fault with its shortest counterexamples, and proof that the
world's restated properties can fail (a client that breaks each one is caught)."""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

import pytest
from shipped import Shipped, pin_tests

from fsm.checker import check
from fsm.mrtr.call import MrtrConfig
from fsm.worlds.mrtr import USER_ANSWER, Input, MrtrBounds, MrtrWorld, Output
from models.guarded_mrtr import MrtrGuardPolicy

ROOT = Path(__file__).resolve().parents[2]
MODEL_FILES = ("guarded_mrtr.py", "mcp_sdk_2_3_mrtr.py")

PINNED: dict[str, tuple[int, int]] = {
    "guarded-mrtr[reject,answers,seen]": (39, 44),
    "guarded-mrtr[reject,answers,missed]": (47, 56),
    "guarded-mrtr[reject,never,seen]": (16, 16),
    "guarded-mrtr[reject,answers,seen,restart]": (104, 131),
    "guarded-mrtr[reject,answers,missed,restart]": (124, 167),
    "guarded-mrtr[reject,never,seen,restart]": (40, 44),
    "guarded-mrtr[reject,answers,seen,polls]": (64, 79),
    "guarded-mrtr[reject,answers,missed,polls]": (72, 91),
    "guarded-mrtr[reject,answers,seen,polls,restart]": (184, 242),
    "guarded-mrtr[reject,answers,missed,polls,restart]": (204, 278),
    "guarded-mrtr[reject,answers,seen,reasks]": (64, 79),
    "guarded-mrtr[reject,answers,missed,reasks]": (72, 91),
    "guarded-mrtr[reject,answers,seen,reasks,restart]": (184, 242),
    "guarded-mrtr[reject,answers,missed,reasks,restart]": (204, 278),
    "guarded-mrtr[reject,answers,seen,reasks,polls]": (95, 125),
    "guarded-mrtr[reject,answers,missed,reasks,polls]": (103, 137),
    "guarded-mrtr[reject,answers,seen,reasks,polls,restart]": (288, 389),
    "guarded-mrtr[reject,answers,missed,reasks,polls,restart]": (308, 425),
    "guarded-mrtr[reask,answers,seen]": (41, 48),
    "guarded-mrtr[reask,answers,missed]": (49, 60),
    "guarded-mrtr[reask,never,seen]": (16, 16),
    "guarded-mrtr[reask,answers,seen,restart]": (131, 174),
    "guarded-mrtr[reask,answers,missed,restart]": (151, 210),
    "guarded-mrtr[reask,never,seen,restart]": (40, 44),
    "guarded-mrtr[reask,answers,seen,polls]": (71, 91),
    "guarded-mrtr[reask,answers,missed,polls]": (79, 103),
    "guarded-mrtr[reask,answers,seen,polls,restart]": (280, 390),
    "guarded-mrtr[reask,answers,missed,polls,restart]": (300, 426),
    "guarded-mrtr[reask,answers,seen,reasks]": (65, 83),
    "guarded-mrtr[reask,answers,missed,reasks]": (73, 95),
    "guarded-mrtr[reask,answers,seen,reasks,restart]": (202, 285),
    "guarded-mrtr[reask,answers,missed,reasks,restart]": (222, 321),
    "guarded-mrtr[reask,answers,seen,reasks,polls]": (95, 129),
    "guarded-mrtr[reask,answers,missed,reasks,polls]": (103, 141),
    "guarded-mrtr[reask,answers,seen,reasks,polls,restart]": (297, 432),
    "guarded-mrtr[reask,answers,missed,reasks,polls,restart]": (317, 468),
    "guarded-mrtr[reject,answers,seen,reasks,restart] x2": (248, 326),
    "guarded-mrtr[reject,answers,missed,reasks,restart] x2": (328, 462),
    "guarded-mrtr[reject,answers,seen,reasks,polls,restart] x2": (352, 473),
    "guarded-mrtr[reject,answers,missed,reasks,polls,restart] x2": (432, 609),
    "guarded-mrtr[reask,answers,seen,reasks,restart] x2": (266, 369),
    "guarded-mrtr[reask,answers,missed,reasks,restart] x2": (346, 505),
    "guarded-mrtr[reask,answers,seen,reasks,polls,restart] x2": (361, 516),
    "guarded-mrtr[reask,answers,missed,reasks,polls,restart] x2": (441, 652),
    "mcp-sdk-2.3.0-mrtr[reasking-tool]": (32, 32),
    "mcp-sdk-2.3.0-mrtr[reask-on-expiry]": (31, 33),
    "mcp-sdk-2.3.0-mrtr[reject-expired]": (27, 28),
}

# (steps, loop_start) of each expected shortest counterexample.
SHORTEST = {
    "mcp-sdk-2.3.0-mrtr[reasking-tool]": {"P2": (3, None), "P6": (3, None)},
    "mcp-sdk-2.3.0-mrtr[reask-on-expiry]": {"P2": (5, None), "P6": (3, None)},
    "mcp-sdk-2.3.0-mrtr[reject-expired]": {"P6": (3, None)},
}

SHIPPED = Shipped(MODEL_FILES)
_all_models = SHIPPED.models
_report = SHIPPED.report


test_every_mrtr_model_is_pinned, test_state_space_is_pinned = pin_tests(
    SHIPPED, PINNED, _all_models
)


@pytest.mark.parametrize("name", sorted(n for n in PINNED if n.startswith("guarded")))
def test_the_mrtr_rules_satisfy_every_property(name: str) -> None:
    model, report = _report(name)
    report.assert_properties()
    assert report.result("presented").path is not None  # not vacuous
    if model.bounds.user == "answers":
        assert report.result("completed").path is not None


@pytest.mark.parametrize("name", sorted(SHORTEST))
def test_the_sdk_driver_violates_exactly_what_it_should(name: str) -> None:
    SHIPPED.assert_violates_exactly(name, SHORTEST[name])


def test_the_reasking_counterexample_is_a_second_prompt_for_an_answered_question() -> None:
    _, report = _report("mcp-sdk-2.3.0-mrtr[reasking-tool]")
    names = [str(s.action) for s in report.assert_violated("P2").steps]
    assert names == ["server responds", "user answers 0", "server responds"]


def test_coverage_of_the_declared_rows() -> None:
    fired: set[str] = set()
    declared: list[str] = []
    for name in PINNED:
        if name.startswith("guarded"):
            model, report = _report(name)
            fired |= set(report.coverage.fired)
            declared = list(model.declared_transitions())
    for row in (
        "rounds: input_required -reuse-> retrying",
        "rounds: sent -poll-> retrying",
        "rounds: sent -lose-> retrying",
        "rounds: answering -abort-> failed",
        "liveness: submitted -resubmit-> submitting",
        "liveness: submitting -reject-> dead",
        "liveness: presented -stale-> dead",
    ):
        assert row in fired, row
    assert len(declared) == 51


def test_the_age_rule_is_what_keeps_late_answers_out_of_dead_state() -> None:
    """The same rules with an age limit longer than the clock step send a late answer."""
    lax = MrtrGuardPolicy(MrtrConfig(question_ttl_s=5.0))
    report = check(MrtrWorld(lax, MrtrBounds(), name="lax"))
    assert {r.name for r in report.results if r.verdict.value == "violated"} == {"P6"}


# ------------------------------------------------- the restated properties can fail


class _Bad(NamedTuple):
    token: int | None = None
    first: int | None = None
    ended: bool = False


class _BadClient:
    """Presents every question, then breaks one property on purpose: ``stale`` echoes
    the first state token ever seen (P7), ``resend`` retries after a rejection (P3),
    ``restart`` asks the rejected question again (P1, the documented restart),
    ``fabricate`` answers without asking (P4), ``twice`` ends the call twice (P5)."""

    def __init__(self, fault: str) -> None:
        self.fault = self.name = fault

    def init(self) -> _Bad:
        return _Bad()

    def step(self, c: _Bad, t: float, inp: Input) -> tuple[_Bad, tuple[Output, ...]]:
        if c.ended:
            return c, ()
        if inp[:2] == ("result", "complete"):
            done: tuple[Output, ...] = (("end", "completed"),)
            return c._replace(ended=True), done * (2 if self.fault == "twice" else 1)
        if inp[:2] == ("result", "ir"):
            token = inp[2]
            c = c._replace(token=token, first=token if c.first is None else c.first)
            if self.fault == "fabricate":
                return c, (("retry", token, tuple((q, USER_ANSWER) for q in inp[3])),)
            return c, tuple(("present", q) for q in inp[3])
        if inp[0] == "answer":
            echo = c.first if self.fault == "stale" else c.token
            return c, (("retry", echo, ((inp[1], USER_ANSWER),)),)
        if inp == ("error", "invalid_state") and self.fault == "resend":
            return c, (("retry", c.token, ()),)
        if inp == ("error", "invalid_state") and self.fault == "restart":
            return c, (("present", 0),)  # "the client restarts the flow": asks again
        if inp[0] == "error":
            return c._replace(ended=True), (("end", "failed"),)
        return c, ()


@pytest.mark.parametrize(
    ("fault", "bounds", "prop"),
    [
        ("stale", MrtrBounds(reasks=1, expiries=0, lost=0), "P7"),
        ("resend", MrtrBounds(lost=0), "P3"),
        ("restart", MrtrBounds(lost=0), "P1"),
        ("fabricate", MrtrBounds(lost=0), "P4"),
        ("twice", MrtrBounds(lost=0), "P5"),
    ],
)
def test_each_restated_property_catches_a_client_that_breaks_it(
    fault: str, bounds: MrtrBounds, prop: str
) -> None:
    report = check(MrtrWorld(_BadClient(fault), bounds, name=fault))
    report.assert_violated(prop)
