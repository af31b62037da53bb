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

import functools
import itertools
from collections.abc import Callable
from typing import Any

from fsm import PRODUCT, Guard, GuardConfig, SubmissionResult
from fsm import actions as act
from fsm import events as ev
from fsm.events import standalone_generation, standalone_stream
from fsm.sse.guard import rename_snapshot
from fsm.worlds.sse import (
    STREAM,
    USER_ANSWER,
    Answer,
    Bounds,
    Cut,
    Deadline,
    End,
    Event,
    GetCut,
    GetEnd,
    GetOpened,
    HeldAnswer,
    Input,
    NewSession,
    Outcome,
    Output,
    PostOutcome,
    Present,
    Reask,
    Replay,
    Resume,
    ResumeConflict,
    Resumed,
    ResumeRefused,
    SsePolicy,
    Submit,
    Timer,
    UserMode,
    Wait,
    Withdraw,
    World,
    key,
    session_name,
    session_number,
    stream_name,
)

LEGEND = (
    "guarded[replay,deadline,answer,user(,reaper)]: the server replays after the cursor"
    " or inclusive of it; the request's deadline passes silent or with "
    "notifications/cancelled; an answer to an unknown request gets 202, 404, a JSON-RPC "
    "error (rpc) or a 500 holding one (500rpc); the user answers or never; reaper: the "
    "session is reaped"
)
"""What the fields of this file's model names mean (``fsm check --overview`` prints it)."""

ORIGIN = 100
REQUESTS = 1


def _rpc_error(status: int, code: int, message: str) -> SubmissionResult:
    """HTTP ``status`` with a JSON-RPC error body."""
    error = {"code": code, "message": message}
    return SubmissionResult(status, {"jsonrpc": "2.0", "id": None, "error": error})


_OUTCOMES: dict[str, SubmissionResult] = {
    "202": SubmissionResult(202),
    "404": _rpc_error(404, -32600, "Session not found"),
    "404rpc": _rpc_error(404, -32602, "Unknown request id"),
    "rpc": _rpc_error(400, -32602, "Unknown request id"),
    "500rpc": _rpc_error(500, -32603, "Request not found"),
    "neterr": SubmissionResult(None, error="ConnectError"),
}

_HELD: dict[HeldAnswer, SubmissionResult] = {
    "409": _rpc_error(409, -32000, "Conflict: Stream already has an active connection"),
    "409-retry-after": SubmissionResult(409, retry_after=30.0),
    "400-exists": SubmissionResult(400, text="Session registration failed: session already exists"),
}
"""A held connection's refusals: the TypeScript SDK's, IBM ContextForge's (its listener
claim lasts 30 s), Render's."""


def _message(kind: str, r: int, question: int = 0) -> Any:
    """The server's message of a log entry; an elicitation's params are those of the
    question first asked at event ``question`` (one question per event id, so a re-ask
    has the params of the event it repeats, and requests of other events do not)."""
    if kind == "prime":
        return ""
    if kind == "req":
        return {
            "jsonrpc": "2.0",
            "id": r,
            "method": "elicitation/create",
            "params": {"message": f"Delete 3 files? (question {question})", "requestedSchema": {}},
        }
    if kind == "cancel":
        return {
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": r, "reason": "timed out"},
        }
    return {"jsonrpc": "2.0", "id": ORIGIN, "result": {"content": []}}


class GuardPolicy(SsePolicy[Guard]):
    """:class:`fsm.Guard` as the world's client (:class:`fsm.worlds.sse.SsePolicy`). State:
    ``(t, snapshot)``.

    Each standalone GET connection the world opens is fed as a stream of its own
    (:func:`fsm.events.standalone_stream` of its generation), as the SDK adapter does.
    ``fresh_get_names=False`` feeds every one as ``"get"`` instead (the adapter's former
    defect: a fresh GET tracked under the name of the one that ended), which the checker
    must find violating P5. ``guard``: a variant of the guard's class to drive instead
    (a model of a faulty client).
    """

    def __init__(
        self,
        config: GuardConfig,
        *,
        fresh_get_names: bool = True,
        guard: type[Guard] = Guard,
        name: str = "guarded",
    ) -> None:
        get_name = standalone_stream if fresh_get_names else _one_get_name
        super().__init__(
            name,
            lambda clock, on_fire: guard(
                clock=clock, config=config, engine="tables", on_fire=on_fire
            ),
            product=PRODUCT,
            to_events=lambda inp, guard: _events(inp, guard.session, get_name),
            to_outputs=_outputs,
            rename=rename_snapshot,
            opening=(ev.SessionStarted("s"), ev.StreamOpened(STREAM, origin=ORIGIN)),
        )

    @property
    def guard(self) -> Guard:
        """The one guard this policy drives (``bench/`` wraps its methods)."""
        return self.decider


def _one_get_name(generation: int) -> str:
    return standalone_stream(1)


@functools.cache  # the guard never mutates an event: build each once
def _events(inp: Input, session_id: str, get_name: Callable[[int], str]) -> tuple[ev.Event, ...]:
    """What the world's input ``inp`` is for the guard, in the session ``session_id``."""
    session = session_number(session_id)
    stream = stream_name(session)
    if isinstance(inp, NewSession):  # the next session and its tool call's stream
        new = inp.number
        return (ev.SessionStarted(session_name(new)), ev.StreamOpened(stream_name(new), ORIGIN))
    if isinstance(inp, GetOpened):
        return (ev.StreamOpened(get_name(inp.generation)),)
    if isinstance(inp, GetCut):
        return (ev.StreamLost(get_name(inp.generation), clean=False),)
    if isinstance(inp, Event):
        message = _message(inp.what, inp.request, inp.event_id)
        return (ev.SseEvent(stream, message, str(inp.event_id)),)
    if isinstance(inp, Reask):
        message = _message("req", inp.request, inp.first_event)
        return (ev.SseEvent(stream, message, str(inp.event_id)),)
    if isinstance(inp, Cut):
        return (ev.StreamLost(stream, clean=inp.clean),)
    if isinstance(inp, Timer):
        return (ev.TimerFired(stream),)
    if isinstance(inp, Resumed):
        return (ev.StreamResumed(stream),)
    if isinstance(inp, ResumeRefused):
        return (ev.ResumeRefused(stream, 404),)
    if isinstance(inp, ResumeConflict):
        held = _HELD[inp.answer]
        return (
            ev.ResumeRefused(stream, held.status, None, held.body, held.retry_after, held.text),
        )
    if isinstance(inp, Answer):
        return (ev.UserAnswered(key(inp.request, session), dict(USER_ANSWER)),)
    assert isinstance(inp, PostOutcome), inp
    return (ev.SubmissionOutcome(key(inp.request, session), _OUTCOMES[inp.outcome]),)


def _outputs(a: act.Action) -> tuple[Output, ...]:
    if isinstance(a, act.Present):
        return (Present(int(a.key[1])),)
    if isinstance(a, act.Withdraw):
        return (Withdraw(int(a.key[1])),)
    if isinstance(a, act.Submit):
        return (Submit(int(a.key[1]), tuple(sorted(a.answer.items()))),)
    if isinstance(a, act.Wait):
        return (Wait(),)
    if isinstance(a, act.Resume):
        return (Resume(int(a.cursor)),)
    if isinstance(a, act.Fail | act.Complete):
        outcome = "failed" if isinstance(a, act.Fail) else "completed"
        generation = standalone_generation(a.interaction)
        return (End(outcome),) if generation is None else (GetEnd(generation, outcome),)
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
