"""The MRTR conformance kit against the library's rules (passes) and the measured mcp
2.3.0 driver's behaviour (found re-prompting). Derandomized, no example database."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from hypothesis.stateful import run_state_machine_as_test

from fsm import actions as act
from fsm import events as ev
from fsm import mrtr
from fsm.errors import CallRejectedError, InputRoundsExceededError, RequestKey
from fsm.testing.kit import ConformanceFailure
from fsm.testing.mrtr_kit import MrtrClientFactory, mrtr_conformance_machine
from support.kit_runs import FIXED, first_failure


def rules(config: mrtr.MrtrConfig | None = None) -> MrtrClientFactory:
    return lambda clock: mrtr.MrtrCall("call", clock=clock, config=config)


class SdkLikeDriver:
    """``run_input_required_driver`` of mcp 2.3.0 in the MRTR vocabulary: every round's
    questions are shown under round-local keys (no de-duplication), the retry goes once
    all are answered, any error ends the call, ten rounds at most, no clock."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self.rounds = 0
        self.state: str | None = None
        self.waiting: dict[str, RequestKey] = {}
        self.answers: dict[str, Mapping[str, Any]] = {}
        self.ended = False

    def _end(self, outcome: mrtr.MrtrAction) -> tuple[mrtr.MrtrAction, ...]:
        self.ended = True
        return (outcome,)

    def feed(self, event: mrtr.MrtrEvent) -> Sequence[mrtr.MrtrAction]:
        if self.ended:
            return ()
        if isinstance(event, mrtr.RoundFailed):
            return self._end(act.Fail("call", CallRejectedError("MCPError")))
        if isinstance(event, mrtr.RoundResult):
            result = event.result
            if not isinstance(result, dict) or result.get("resultType") != "input_required":
                return self._end(act.Complete("call"))
            self.rounds += 1
            self.state = result.get("requestState")
            asks = result.get("inputRequests") or {}
            if not isinstance(asks, dict) or self.rounds > 10:
                return self._end(act.Fail("call", InputRoundsExceededError("rounds")))
            self.waiting = {k: ("call", f"{k}@{self.rounds}") for k in asks}
            self.answers = {}
            if not asks:
                return (mrtr.Retry("call", None, self.state, self.rounds),)
            return tuple(
                act.Present(self.waiting[k], v["method"], v.get("params")) for k, v in asks.items()
            )
        if isinstance(event, ev.UserAnswered):
            server_key = str(event.key[1]).split("@")[0]
            self.answers[server_key] = event.answer
            if set(self.answers) == set(self.waiting):
                questions = dict(self.waiting)
                return (
                    mrtr.Retry("call", dict(self.answers), self.state, self.rounds, 0.0, questions),
                )
        return ()


def failure_of(factory: MrtrClientFactory, check: set[str] | None = None) -> ConformanceFailure:
    return first_failure(mrtr_conformance_machine(factory, check=check))


def test_the_mrtr_rules_conform() -> None:
    run_state_machine_as_test(mrtr_conformance_machine(rules()), settings=FIXED)


def test_the_sdk_driver_is_found_re_prompting() -> None:
    err = failure_of(SdkLikeDriver, check={"P2"})
    assert err.name == "P2" and "presented a second time" in err.why


def test_the_sdk_driver_is_found_answering_into_expired_state() -> None:
    err = failure_of(SdkLikeDriver, check={"P6"})
    assert err.name == "P6" and "after it was shown" in err.why


def test_an_age_limit_past_the_server_ttl_is_found_answering_into_expired_state() -> None:
    err = failure_of(rules(mrtr.MrtrConfig(question_ttl_s=10_000.0)))
    assert err.name == "P6"
