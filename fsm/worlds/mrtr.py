"""A closed world for the model checker in the MRTR era (protocol 2026-07-28).

One ``tools/call`` whose server asks its questions through ``InputRequiredResult``
rounds. The server is stateless in the official way: what it has been told rides in the
``requestState`` it seals; a state it cannot verify (expired, or minted before a
restart) is either rejected with JSON-RPC -32602 ``invalid_request_state`` (the python
and typescript SDK servers) or answered by asking again (the SEP's preference, pmcp).
Within :class:`MrtrBounds` the environment is free to

* ask every question the call needs (``questions``), then complete once every answer is
  in a valid state;
* re-ask an answered question regardless (``reasks``: a re-asking tool), answer with
  state only (``polls``: URL-mode or slow work);
* let the states issued before the current clock step expire (``expiries``: the
  client's age limit is below the server TTL, so a state expires only once the
  questions shown with it aged out) or lose them all in a restart
  (``restarts``); lose a request in transit (``lost``);
* crash the client (``crashes``) while no prompt is on screen: the request in flight is
  lost with the process, and a new one starts (:class:`Restart`); what it knows of the
  call is what it stored (a client without a store issues the call again);
* let the user answer each shown prompt at any time, before or after the clock passes
  the presented questions' client-side age, or never (``user``); tell the client the
  clock passed (``tick="seen"``: its timer fired) or not (``"missed"``: it sees the
  time only with the next event).

The client is a policy: ``step(state, t, input) -> (state, outputs)``. Inputs
(:data:`Input`, typed tuples tagged by their first field): :class:`Complete`
(``("result", "complete")``), :class:`InputRequired` (``("result", "ir", token,
questions)``; ``questions`` empty: state only), :class:`Error` (``("error",
"invalid_state" | "lost")``), :class:`Answer` (``("answer", q)``), :class:`Tick`
(``("tick",)``), :class:`Restart` (``("restart",)``). Outputs (:data:`Output`):
:class:`Present`, :class:`Withdraw`, :class:`Retry` (``("retry", token, ((q, answer),
...))``), :class:`End` (``("end", "completed" | "failed")``); the plain tuple spellings
are accepted too.

Properties: the shared monitor (:mod:`fsm.properties`) judges the same observations as
in the 2025 world, read in MRTR terms (``docs/mrtr.md``): a question is a request key
``(call, q)``; an ``InputRequiredResult`` is an event whose id is its state token and a
delivery of each question (a *replay* when the call asked it before); a retry is a
resume of the call with the echoed token as cursor and a submission of each answer it
carries; ``invalid_request_state`` is a terminal rejection of the answers it carried.
P6 is restated for the era: besides a re-asked question past its client-side age being
presented, an answer the user gave after that age must never be sent (into a state that
has surely expired). Termination (L1) is the checker's cycle detection.

The world's interning, memo, bounds (``fsm check --set questions=2``) and standard
properties are every era's (:mod:`fsm.worlds.common`).
"""

from __future__ import annotations

from collections.abc import Container, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple, Protocol, TypeVar

from fsm import properties as P
from fsm.errors import RequestKey
from fsm.worlds import common as base
from fsm.worlds.common import (
    USER_ANSWER,
    Answer,
    End,
    Move,
    Present,
    Restart,
    Tick,
    UserMode,
    Withdraw,
)

__all__ = [
    "CALL",
    "USER_ANSWER",
    "Answer",
    "Complete",
    "End",
    "Env",
    "Error",
    "Input",
    "InputRequired",
    "Move",
    "MrtrBounds",
    "MrtrPolicy",
    "MrtrSnapshotPolicy",
    "MrtrWorld",
    "OnInvalid",
    "Output",
    "Present",
    "Restart",
    "Retry",
    "State",
    "Tick",
    "TickMode",
    "UserMode",
    "Withdraw",
    "key",
    "late_answer_sent",
    "rejection_seen",
    "retry_seen",
    "round_seen",
]

C = TypeVar("C")

CALL = "call"

OnInvalid = Literal["reject", "reask"]
"""What the server does with a state it cannot verify."""
TickMode = Literal["seen", "missed"]
"""Whether the client is told the clock passed (its timer fired) or sees the time only
with the next event."""


def key(q: int) -> tuple[str, int]:
    """The request key of question ``q`` of the call."""
    return (CALL, q)


# ------------------------------------------------------------------ the era's reading
# How MRTR events read as the observations of fsm.properties: one mapping, used by this
# world and by the wire verdict (fsm.wire.verdict), which reads the same events off HTTP.


def round_seen(
    call: str, token: str, questions: Iterable[RequestKey], t: float, asked: Container[RequestKey]
) -> list[P.Observation]:
    """An ``InputRequiredResult`` of ``call`` sealing state ``token``: an event whose id is
    the token, and a delivery at ``t`` of each of its ``questions`` (a replay when the call
    asked it before: ``asked``)."""
    seen: list[P.Observation] = [P.EventSeen(call, token)]
    seen += [P.Delivered(q, call, t, replayed=q in asked) for q in questions]
    return seen


def rejection_seen(carried: Iterable[RequestKey]) -> list[P.Observation]:
    """A terminal rejection of a retry (``invalid_request_state``): a terminal rejection
    of each answer it ``carried``."""
    return [P.Rejected(q) for q in carried]


def retry_seen(
    call: str, token: str | int | None, answers: Iterable[tuple[RequestKey, Mapping[str, Any]]]
) -> list[P.Observation]:
    """A retry of ``call`` echoing state ``token`` (``None``: none yet) with ``answers``:
    a submission of each answer, then a resume of the call with the token as cursor."""
    seen: list[P.Observation] = [P.Submitted(q, dict(a)) for q, a in answers]
    seen.append(P.Resumed(call, str(token)))
    return seen


def late_answer_sent(questions: Iterable[str]) -> str:
    """Why P6 (restated for the era) is broken: a retry carried the answers to
    ``questions``, each given after the question's client-side age passed."""
    return (
        f"a retry carried the answer to question {', '.join(questions)}, given"
        " after the question's client-side age passed"
    )


# ------------------------------------------------------------------ inputs and outputs


class Complete(
    base.Tagged,
    NamedTuple("Complete", [("op", Literal["result"]), ("result", Literal["complete"])]),
):
    """Input: the call's result (it completed)."""

    __slots__ = ()

    def __new__(cls) -> Complete:
        return super().__new__(cls, "result", "complete")


class InputRequired(
    base.Tagged,
    NamedTuple(
        "InputRequired",
        [
            ("op", Literal["result"]),
            ("result", Literal["ir"]),
            ("token", int),
            ("questions", tuple[int, ...]),
        ],
    ),
):
    """Input: an ``InputRequiredResult`` sealing state ``token`` and asking ``questions``
    (none: state only)."""

    __slots__ = ()

    def __new__(cls, token: int, questions: tuple[int, ...]) -> InputRequired:
        return super().__new__(cls, "result", "ir", token, questions)


class Error(
    base.Tagged,
    NamedTuple("Error", [("op", Literal["error"]), ("reason", Literal["invalid_state", "lost"])]),
):
    """Input: the request failed: the server rejected its state (``invalid_state``,
    JSON-RPC -32602) or it was lost in transit (``lost``)."""

    __slots__ = ()

    def __new__(cls, reason: Literal["invalid_state", "lost"]) -> Error:
        return super().__new__(cls, "error", reason)


Input = Complete | InputRequired | Error | Answer | Tick | Restart
"""What this world tells a client policy (``Answer.request``: the question)."""


class Retry(
    base.Tagged,
    NamedTuple(
        "Retry",
        [
            ("op", Literal["retry"]),
            ("token", int | None),
            ("answers", tuple[tuple[int, tuple[tuple[str, Any], ...]], ...]),
        ],
    ),
):
    """Output: send the call again, echoing state ``token`` (None: none yet) with
    ``answers``, each ``(question, answer items)``."""

    __slots__ = ()

    def __new__(
        cls, token: int | None, answers: tuple[tuple[int, tuple[tuple[str, Any], ...]], ...]
    ) -> Retry:
        return super().__new__(cls, "retry", token, answers)


Output = Present | Withdraw | Retry | End
"""What a client policy of this world does (``Present.request``: the question)."""

OUTPUTS = base.output_kinds(Present, Withdraw, Retry, End)


class MrtrPolicy(base.ClockedPolicy[C, Input, Output], Protocol[C]):
    """A client under test, as a pure function of its state, the clock and one input;
    ``init()`` is its state when the call's first request has just been sent."""


@dataclass(frozen=True, slots=True)
class MrtrBounds(base.WorldBounds):
    """The environment variant and its bounds, checked on construction as every world's
    are (:class:`~fsm.worlds.common.WorldBounds`: a count below 0 raises
    :class:`BoundsError`)."""

    questions: int = 1
    reasks: int = 0
    polls: int = 0
    expiries: int = 1
    restarts: int = 0
    lost: int = 1
    crashes: int = 0
    on_invalid: OnInvalid = "reject"
    user: UserMode = "answers"
    tick: TickMode = "seen"
    ttl: float = 0.5


Minted = tuple[int, frozenset[int], bool, float]
"""A state token minted: (token, questions answered in it, still verifiable, the time it
was minted)."""


class Env(base.EnvBase):
    """The environment's part of a state; interned, with its memos
    (:class:`fsm.worlds.common.EnvBase`)."""

    FIELDS = (
        "states",
        "inflight",
        "reasks",
        "polls",
        "expiries",
        "restarts",
        "lost",
        "crashes",
        "t",
        "asked",
        "shown",
        "prompts",
        "late",
        "void",
        "ended",
    )
    __slots__ = FIELDS

    states: tuple[Minted, ...]
    """Every state token minted."""
    inflight: tuple[int | None, frozenset[int]] | None
    """The request in flight: the token it echoes and the questions it answers."""
    reasks: int
    polls: int
    expiries: int
    restarts: int
    lost: int
    crashes: int
    t: float
    """The clock, in steps longer than a question's client-side age (and shorter than
    the server's TTL): a question shown at ``t`` has aged out at ``t + 1``."""
    asked: frozenset[int]
    """Questions the server has asked so far."""
    shown: frozenset[tuple[int, float]]
    """``(question, time)`` of each question's first presentation."""
    prompts: frozenset[int]
    late: frozenset[int]
    """Questions the user answered after their client-side age passed."""
    void: bool
    """A retry carried a late answer: sent into a state that surely expired."""
    ended: str
    """How the client ended the call ("completed", "failed"); empty while it runs."""


State = base.WorldState[Env]
"""One state: the environment and the client side (its ``client`` and ``monitor``)."""


class MrtrSnapshotPolicy(base.ClockedSnapshotPolicy[base.D, Input, Output]):
    """A :class:`~fsm.worlds.common.SnapshotPolicy` in this world's form
    (:class:`MrtrPolicy`): its state is the decider's snapshot, its clock the world's."""


class MrtrWorld(base.ClockedWorld[Env, MrtrBounds, Input, Output]):
    """The closed system ``policy`` x MRTR environment within ``bounds``."""

    interaction = CALL
    env_type = Env
    opening = (P.Began(CALL),)
    outputs = OUTPUTS
    subject = "call"
    presented_doc = "a question is presented"
    completed_doc = "the call can complete with the user's answers"
    policy: MrtrPolicy[Any]

    void_doc = (
        "a question past its client-side age is never presented again, "
        "and no answer given after it is sent"
    )

    def _why(self, name: str, states: Sequence[State]) -> str | None:
        """P6 broken by the environment's record: the retry that carried a late answer."""
        prev, last = states[-2:] if len(states) > 1 else (None, states[-1])
        if name != "P6" or prev is None or not last.env.void or prev.env.void:
            return None
        late = sorted(last.env.inflight[1] & last.env.late) if last.env.inflight else []
        return late_answer_sent(map(str, late))

    def format_state(self, s: State) -> str:
        e = s.env
        states = " ".join(f"{tok}{sorted(qs)}{'' if ok else 'x'}" for tok, qs, ok, _ in e.states)
        return (
            f"states=[{states}] inflight={e.inflight and (e.inflight[0], sorted(e.inflight[1]))}"
            f" prompts={sorted(e.prompts)} t={e.t} ended={e.ended}"
        )

    # ------------------------------------------------------------ the environment

    def _initial(self) -> dict[str, Any]:
        b, empty = self.bounds, frozenset[int]()
        return {
            "states": (),
            "inflight": (None, empty),
            "reasks": b.reasks,
            "polls": b.polls,
            "expiries": b.expiries,
            "restarts": b.restarts,
            "lost": b.lost,
            "crashes": b.crashes,
            "t": 0.0,
            "asked": empty,
            "shown": frozenset[tuple[int, float]](),
            "prompts": empty,
            "late": empty,
            "void": False,
            "ended": "",
        }

    def _enabled(self, e: Env) -> tuple[Move, ...]:
        moves: list[Move] = []
        if e.inflight is not None:
            moves.append(Move("server responds"))
            if e.lost > 0:
                moves.append(Move("request lost"))
        if self.bounds.user == "answers":
            moves += [Move("user answers", q) for q in sorted(e.prompts)]
        # Time moves on while a prompt shown now is up (or before anything happened):
        # every question can age out, and the clock stays finite.
        if not e.ended and (e.t == 0.0 or any((q, e.t) in e.shown for q in e.prompts)):
            moves.append(Move("time passes"))
        if e.expiries > 0 and any(ok and minted < e.t for _, _, ok, minted in e.states):
            moves.append(Move("state expires"))
        if e.restarts > 0 and not e.ended:
            moves.append(Move("server restarts"))
        if e.crashes > 0 and not e.ended and not e.prompts:
            moves.append(Move("client crashes"))
        return tuple(moves)

    def _edit(self, e: Env, m: Move) -> tuple[tuple[Any, ...], Input | None, Hashable] | None:
        """Move ``m`` in ``e``: the next environment, the input it tells the client, and
        the context of the client's reaction: the clock, and the questions the request
        just judged carried (a rejection rejects their answers)."""
        inp: Input | None = None
        carried: frozenset[int] = frozenset()
        if m.name == "server responds" and e.inflight is not None:
            carried = e.inflight[1]
            e, inp = self._respond(e)
        elif m.name == "request lost" and e.inflight is not None and e.lost > 0:
            e, inp = e.replace(inflight=None, lost=e.lost - 1), Error("lost")
        elif m.name == "user answers" and m.arg in e.prompts:
            q = m.arg
            late = e.late | {q} if any(x == q and at < e.t for x, at in e.shown) else e.late
            e, inp = e.replace(prompts=e.prompts - {q}, late=late), Answer(q)
        elif m.name == "time passes":
            e = e.replace(t=e.t + 1.0)
            inp = Tick() if self.bounds.tick == "seen" else None
        elif m.name == "state expires" and e.expiries > 0:
            e = e.replace(states=_invalidate(e.states, e.t), expiries=e.expiries - 1)
        elif m.name == "server restarts" and e.restarts > 0:
            e = e.replace(states=_invalidate(e.states, None), restarts=e.restarts - 1)
        elif m.name == "client crashes" and e.crashes > 0:
            e, inp = e.replace(inflight=None, crashes=e.crashes - 1), Restart()
        else:
            return None
        return e.values, inp, (e.t, carried)

    def _respond(self, e: Env) -> tuple[Env, Input]:
        """The server's answer to the request in flight."""
        assert e.inflight is not None
        token, answers = e.inflight
        e = e.replace(inflight=None)
        known: frozenset[int] = frozenset()
        if token is not None:
            minted = e.states[token]
            if not minted[2]:
                if self.bounds.on_invalid == "reject":
                    return e, Error("invalid_state")
                answers = frozenset()  # unverifiable: start over and ask again
            else:
                known = minted[1]
        if answers and e.reasks > 0:  # the re-asking tool: the answer does not stick
            return self._ask(e.replace(reasks=e.reasks - 1), known, tuple(sorted(answers)))
        known |= answers
        missing = tuple(q for q in range(self.bounds.questions) if q not in known)
        if missing:
            return self._ask(e, known, missing)
        if e.polls > 0:
            return self._ask(e.replace(polls=e.polls - 1), known, ())
        return e, Complete()

    def _ask(self, e: Env, known: frozenset[int], questions: tuple[int, ...]) -> tuple[Env, Input]:
        token = len(e.states)
        e = e.replace(states=(*e.states, (token, known, True, e.t)), asked=e.asked | set(questions))
        return e, InputRequired(token, questions)

    def _perform(self, e: Env, outputs: tuple[Output, ...]) -> Env:
        """The environment after the client's operations: prompts shown (the first time
        recorded, to age) or withdrawn, the retry in flight, the call ended."""
        for out in outputs:
            if isinstance(out, Present):
                q, t = out.request, e.t
                first = not any(x == q for x, _ in e.shown)
                e = e.replace(
                    prompts=e.prompts | {q}, shown=e.shown | {(q, t)} if first else e.shown
                )
            elif isinstance(out, Withdraw):
                e = e.replace(prompts=e.prompts - {out.request})
            elif isinstance(out, Retry):
                questions = frozenset(q for q, _ in out.answers)
                e = e.replace(
                    inflight=(out.token, questions), void=e.void or bool(questions & e.late)
                )
            else:
                e = e.replace(ended=e.ended or out.outcome, prompts=frozenset(), inflight=None)
        return self._env(e.values)

    # ------------------------------------------------------------ the client side

    def _told(
        self, monitor: P.MonitorState, context: tuple[float, frozenset[int]], inp: Input
    ) -> list[P.Observation]:
        """An ``InputRequiredResult`` is an event (its token the id) and a delivery of each
        question (a replay when asked before); ``invalid_request_state`` a terminal
        rejection of the answers the request carried."""
        t, carried = context
        if isinstance(inp, InputRequired):
            questions = map(key, inp.questions)
            return round_seen(CALL, str(inp.token), questions, t, monitor.presented)
        if isinstance(inp, Error) and inp.reason == "invalid_state":
            return rejection_seen(map(key, sorted(carried)))
        if isinstance(inp, Answer):
            return [P.Answered(key(inp.request), dict(USER_ANSWER))]
        if isinstance(inp, Restart):  # a new process: P7 compares what it sees from now on
            return [P.Restarted()]
        return []

    def _did_own(self, out: Output) -> list[P.Observation]:
        """A retry is a submission of each answer it carries and a resume of the call with
        the echoed token as cursor."""
        if isinstance(out, Retry):
            return retry_seen(CALL, out.token, ((key(q), dict(a)) for q, a in out.answers))
        return []


def _invalidate(states: tuple[Minted, ...], before: float | None) -> tuple[Minted, ...]:
    """The states with those minted before ``before`` (all if ``None``) unverifiable."""
    return tuple(
        (tok, qs, ok and before is not None and at >= before, at) for tok, qs, ok, at in states
    )
