"""Shared helpers for the MRTR rule tests: a question, an answer, result builders, a call
on a clock the test moves by hand."""

from __future__ import annotations

from typing import Any

from core_support import FakeClock

from fsm import actions as act
from fsm.mrtr.call import MrtrAction, MrtrCall, MrtrConfig, RoundResult

ASK = {"method": "elicitation/create", "params": {"message": "Delete 3 files?"}}
YES = {"action": "accept", "content": {"ok": True}}


def ir(asks: dict[str, Any] | None = None, state: str | None = "s") -> dict[str, Any]:
    """An ``InputRequiredResult`` with these questions (none: a state-only round)."""
    body: dict[str, Any] = {"resultType": "input_required"}
    if asks is not None:
        body["inputRequests"] = asks
    if state is not None:
        body["requestState"] = state
    return body


def make(now: float = 0.0, **config: Any) -> tuple[MrtrCall, FakeClock]:
    """Call ``"c"`` with these ``MrtrConfig`` knobs, on a fake clock starting at ``now``."""
    clock = FakeClock(now)
    return MrtrCall("c", clock=clock, config=MrtrConfig(**config)), clock


def only(actions: tuple[MrtrAction, ...], kind: type[Any]) -> Any:
    """The single action of ``actions``, checked to be a ``kind``."""
    assert len(actions) == 1 and isinstance(actions[0], kind), actions
    return actions[0]


def present(call: MrtrCall, asks: dict[str, Any], state: str = "s") -> act.Present:
    """Feed a round asking ``asks``; it must present exactly one question."""
    return only(call.feed(RoundResult(ir(asks, state))), act.Present)  # type: ignore[no-any-return]
