"""The library's MRTR rules (:class:`fsm.mrtr.MrtrCall`) against every MRTR environment.

The client here *is* ``MrtrCall`` (on the compiled tables of the declared rounds and
liveness machines): the checker verifies the shipped decision code. Variants (all must
pass P1-P7 and L1): a server that rejects unverifiable state or asks again; a re-asking
tool; state-only rounds; a restart between rounds; a lost request; a user who answers
(early or late) or never; a client whose age timer fires or, while the user answers,
is missed (it then sees the time with the late answer; a client that schedules no
timer while nobody answers waits forever, which the P5-quiescent check shows). Every
variant lets the issued state expire once the client's age limit has passed.
"""

from __future__ import annotations

import itertools
from typing import Any

from fsm import events as ev
from fsm.errors import RequestKey
from fsm.mrtr import (
    MrtrAction,
    MrtrCall,
    MrtrConfig,
    Retry,
    RoundFailed,
    RoundResult,
    Tick,
    question_id,
)
from fsm.mrtr_machines import MRTR_PRODUCT
from fsm.mrtr_outcomes import STATE_REJECTED
from fsm.mrtr_world import (
    CALL,
    Input,
    MrtrBounds,
    MrtrWorld,
    OnInvalid,
    Output,
    TickMode,
    UserMode,
)
from fsm.outcomes import SubmissionResult
from fsm.world import transition_label

QUESTIONS: tuple[dict[str, Any], ...] = tuple(
    {"method": "elicitation/create", "params": {"message": f"Delete {n + 3} files?"}}
    for n in range(3)
)
_KEYS = tuple((CALL, question_id(q["method"], q["params"])) for q in QUESTIONS)
_QID = {qid: n for n, (_, qid) in enumerate(_KEYS)}
_LOST = SubmissionResult(None, error="ReadTimeout")


class MrtrGuardPolicy:
    """Adapts :class:`fsm.mrtr.MrtrCall` to the MRTR world. State: a call snapshot."""

    name = "guarded-mrtr"

    def __init__(self, config: MrtrConfig) -> None:
        self._t = 0.0
        self._fired: list[str] = []
        self._last: tuple[str, ...] = ()
        self._memo: dict[
            tuple[Any, float, Input], tuple[Any, tuple[Output, ...], tuple[str, ...]]
        ] = {}
        self._call = MrtrCall(
            CALL, clock=lambda: self._t, config=config, engine="tables", on_fire=self._on_fire
        )
        self._init = self._call.snapshot()

    def _on_fire(self, machine: str, source: str, trigger: str, dest: str) -> None:
        self._fired.append(transition_label(machine, source, trigger, dest))

    def init(self) -> Any:
        return self._init

    def declared(self) -> list[str]:
        """Every declared transition of the rounds and liveness machines."""
        return [
            transition_label(m.name, t.source, t.trigger, t.dest)
            for m in MRTR_PRODUCT.machines
            for t in m.transitions
        ]

    def fired(self) -> tuple[str, ...]:
        return self._last

    def step(self, snap: Any, t: float, inp: Input) -> tuple[Any, tuple[Output, ...]]:
        memo = self._memo.get((snap, t, inp))
        if memo is None:
            self._t = t
            self._call.restore(snap)
            self._fired.clear()
            actions = self._call.feed(_event(inp))
            outputs = tuple(o for a in actions for o in _outputs(a))
            memo = self._memo[(snap, t, inp)] = (self._call.snapshot(), outputs, tuple(self._fired))
        self._last = memo[2]
        return memo[0], memo[1]


def _event(inp: Input) -> Any:
    kind = inp[0]
    if kind == "result" and inp[1] == "complete":
        return RoundResult({"content": [], "resultType": "complete"})
    if kind == "result":
        _, _, token, questions = inp
        body: dict[str, Any] = {"resultType": "input_required", "requestState": f"st{token}"}
        if questions:
            body["inputRequests"] = {f"k{q}": QUESTIONS[q] for q in questions}
        return RoundResult(body)
    if kind == "error":
        return RoundFailed(STATE_REJECTED if inp[1] == "invalid_state" else _LOST)
    if kind == "answer":
        return ev.UserAnswered(_KEYS[inp[1]], {"action": "accept"})
    assert kind == "tick"
    return Tick()


def _q(key: RequestKey) -> int:
    return _QID[str(key[1])]


def _outputs(a: MrtrAction) -> tuple[Output, ...]:
    from fsm import actions as act

    if isinstance(a, act.Present):
        return (("present", _q(a.key)),)
    if isinstance(a, act.Withdraw):
        return (("withdraw", _q(a.key)),)
    if isinstance(a, Retry):
        token = int(a.request_state[2:]) if a.request_state is not None else None
        answers = tuple(
            sorted(
                (_q(a.questions[k]), tuple(sorted(v.items())))
                for k, v in (a.input_responses or {}).items()
            )
        )
        return (("retry", token, answers),)
    if isinstance(a, act.Fail):
        return (("end", "failed"),)
    if isinstance(a, act.Complete):
        return (("end", "completed"),)
    return ()


CONFIG = MrtrConfig(question_ttl_s=0.5, max_reasks=1, max_resends=1, max_rounds=10)
POLICY = MrtrGuardPolicy(CONFIG)


def variants(questions: int = 1, policy: MrtrGuardPolicy = POLICY) -> list[MrtrWorld]:
    """One model per environment variant."""
    worlds: list[MrtrWorld] = []
    invalids: tuple[OnInvalid, ...] = ("reject", "reask")
    users: tuple[UserMode, ...] = ("answers", "never")
    ticks: tuple[TickMode, ...] = ("seen", "missed")
    for on_invalid, reasks, polls, restarts, user, tick in itertools.product(
        invalids, (0, 1), (0, 1), (0, 1), users, ticks
    ):
        if user == "never" and (reasks or polls or tick == "missed"):
            # Nothing is answered, so re-asks and polls never happen; and a client that
            # ignores deadline() while nobody answers waits forever (its contract).
            continue
        bounds = MrtrBounds(
            questions=questions,
            reasks=reasks,
            polls=polls,
            restarts=restarts,
            on_invalid=on_invalid,
            user=user,
            tick=tick,
        )
        flags: list[str] = [on_invalid, user, tick]
        flags += [
            f for f, on in (("reasks", reasks), ("polls", polls), ("restart", restarts)) if on
        ]
        suffix = f" x{questions}" if questions > 1 else ""
        worlds.append(MrtrWorld(policy, bounds, name=f"guarded-mrtr[{','.join(flags)}]{suffix}"))
    return worlds


MODELS = variants() + [
    w for w in variants(2) if "restart" in w.name and "reasks" in w.name and "answers" in w.name
]
