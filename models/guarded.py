"""The library's own policy: the sans-IO guard, against every environment variant.

The client here *is* :class:`fsm.Guard` (on the compiled tables, the same declarations the
``transitions`` runtime runs): the checker verifies the shipped decision code, not a
re-implementation of it. Variants (one model each, all must pass P1-P7 and L1): replay
after or from the cursor x deadline silent or cancel-emitting x answer-to-unknown 202 /
404 / JSON-RPC error / 500 wrapping a JSON-RPC error x user answers or never; every
variant has clean and abrupt cuts, a failing answer POST, the client's clock passing
its deadlines, and (in the ``reaper`` variants) the session reaped. ``REQUESTS`` sets
the number of concurrent server requests.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping
from typing import Any

from fsm import PRODUCT, Guard, GuardConfig, SubmissionResult
from fsm import actions as act
from fsm import events as ev
from fsm.errors import RequestKey
from fsm.events import standalone_generation, standalone_stream
from fsm.guard import rename_snapshot
from fsm.world import (
    STREAM,
    Bounds,
    Deadline,
    Input,
    Outcome,
    Output,
    Replay,
    UserMode,
    World,
    key,
    session_name,
    session_number,
    stream_name,
    transition_label,
)

ORIGIN = 100
REQUESTS = 1

_OUTCOMES: dict[str, SubmissionResult] = {
    "202": SubmissionResult(202),
    "404": SubmissionResult(
        404,
        {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "Session not found"}},
    ),
    "404rpc": SubmissionResult(
        404,
        {"jsonrpc": "2.0", "id": None, "error": {"code": -32602, "message": "Unknown request id"}},
    ),
    "rpc": SubmissionResult(
        400,
        {"jsonrpc": "2.0", "id": None, "error": {"code": -32602, "message": "Unknown request id"}},
    ),
    "500rpc": SubmissionResult(
        500,
        {"jsonrpc": "2.0", "id": None, "error": {"code": -32603, "message": "Request not found"}},
    ),
    "neterr": SubmissionResult(None, error="ConnectError"),
}


def _message(kind: str, r: int) -> Any:
    if kind == "prime":
        return ""
    if kind == "req":
        return {
            "jsonrpc": "2.0",
            "id": r,
            "method": "elicitation/create",
            "params": {"message": "Delete 3 files?", "requestedSchema": {}},
        }
    if kind == "cancel":
        return {
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": r, "reason": "timed out"},
        }
    return {"jsonrpc": "2.0", "id": ORIGIN, "result": {"content": []}}


class GuardPolicy:
    """Adapts :class:`fsm.Guard` to the world's inputs and outputs. State: (t, snapshot).

    The guard is a pure function of (snapshot, clock, event), so each distinct step is
    computed once per policy; share one policy between worlds (as :data:`POLICY` is) and
    the variants of one sweep reuse each other's guard steps.

    Each standalone GET connection the world opens is fed as a stream of its own
    (:func:`fsm.events.standalone_stream` of its generation), as the SDK adapter does.
    ``fresh_get_names=False`` feeds every one as ``"get"`` instead (the adapter's former
    defect: a fresh GET tracked under the name of the one that ended), which the checker
    must find violating P5.
    """

    name = "guarded"

    def __init__(self, config: GuardConfig, *, fresh_get_names: bool = True) -> None:
        self._get_name = standalone_stream if fresh_get_names else _one_get_name
        self._t = 0.0
        self._fired: list[str] = []
        self._last_fired: tuple[str, ...] = ()
        self._memo: dict[tuple[Any, Input], tuple[Any, tuple[Output, ...], tuple[str, ...]]] = {}
        self._labels: dict[tuple[str, str, str, str], str] = {}
        self._events: dict[tuple[str, Input], tuple[ev.Event, ...]] = {}
        self._guard = Guard(
            clock=lambda: self._t,
            config=config,
            engine="tables",
            on_fire=self._on_fire,
        )
        self._guard.feed(ev.SessionStarted("s"))
        self._guard.feed(ev.StreamOpened(STREAM, origin=ORIGIN))
        self._init = (0.0, self._guard.snapshot())

    def _on_fire(self, machine: str, source: str, trigger: str, dest: str) -> None:
        transition = (machine, source, trigger, dest)
        label = self._labels.get(transition)
        if label is None:
            label = self._labels[transition] = transition_label(*transition)
        self._fired.append(label)

    @property
    def guard(self) -> Guard:
        """The one guard this policy drives, restored from a snapshot before each step it
        computes (``bench/`` wraps its methods to time them inside a search)."""
        return self._guard

    def init(self) -> tuple[float, Any]:
        return self._init

    def declared(self) -> list[str]:
        """Every declared transition of both machines, as coverage labels."""
        return [
            transition_label(m.name, t.source, t.trigger, t.dest)
            for m in PRODUCT.machines
            for t in m.transitions
        ]

    def fired(self) -> tuple[str, ...]:
        """The labels fired by the last :meth:`step`."""
        return self._last_fired

    def rename(
        self, state: tuple[float, Any], ids: Mapping[int, int], session: int
    ) -> tuple[float, Any]:
        """The state had request ``r`` of session ``session`` been ``ids[r]`` all along
        (the guard's own renaming of its snapshot: its decisions never depend on an id's
        value)."""
        t, snap = state
        keys: dict[RequestKey, RequestKey] = {
            key(old, session): key(new, session) for old, new in ids.items() if old != new
        }
        return t, rename_snapshot(snap, keys)

    def step(
        self, state: tuple[float, Any], inp: Input
    ) -> tuple[tuple[float, Any], tuple[Output, ...]]:
        t, snap = state
        if inp[0] == "tick":
            self._last_fired = ()
            return (1.0, snap), ()
        memo = self._memo.get((state, inp))
        if memo is None:
            self._t = t
            guard = self._guard
            guard.restore(snap)
            self._fired.clear()
            events = self._events.get((snap[0], inp))
            if events is None:  # the guard never mutates an event: build each once
                session = session_number(snap[0])
                events = self._events[(snap[0], inp)] = _events(inp, session, self._get_name)
            actions = [a for event in events for a in guard.feed(event)]
            outputs = tuple(o for a in actions for o in _outputs(a))
            memo = self._memo[(state, inp)] = ((t, guard.snapshot()), outputs, tuple(self._fired))
        self._last_fired = memo[2]
        return memo[0], memo[1]


def _one_get_name(generation: int) -> str:
    return standalone_stream(1)


def _events(inp: Input, session: int, get_name: Callable[[int], str]) -> tuple[ev.Event, ...]:
    """What the world's input ``inp`` is for the guard, in session number ``session``."""
    kind, stream = inp[0], stream_name(session)
    if kind == "session":  # the next session and its tool call's stream
        new = inp[1]
        return (ev.SessionStarted(session_name(new)), ev.StreamOpened(stream_name(new), ORIGIN))
    if kind == "get_open":
        return (ev.StreamOpened(get_name(inp[1])),)
    if kind == "get_cut":
        return (ev.StreamLost(get_name(inp[1]), clean=False),)
    if kind == "event":
        return (ev.SseEvent(stream, _message(inp[2], inp[3]), str(inp[1])),)
    if kind == "cut":
        return (ev.StreamLost(stream, clean=inp[1]),)
    if kind == "timer":
        return (ev.TimerFired(stream),)
    if kind == "resumed":
        return (ev.StreamResumed(stream),)
    if kind == "resume_404":
        return (ev.ResumeRefused(stream, 404),)
    if kind == "answer":
        return (ev.UserAnswered(key(inp[1], session), {"action": "accept"}),)
    assert kind == "outcome"
    return (ev.SubmissionOutcome(key(inp[1], session), _OUTCOMES[inp[2]]),)


def _outputs(a: act.Action) -> tuple[Output, ...]:
    if isinstance(a, act.Present):
        return (("present", a.key[1]),)
    if isinstance(a, act.Withdraw):
        return (("withdraw", a.key[1]),)
    if isinstance(a, act.Submit):
        return (("submit", a.key[1], tuple(sorted(a.answer.items()))),)
    if isinstance(a, act.Wait):
        return (("wait",),)
    if isinstance(a, act.Resume):
        return (("resume", int(a.cursor)),)
    if isinstance(a, act.Fail | act.Complete):
        outcome = "failed" if isinstance(a, act.Fail) else "completed"
        generation = standalone_generation(a.interaction)
        return (("end", outcome),) if generation is None else (("get_end", generation, outcome),)
    return ()


CONFIG = GuardConfig(request_ttl_s=0.5, max_resumes_without_progress=2, max_submit_attempts=2)

POLICY = GuardPolicy(CONFIG)
"""The policy every shipped variant shares: its memo of guard steps serves them all."""


def variants(
    requests: int = REQUESTS,
    only: set[str] | None = None,
    policy: GuardPolicy = POLICY,
    *,
    get_cuts: int = 0,
) -> list[World[Any]]:
    """One model per environment variant (``only``: the variant names to keep, as in
    ``"after,silent,rpc,answers"``); more than one request shows as ``xN`` in the name,
    a standalone GET cut ``get_cuts`` times before any event id as ``getN``.
    ``policy``: a fresh ``GuardPolicy(CONFIG)`` measures a run with nothing memoised."""
    worlds: list[World[Any]] = []
    replays: tuple[Replay, ...] = ("after", "inclusive")
    deadlines: tuple[Deadline, ...] = ("silent", "cancel")
    unknowns: tuple[Outcome, ...] = ("202", "404", "rpc", "500rpc")
    users: tuple[UserMode, ...] = ("answers", "never")
    for replay, deadline, unknown, user, reaper in itertools.product(
        replays, deadlines, unknowns, users, (False, True)
    ):
        if reaper and (unknown != "202" or user == "never"):
            continue  # the reaper is orthogonal: one answer-to-unknown variant suffices
        bounds = Bounds(
            requests=requests,
            cuts=2,
            post_faults=1,
            deadline=deadline,
            unknown_answer=unknown,
            user=user,
            reaper=reaper,
            replay=replay,
            get_cuts=get_cuts,
        )
        variant = f"{replay},{deadline},{unknown},{user}{',reaper' if reaper else ''}"
        if only is not None and variant not in only:
            continue
        name = (
            f"guarded[{variant}]"
            + (f" x{requests}" if requests > 1 else "")
            + (f" get{get_cuts}" if get_cuts else "")
        )
        worlds.append(World(policy, bounds, name=name))
    return worlds


MODELS = variants()
