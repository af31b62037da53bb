"""An MRTR call whose client crashes: the MRTR rules with their durable store, and without.

The MRTR world's ``crashes``: the client's process ends while no prompt is on screen (the
request in flight is lost with it) and a new one starts (``Restart``).

* ``guarded-mrtr-durable[...]``: :class:`fsm.mrtr.call.MrtrCall` made durable by
  :class:`fsm.durable.calls.DurableCall`; every ``Persist`` is applied to the store (the
  call's :class:`~fsm.durable.calls.CallRecord`, part of the client's state, surviving the
  crash) and the new process is ``DurableCall.restart`` of it (the application issues the
  call again when nothing was stored: the call had asked nothing yet). P1-P7 and L1 hold.
* ``no-store-mrtr[answers]``: the same rules restarted with nothing: the application
  issues the call again, the server asks the answered question again, and it is shown
  again. It must fail P2 (and P6: shown again after its client-side age passed).
"""

from __future__ import annotations

from typing import Any

from fsm import actions as act
from fsm.durable.calls import CallRecord, DurableCall
from fsm.worlds.mrtr import Input, MrtrBounds, MrtrWorld, Output, Restart, Retry

from .guarded_mrtr import CONFIG, MrtrGuardPolicy, _event, _outputs

LEGEND = (
    "guarded-mrtr-durable[reasks,polls,lost]: the MRTR rules with their durable store; the "
    "client crashes once and restarts from the store; the tool re-asks, answers with state "
    "only, a request is lost. no-store-mrtr[...]: the rules restarted with nothing"
)
"""What the fields of this file's model names mean (``fsm check --overview`` prints it)."""

State = tuple[CallRecord, CallRecord | None]
"""The live call's record (its memory) and the stored one (``None``: nothing written)."""

REISSUE = (Retry(None, ()),)
"""What a new process without a record does: the application issues the call again."""


class DurableMrtrPolicy(MrtrGuardPolicy):
    """The MRTR rules as the world's client, with their store (``store=False``: restarted
    with nothing). State: ``(live, stored)``."""

    def __init__(self, *, store: bool = True) -> None:
        super().__init__(CONFIG)
        self.store = store
        self.name = "guarded-mrtr-durable" if store else "no-store-mrtr"

    def init(self) -> State:
        self.decider.restore(self.initial)
        return (DurableCall(self.decider).record(), None)

    def step(self, state: State, t: float, inp: Input) -> tuple[State, tuple[Output, ...]]:
        return self.decide_by(("durable", state, t, inp), t, lambda: self._decide(state, inp))

    def _decide(self, state: State, inp: Input) -> tuple[State, tuple[Output, ...]]:
        live, stored = state
        decider = self.decider
        actions: tuple[Any, ...]
        if isinstance(inp, Restart):
            decider.restore(self.initial)
            if stored is None or not self.store:
                call, actions = DurableCall(decider), ()
                outputs: tuple[Output, ...] = REISSUE
            else:
                call, actions = DurableCall.restart(decider, stored)
                outputs = ()
        else:
            call = DurableCall.resume(decider, live)
            actions, outputs = call.feed(_event(inp)), ()
        for a in actions:
            if isinstance(a, act.Persist) and self.store:
                assert isinstance(a.delta, CallRecord)
                stored = a.delta
        outputs += tuple(o for a in actions for o in _outputs(a))
        return (call.record(), stored), outputs


def _world(policy: DurableMrtrPolicy, faults: tuple[str, ...] = ()) -> MrtrWorld:
    bounds = MrtrBounds(
        questions=1,
        reasks=int("reasks" in faults),
        polls=int("polls" in faults),
        lost=int("lost" in faults),
        crashes=1,
    )
    name = f"{policy.name}[{','.join(faults) or 'answers'}]"
    expect = () if policy.store else ("P2", "P6")
    return MrtrWorld(policy, bounds, name=name, expect=expect)


DURABLE = DurableMrtrPolicy()
NO_STORE = DurableMrtrPolicy(store=False)

MODELS = [
    *(_world(DURABLE, f) for f in ((), ("reasks",), ("polls",), ("lost",), ("reasks", "lost"))),
    _world(NO_STORE),
]
