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
* let the user answer each shown prompt at any time, before or after the clock passes
  the presented questions' client-side age, or never (``user``); tell the client the
  clock passed (``tick="seen"``: its timer fired) or not (``"missed"``: it sees the
  time only with the next event).

The client is a policy: ``step(state, t, input) -> (state, outputs)``. Inputs:
``("result", "complete")``, ``("result", "ir", token, questions)`` (``questions`` empty:
state only), ``("error", "invalid_state" | "lost")``, ``("answer", q)``, ``("tick",)``.
Outputs: ``("present", q)``, ``("withdraw", q)``, ``("retry", token, ((q, answer),
...))``, ``("end", "completed" | "failed")``.

Properties: the shared monitor (:mod:`fsm.properties`) judges the same observations as
in the 2025 world, read in MRTR terms (``docs/mrtr.md``): a question is a request key
``(call, q)``; an ``InputRequiredResult`` is an event whose id is its state token and a
delivery of each question (a *replay* when the call asked it before); a retry is a
resume of the call with the echoed token as cursor and a submission of each answer it
carries; ``invalid_request_state`` is a terminal rejection of the answers it carried.
P6 is restated for the era: besides a re-asked question past its client-side age being
presented, an answer the user gave after that age must never be sent (into a state that
has surely expired). Termination (L1) is the checker's cycle detection.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple, Protocol, TypeVar

from fsm import properties as P
from fsm.checker import BaseModel, Property

C = TypeVar("C")

Input = tuple[Any, ...]
Output = tuple[Any, ...]
CALL = "call"
USER_ANSWER: tuple[tuple[str, Any], ...] = (("action", "accept"),)

OnInvalid = Literal["reject", "reask"]
"""What the server does with a state it cannot verify."""
UserMode = Literal["answers", "never"]
TickMode = Literal["seen", "missed"]


def key(q: int) -> tuple[str, int]:
    """The request key of question ``q`` of the call."""
    return (CALL, q)


class MrtrPolicy(Protocol[C]):
    """A client under test, as a pure function of its state, the clock and one input."""

    name: str

    def init(self) -> C:
        """The client's state when the call's first request has just been sent."""
        ...

    def step(self, state: C, t: float, inp: Input) -> tuple[C, tuple[Output, ...]]:
        """React to ``inp`` at time ``t``; return the new state and the operations."""
        ...


@dataclass(frozen=True, slots=True)
class MrtrBounds:
    """The environment variant and its bounds."""

    questions: int = 1
    reasks: int = 0
    polls: int = 0
    expiries: int = 1
    restarts: int = 0
    lost: int = 1
    on_invalid: OnInvalid = "reject"
    user: UserMode = "answers"
    tick: TickMode = "seen"
    ttl: float = 0.5


class Env(NamedTuple):
    """The environment's part of a state."""

    states: tuple[tuple[int, frozenset[int], bool, float], ...]
    """Every state token minted: (token, questions answered in it, still verifiable,
    the time it was minted)."""
    inflight: tuple[int | None, frozenset[int]] | None
    """The request in flight: the token it echoes and the questions it answers."""
    reasks: int
    polls: int
    expiries: int
    restarts: int
    lost: int
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


class State(NamedTuple):
    env: Env
    client: Any
    monitor: P.MonitorState


class Move(NamedTuple):
    """An environment step; ``str(move)`` names it in counterexamples."""

    name: str
    arg: Any = None

    def __str__(self) -> str:
        return self.name if self.arg is None else f"{self.name} {self.arg}"


class MrtrWorld(BaseModel[State, Move]):
    """The closed system ``policy`` x MRTR environment within ``bounds``."""

    def __init__(
        self,
        policy: MrtrPolicy[Any],
        bounds: MrtrBounds,
        *,
        name: str = "",
        expect: Sequence[str] = (),
    ) -> None:
        self.policy, self.bounds = policy, bounds
        self._name = name or policy.name
        self.expected_violations = tuple(expect)
        self.budgets = P.Budgets(ttl=bounds.ttl, counters=False)
        self._policy_fired: Any = getattr(policy, "fired", None)
        self._fired: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        return self._name

    # ----------------------------------------------------------------- Model API

    def init_states(self) -> Sequence[State]:
        b = self.bounds
        monitor, _ = P.step(P.MonitorState(), P.Began(CALL), self.budgets)
        env = Env(
            states=(),
            inflight=(None, frozenset()),
            reasks=b.reasks,
            polls=b.polls,
            expiries=b.expiries,
            restarts=b.restarts,
            lost=b.lost,
            t=0.0,
            asked=frozenset(),
            shown=frozenset(),
            prompts=frozenset(),
            late=frozenset(),
            void=False,
            ended="",
        )
        return [State(env, self.policy.init(), monitor)]

    def actions(self, s: State) -> Iterable[Move]:
        e, moves = s.env, []
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
        return moves

    def next_state(self, s: State, m: Move) -> State | None:
        e = s.env
        inp: Input | None = None
        carried: frozenset[int] = frozenset()
        if m.name == "server responds" and e.inflight is not None:
            carried = e.inflight[1]
            e, inp = self._respond(e)
        elif m.name == "request lost" and e.inflight is not None and e.lost > 0:
            e, inp = e._replace(inflight=None, lost=e.lost - 1), ("error", "lost")
        elif m.name == "user answers" and m.arg in e.prompts:
            q = m.arg
            late = e.late | {q} if any(x == q and at < e.t for x, at in e.shown) else e.late
            e, inp = e._replace(prompts=e.prompts - {q}, late=late), ("answer", q)
        elif m.name == "time passes":
            e = e._replace(t=e.t + 1.0)
            inp = ("tick",) if self.bounds.tick == "seen" else None
        elif m.name == "state expires" and e.expiries > 0:
            e = e._replace(states=_invalidate(e.states, e.t), expiries=e.expiries - 1)
        elif m.name == "server restarts" and e.restarts > 0:
            e = e._replace(states=_invalidate(e.states, None), restarts=e.restarts - 1)
        else:
            return None
        if inp is None:
            self._fired = ()
            return State(e, s.client, s.monitor)
        return self._react(State(e, s.client, s.monitor), inp, carried)

    def properties(self) -> Sequence[Property[State]]:
        props: list[Property[State]] = [
            Property.always(p, _holds(p), P.PROPERTIES[p])
            for p in ("P1", "P2", "P3", "P4", "P5", "P7")
        ]
        props += [
            Property.always(
                "P6",
                lambda s: "P6" not in s.monitor.violated and not s.env.void,
                "a question past its client-side age is never presented again, "
                "and no answer given after it is sent",
            ),
            Property.deadlock(
                "P5-quiescent", "at quiescence the call has ended (exactly once: see P5)"
            ),
            Property.terminates(
                "L1", "termination: no behaviour runs forever (any reachable cycle violates)"
            ),
            Property.sometimes(
                "presented", lambda s: bool(s.monitor.presented), "a question is presented"
            ),
        ]
        if self.bounds.user == "answers":
            props.append(
                Property.sometimes(
                    "completed",
                    lambda s: "completed" in _outcomes(s),
                    "the call can complete with the user's answers",
                )
            )
        return props

    def declared_transitions(self) -> Iterable[str]:
        declared = getattr(self.policy, "declared", None)
        return declared() if declared is not None else ()

    def fired_transitions(self, s: State, m: Move, t: State) -> Iterable[str]:
        return self._fired

    def is_terminal(self, s: State) -> bool:
        return bool(s.env.ended)

    def format_state(self, s: State) -> str:
        e = s.env
        states = " ".join(f"{tok}{sorted(qs)}{'' if ok else 'x'}" for tok, qs, ok, _ in e.states)
        return (
            f"states=[{states}] inflight={e.inflight and (e.inflight[0], sorted(e.inflight[1]))}"
            f" prompts={sorted(e.prompts)} t={e.t} ended={e.ended}"
        )

    # ------------------------------------------------------------ the environment

    def _respond(self, e: Env) -> tuple[Env, Input]:
        """The server's answer to the request in flight."""
        assert e.inflight is not None
        token, answers = e.inflight
        e = e._replace(inflight=None)
        known: frozenset[int] = frozenset()
        if token is not None:
            minted = e.states[token]
            if not minted[2]:
                if self.bounds.on_invalid == "reject":
                    return e, ("error", "invalid_state")
                answers = frozenset()  # unverifiable: start over and ask again
            else:
                known = minted[1]
        if answers and e.reasks > 0:  # the re-asking tool: the answer does not stick
            return self._ask(e._replace(reasks=e.reasks - 1), known, tuple(sorted(answers)))
        known |= answers
        missing = tuple(q for q in range(self.bounds.questions) if q not in known)
        if missing:
            return self._ask(e, known, missing)
        if e.polls > 0:
            return self._ask(e._replace(polls=e.polls - 1), known, ())
        return e, ("result", "complete")

    def _ask(self, e: Env, known: frozenset[int], questions: tuple[int, ...]) -> tuple[Env, Input]:
        token = len(e.states)
        e = e._replace(
            states=(*e.states, (token, known, True, e.t)), asked=e.asked | set(questions)
        )
        return e, ("result", "ir", token, questions)

    # ------------------------------------------------------------ the client side

    def _react(self, s: State, inp: Input, carried: frozenset[int] = frozenset()) -> State:
        """The monitor observes what the client is told, the policy steps, the monitor
        observes what it does; ``carried``: the answers of the request just judged."""
        e, monitor = s.env, s.monitor
        t = e.t
        seen: list[P.Observation] = []
        kind = inp[0]
        if kind == "result" and inp[1] == "ir":
            _, _, token, questions = inp
            seen.append(P.EventSeen(CALL, str(token)))
            for q in questions:
                seen.append(P.Delivered(key(q), CALL, t, replayed=key(q) in monitor.presented))
        elif inp == ("error", "invalid_state"):
            seen += [P.Rejected(key(q)) for q in sorted(carried)]
        elif kind == "answer":
            seen.append(P.Answered(key(inp[1]), dict(USER_ANSWER)))
        client, outputs = self.policy.step(s.client, t, inp)
        self._fired = tuple(self._policy_fired()) if self._policy_fired is not None else ()
        for out in outputs:
            op = out[0]
            if op == "present":
                q = out[1]
                seen.append(P.Presented(key(q), t))
                first = not any(x == q for x, _ in e.shown)
                e = e._replace(
                    prompts=e.prompts | {q}, shown=e.shown | {(q, t)} if first else e.shown
                )
            elif op == "withdraw":
                seen.append(P.DeclaredDead(key(out[1])))
                e = e._replace(prompts=e.prompts - {out[1]})
            elif op == "retry":
                _, token, carried_answers = out
                questions = frozenset(q for q, _ in carried_answers)
                seen += [P.Submitted(key(q), dict(a)) for q, a in carried_answers]
                seen.append(P.Resumed(CALL, str(token)))
                e = e._replace(inflight=(token, questions), void=e.void or bool(questions & e.late))
            elif op == "end":
                seen.append(P.Ended(CALL, out[1]))
                e = e._replace(ended=e.ended or out[1], prompts=frozenset(), inflight=None)
        for obs in seen:
            monitor = P.step(monitor, obs, self.budgets)[0]
        return State(e, client, monitor)


Minted = tuple[int, frozenset[int], bool, float]


def _invalidate(states: tuple[Minted, ...], before: float | None) -> tuple[Minted, ...]:
    """The states with those minted before ``before`` (all if ``None``) unverifiable."""
    return tuple(
        (tok, qs, ok and before is not None and at >= before, at) for tok, qs, ok, at in states
    )


def _holds(name: str) -> Any:
    return lambda s: name not in s.monitor.violated


def _outcomes(s: State) -> set[str]:
    return {s.env.ended} if s.env.ended else set()
