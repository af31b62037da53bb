"""The library's MRTR rules (:class:`fsm.mrtr.call.MrtrCall`) against every MRTR environment.

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

from fsm import actions as act
from fsm import events as ev
from fsm.errors import RequestKey
from fsm.machines.rounds import MRTR_PRODUCT
from fsm.mrtr import call as mrtr
from fsm.mrtr.call import (
    MrtrAction,
    MrtrCall,
    MrtrConfig,
    MrtrEvent,
    RoundFailed,
    RoundResult,
)
from fsm.mrtr.outcomes import STATE_REJECTED
from fsm.outcomes import SubmissionResult
from fsm.questions import question_id
from fsm.worlds.common import QUESTIONS
from fsm.worlds.mrtr import (
    CALL,
    USER_ANSWER,
    Answer,
    Complete,
    End,
    Error,
    Input,
    InputRequired,
    MrtrBounds,
    MrtrSnapshotPolicy,
    MrtrWorld,
    OnInvalid,
    Output,
    Present,
    Retry,
    TickMode,
    UserMode,
    Withdraw,
)

LEGEND = (
    "guarded-mrtr[invalid,user,timer(,reasks,polls,restart)]: a server that rejects or "
    "re-asks on state it cannot verify; the user answers or never; the client's age timer"
    " is seen or missed; reasks: the tool asks again, polls: state-only rounds, restart: "
    "the server restarts between rounds; xN: N questions"
)
"""What the fields of this file's model names mean (``fsm check --overview`` prints it)."""

_KEYS = tuple((CALL, question_id(q["method"], q["params"])) for q in QUESTIONS)
_QID = {qid: n for n, (_, qid) in enumerate(_KEYS)}
_LOST = SubmissionResult(None, error="ReadTimeout")


class MrtrGuardPolicy(MrtrSnapshotPolicy[MrtrCall]):
    """:class:`fsm.mrtr.call.MrtrCall` as the MRTR world's client
    (:class:`fsm.worlds.mrtr.MrtrSnapshotPolicy`). State: a call snapshot."""

    def __init__(self, config: MrtrConfig) -> None:
        super().__init__(
            "guarded-mrtr",
            lambda clock, on_fire: MrtrCall(
                CALL, clock=clock, config=config, engine="tables", on_fire=on_fire
            ),
            product=MRTR_PRODUCT,
            to_events=lambda inp, call: (_event(inp),),
            to_outputs=_outputs,
        )


def _event(inp: Input) -> MrtrEvent:
    if isinstance(inp, Complete):
        return RoundResult({"content": [], "resultType": "complete"})
    if isinstance(inp, InputRequired):
        body: dict[str, Any] = {"resultType": "input_required", "requestState": f"st{inp.token}"}
        if inp.questions:
            body["inputRequests"] = {f"k{q}": QUESTIONS[q] for q in inp.questions}
        return RoundResult(body)
    if isinstance(inp, Error):
        return RoundFailed(STATE_REJECTED if inp.reason == "invalid_state" else _LOST)
    if isinstance(inp, Answer):
        return ev.UserAnswered(_KEYS[inp.request], dict(USER_ANSWER))
    return mrtr.Tick()


def _q(key: RequestKey) -> int:
    return _QID[str(key[1])]


def _outputs(a: MrtrAction) -> tuple[Output, ...]:
    if isinstance(a, act.Present):
        return (Present(_q(a.key)),)
    if isinstance(a, act.Withdraw):
        return (Withdraw(_q(a.key)),)
    if isinstance(a, mrtr.Retry):
        token = int(a.request_state[2:]) if a.request_state is not None else None
        answers = tuple(
            sorted(
                (_q(a.questions[k]), tuple(sorted(v.items())))
                for k, v in (a.input_responses or {}).items()
            )
        )
        return (Retry(token, answers),)
    if isinstance(a, act.Fail):
        return (End("failed"),)
    if isinstance(a, act.Complete):
        return (End("completed"),)
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
