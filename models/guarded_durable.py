"""A client that crashes: the guard with its durable store, and without one.

The world's ``crashes``: the client's process ends before its interaction did (its
connection, timer and prompts go; an answer POST in flight reached the server or not) and
a new one starts, in the same session. The guard is configured ``durable``: every
``Persist`` it returns is applied to the store, which is part of the client's state and
survives the crash; the new process is ``Guard.restart`` of what was stored.

* ``guarded-durable[after|inclusive,answers|never]``: the guard with its store, the
  server replaying after the cursor or inclusive of it: P1-P7 and L1 hold (P2 across a
  restart: a prompt on screen at the crash is shown once more, marked, never an answered
  one, docs/durability.md).
* ``no-store[inclusive]``: the same guard restarted with only what a transport keeps
  without a store (the session id and each stream's newest event id, its resumption
  token): the replayed request is new to it, and it asks again. It must fail P2.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from fsm import actions as act
from fsm import events as ev
from fsm.sse.guard import Guard, GuardSnapshot, SseDelta, SseStored
from fsm.worlds.sse import (
    STREAM,
    Bounds,
    Input,
    Output,
    Replay,
    Reshow,
    Restart,
    Tick,
    UserMode,
    World,
)

from .guarded import CONFIG, ORIGIN, GuardPolicy, _outputs

LEGEND = (
    "guarded-durable[replay,user]: the client crashes once and restarts from its durable "
    "store; the server replays after the cursor or inclusive of it; the user answers or "
    "never. no-store[replay]: the guard restarted with only its session and cursors"
)
"""What the fields of this file's model names mean (``fsm check --overview`` prints it)."""

EMPTY = SseStored(GuardSnapshot("", (), (), False))

State = tuple[float, GuardSnapshot, SseStored | None]


class DurablePolicy(GuardPolicy):
    """The durable guard as the world's client. State: ``(t, snapshot, stored)``, the
    store beside the guard's memory; :class:`~fsm.worlds.common.Restart` drops the memory
    and starts from the store (``store=False``: from the session and the streams'
    cursors alone, what a transport's resumption token keeps)."""

    def __init__(self, *, store: bool = True, name: str = "guarded-durable") -> None:
        super().__init__(replace(CONFIG, durable=True), name=name)
        self.store = store
        self._steps: dict[tuple[Any, ...], tuple[State, tuple[Output, ...], tuple[str, ...]]] = {}
        opening = Guard(clock=lambda: 0.0, config=self.decider.config)
        stored = EMPTY
        for event in (ev.SessionStarted("s"), ev.StreamOpened(STREAM, origin=ORIGIN)):
            stored = _persist(stored, opening.feed(event))
        self._initial_store = stored if store else None

    def init(self) -> State:  # type: ignore[override]
        return (0.0, self.initial, self._initial_store)

    def step(self, state: State, inp: Input) -> tuple[State, tuple[Output, ...]]:  # type: ignore[override]
        t, snap, stored = state
        if isinstance(inp, Tick):
            self._last_fired = ()
            return (1.0, snap, stored), ()
        memo_key = (snap, stored, t, inp)
        memo = self._steps.get(memo_key)
        if memo is None:
            memo = self._steps[memo_key] = self._decide(snap, stored, t, inp)
        self._last_fired = memo[2]
        return memo[0], memo[1]

    def _decide(
        self, snap: GuardSnapshot, stored: SseStored | None, t: float, inp: Input
    ) -> tuple[State, tuple[Output, ...], tuple[str, ...]]:
        self._t = t
        guard = self.decider
        self._fired.clear()
        if isinstance(inp, Restart):
            guard.restore(self.fresh)
            actions = guard.restart(stored if stored is not None else _token(snap))
        else:
            guard.restore(snap)
            actions = tuple(a for e in self._to_events(inp, guard) for a in guard.feed(e))
        if stored is not None:
            stored = _persist(stored, actions)
        outputs = tuple(o for a in actions for o in _world_outputs(a))
        return (t, guard.snapshot(), stored), outputs, tuple(self._fired)


def _persist(stored: SseStored, actions: tuple[act.Action, ...]) -> SseStored:
    for a in actions:
        if isinstance(a, act.Persist):
            assert isinstance(a.delta, SseDelta)
            stored = stored.apply(a.delta)
    return stored


def _token(snap: GuardSnapshot) -> SseStored:
    """What a client without a store keeps: its session and each stream's newest event
    id (a transport's resumption token), nothing of its requests."""
    streams = tuple(s._replace(history=(), requests=()) for s in snap.streams)
    return SseStored(GuardSnapshot(snap.session, streams, (), snap.expired))


def _world_outputs(a: act.Action) -> tuple[Output, ...]:
    if isinstance(a, act.Reshown):
        return (Reshow(int(a.key[1])),)
    return _outputs(a)


def crashing(replay: Replay = "after", user: UserMode = "answers") -> Bounds:
    """One request, one crash, one cut, one failing answer POST."""
    return Bounds(requests=1, crashes=1, cuts=1, post_faults=1, replay=replay, user=user)


def variants() -> list[World[Any]]:
    """The guard with its store in each replay and user variant, and without one."""
    durable = DurablePolicy()
    worlds: list[World[Any]] = [
        World(durable, crashing(replay, user), name=f"guarded-durable[{replay},{user}]")
        for replay in ("after", "inclusive")
        for user in ("answers", "never")
    ]
    worlds.append(
        World(
            DurablePolicy(store=False, name="no-store"),
            crashing("inclusive"),
            name="no-store[inclusive]",
            expect=("P2",),
        )
    )
    return worlds


MODELS = variants()
