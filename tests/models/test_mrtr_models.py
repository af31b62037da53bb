"""The MRTR-era models (their pins, the guarded rules passing every variant and the mcp
2.3.0 driver found at fault with its shortest counterexamples: ``pins.py``): what the
counterexample is, the rows the rules cover, the age rule, and proof that the world's
restated properties can fail (a client that breaks each one is caught)."""

from __future__ import annotations

from typing import NamedTuple

import pins
import pytest
from faulty import FaultyClient

from fsm.checker import check
from fsm.mrtr.call import MrtrConfig
from fsm.worlds.mrtr import USER_ANSWER, Input, MrtrBounds, MrtrWorld, Output
from models.guarded_mrtr import MrtrGuardPolicy


def test_the_reasking_counterexample_is_a_second_prompt_for_an_answered_question() -> None:
    names = pins.counterexample("mcp-sdk-2.3.0-mrtr[reasking-tool]", "P2").names
    assert names == ["server responds", "user answers 0", "server responds"]


def test_coverage_of_the_declared_rows() -> None:
    fired: set[str] = set()
    declared: list[str] = []
    for name in pins.FAMILIES["mrtr"].pins:
        if name.startswith("guarded"):
            model, report = pins.report(name)
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


class _BadClient(FaultyClient[_Bad]):
    """Presents every question, then breaks one property on purpose: ``stale`` echoes
    the first state token ever seen (P7), ``resend`` retries after a rejection (P3),
    ``restart`` asks the rejected question again (P1, the documented restart),
    ``fabricate`` answers without asking (P4), ``twice`` ends the call twice (P5)."""

    start = _Bad()

    def react(self, c: _Bad, t: float, inp: Input) -> tuple[_Bad, tuple[Output, ...]]:
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
