"""A closed world for the model checker: one MCP tool call, its server, network and user.

A model in ``models/`` is ``World(policy, Bounds(...))``: a client policy (the library's
guard, the seed incident's naive client, the measured mcp 2.3.0 client) against an
environment that is free, within bounds, to

* send up to ``requests`` interactive server requests (``elicitation/create``) on the
  tool call's SSE stream, each kept in the server's replay buffer;
* fire each request's server-side deadline, silently or with a ``notifications/cancelled``
  (the v2 courtesy cancel, stored in the buffer too);
* answer an answer POST for a request it no longer has with ``202`` (what the official
  servers do), ``404``, a JSON-RPC error, or a ``500`` wrapping a JSON-RPC error;
* cut the connection cleanly or abruptly (``cuts`` times), fail answer POSTs at the
  transport (``post_faults`` times), reap the session (if ``reaper``);
* let the user answer each presented prompt at any time, or never (``user``);
* replay after the ``Last-Event-ID`` (the specification), or from it inclusively (the
  seed incident's server, which re-sent the event the client named).

The server completes the tool call once every request it sent is answered or dead
(``completes_on_deadline``; otherwise a dead request hangs the tool, the seed incident's
server). The client's clock passes every recorded deadline at most once (``clock``).

Every step feeds the policy an :data:`Input` and gets :data:`Output` operations back; the
world turns operations into pending work (a timer, a resume GET, an answer POST) that the
environment completes later, and into :mod:`fsm.properties` observations, so P1-P7 are
checked by the one shared monitor. Termination (L1) is the checker's cycle detection.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Literal, NamedTuple, Protocol, TypeVar

from fsm import properties as P
from fsm.checker import BaseModel, Property

C = TypeVar("C")

# Inputs to a client policy: ("event", index, kind, request) | ("cut", clean) | ("timer",)
# | ("resumed",) | ("resume_404",) | ("answer", request) | ("outcome", request, outcome)
# | ("tick",). Outputs: ("present", r) | ("withdraw", r) | ("submit", r) | ("wait",)
# | ("resume", cursor) | ("end", outcome), where a submit carries the answer it sends as a
# tuple of items: ("submit", r, (("action", "accept"),)).
Input = tuple[Any, ...]
Output = tuple[Any, ...]

Outcome = Literal["202", "404", "404rpc", "rpc", "500rpc", "neterr"]
"""Answer POST outcomes: accepted, session gone, a 404 whose JSON-RPC body says "unknown
request id" (the seed incident's server), JSON-RPC "no such request" (400), the same
wrapped in a 500, and a transport error."""

TERMINAL_OUTCOMES = frozenset({"404", "404rpc", "rpc", "500rpc"})


class ClientPolicy(Protocol[C]):
    """A client under test, as a pure function of its state and one input."""

    name: str

    def init(self) -> C:
        """The client's state when the tool call's stream has just opened."""
        ...

    def step(self, state: C, inp: Input) -> tuple[C, tuple[Output, ...]]:
        """React to ``inp``; return the new state and the operations to perform."""
        ...


@dataclass(frozen=True, slots=True)
class Bounds:
    """The environment variant and its bounds (all parameters of a model)."""

    requests: int = 1
    cuts: int = 2
    post_faults: int = 1
    deadline: Literal["silent", "cancel"] = "silent"
    unknown_answer: Outcome = "202"
    completes_on_deadline: bool = True
    user: Literal["answers", "never"] = "answers"
    reaper: bool = False
    clock: bool = True
    ttl: float = 0.5
    replay: Literal["after", "inclusive"] = "after"


class WorldState(NamedTuple, Generic[C]):
    """One global state: server, network, user, pending client work, client, monitor."""

    log: tuple[tuple[str, int], ...]  # ("prime"|"req"|"cancel"|"resp", request)
    server: tuple[str, ...]  # per sent request: "pending" | "answered" | "dead"
    conn: int | None  # next log index to deliver, None when disconnected
    cuts: int
    faults: int
    reaped: bool
    t: float
    prompts: frozenset[int]  # presented and not yet answered/withdrawn (user-visible)
    user_done: frozenset[int]  # requests the user answered at least once
    timer: bool
    resume: int | None  # cursor index of the resume GET in flight
    posts: frozenset[int]  # answer POSTs in flight
    ended: bool
    client: C
    monitor: P.MonitorState


@dataclass(frozen=True, slots=True)
class Move:
    """An environment step; ``str(move)`` names it in counterexamples."""

    name: str
    arg: Any = None

    def __str__(self) -> str:
        return self.name if self.arg is None else f"{self.name} {self.arg}"


KEY_SESSION = "s"
USER_ANSWER: tuple[tuple[str, Any], ...] = (("action", "accept"),)
"""What the user answers (outputs carry answers as sorted item tuples, hashable)."""
STREAM = "post"


def key(r: int) -> tuple[str, int]:
    """The request key of server request number ``r``."""
    return (KEY_SESSION, r)


class World(BaseModel[WorldState[C], Move], Generic[C]):
    """The closed system ``policy`` x environment within ``bounds``."""

    def __init__(
        self,
        policy: ClientPolicy[C],
        bounds: Bounds,
        *,
        properties: Sequence[str] = tuple(P.PROPERTIES),
        name: str = "",
        expect: Sequence[str] = (),
    ) -> None:
        self.policy, self.bounds = policy, bounds
        self._props = tuple(properties)
        self._name = name or f"{policy.name}"
        self.expected_violations = tuple(expect)
        self._monitor_memo: dict[tuple[P.MonitorState, P.Observation], P.MonitorState] = {}
        self.budgets = P.Budgets(ttl=bounds.ttl, counters=False)

    @property
    def name(self) -> str:
        return self._name

    # ----------------------------------------------------------------- Model API

    def init_states(self) -> Sequence[WorldState[C]]:
        monitor, _ = P.step(P.MonitorState(), P.Began(STREAM), self.budgets)
        return [
            WorldState(
                log=(("prime", -1),),
                server=(),
                conn=0,
                cuts=self.bounds.cuts,
                faults=self.bounds.post_faults,
                reaped=False,
                t=0.0,
                prompts=frozenset(),
                user_done=frozenset(),
                timer=False,
                resume=None,
                posts=frozenset(),
                ended=False,
                client=self.policy.init(),
                monitor=monitor,
            )
        ]

    def actions(self, s: WorldState[C]) -> Iterable[Move]:
        b = self.bounds
        if s.reaped and s.ended:
            return []
        moves: list[Move] = []
        if not s.reaped and len(s.server) < b.requests:
            moves.append(Move("server sends elicitation", len(s.server)))
        for r, st in enumerate(s.server):
            if st == "pending" and not s.reaped:
                moves.append(Move("deadline fires", r))
        if s.conn is not None and s.conn < len(s.log):
            moves.append(Move("deliver", s.conn))
        if s.conn is not None and s.cuts > 0:
            moves += [Move("cut clean"), Move("cut abrupt")]
        if s.timer:
            moves.append(Move("backoff elapses"))
        if s.resume is not None:
            moves.append(Move("resume answered"))
            if s.cuts > 0 and not s.reaped:
                moves.append(Move("resume fails"))
        for r in sorted(s.posts):
            moves.append(Move("answer POST", r))
            if s.faults > 0 and not s.reaped:
                moves.append(Move("answer POST fails", r))
        if b.user == "answers":
            moves += [Move("user answers", r) for r in sorted(s.prompts)]
        if b.clock and s.t == 0.0:
            moves.append(Move("clock passes deadlines"))
        if b.reaper and not s.reaped:
            moves.append(Move("server reaps session"))
        return moves

    def next_state(self, s: WorldState[C], m: Move) -> WorldState[C] | None:
        b = self.bounds
        n = m.name
        if n == "server sends elicitation":
            s = _with(s, server=(*s.server, "pending"), log=(*s.log, ("req", m.arg)))
            return s
        if n == "deadline fires":
            server = _set(s.server, m.arg, "dead")
            log = s.log + ((("cancel", m.arg),) if b.deadline == "cancel" else ())
            return self._maybe_complete(_with(s, server=server, log=log))
        if n == "deliver":
            kind, r = s.log[m.arg]
            s = _with(s, conn=m.arg + 1)
            return self._feed(s, ("event", m.arg, kind, r))
        if n in ("cut clean", "cut abrupt"):
            s = _with(s, conn=None, cuts=s.cuts - 1)
            return self._feed(s, ("cut", n == "cut clean"))
        if n == "backoff elapses":
            return self._feed(_with(s, timer=False), ("timer",))
        if n == "resume answered":
            if s.reaped:
                return self._feed(_with(s, resume=None), ("resume_404",))
            start = (s.resume or 0) + (1 if self.bounds.replay == "after" else 0)
            s = _with(s, conn=start, resume=None)
            return self._feed(s, ("resumed",))
        if n == "resume fails":
            return self._feed(_with(s, resume=None, cuts=s.cuts - 1), ("cut", False))
        if n == "answer POST":
            return self._post(s, m.arg)
        if n == "answer POST fails":
            s = _with(s, posts=s.posts - {m.arg}, faults=s.faults - 1)
            return self._feed(s, ("outcome", m.arg, "neterr"))
        if n == "user answers":
            s = _with(s, prompts=s.prompts - {m.arg}, user_done=s.user_done | {m.arg})
            s = self._observe(s, P.Answered(key(m.arg), dict(USER_ANSWER)))
            return self._feed(s, ("answer", m.arg))
        if n == "clock passes deadlines":
            return self._feed(_with(s, t=1.0), ("tick",))
        if n == "server reaps session":  # the server also ends the open SSE stream
            was_open = s.conn is not None
            s = _with(s, reaped=True, conn=None)
            return self._feed(s, ("cut", True)) if was_open else s
        return None

    def properties(self) -> Sequence[Property[WorldState[C]]]:
        props: list[Property[WorldState[C]]] = [
            Property.always(p, _holds(p), P.PROPERTIES[p]) for p in self._props if p != "L1"
        ]
        if "P5" in self._props:
            props.append(
                Property.always(
                    "P5-quiescent",
                    self._ended_if_quiescent,
                    "at quiescence the interaction has ended (exactly once: see P5)",
                )
            )
        if "L1" in self._props:
            props.append(
                Property.terminates(
                    "L1", "termination: no behaviour runs forever (any reachable cycle violates)"
                )
            )
        props += [
            Property.sometimes(
                "presented",
                lambda s: bool(s.monitor.presented),
                "a request is presented (the model is not vacuous)",
            ),
            *(
                []
                if self.bounds.user == "never"
                else [
                    Property.sometimes(
                        "completed",
                        lambda s: (
                            s.ended and not s.reaped and any(x == "answered" for x in s.server)
                        ),
                        "the interaction can complete with an answer",
                    )
                ]
            ),
            Property.sometimes(
                "cut-and-resumed",
                lambda s: s.cuts < self.bounds.cuts and s.conn is not None,
                "a cut stream is resumed",
            ),
        ]
        return props

    def declared_transitions(self) -> Iterable[str]:
        declared = getattr(self.policy, "declared", None)
        return declared() if declared is not None else ()

    def fired_transitions(self, s: WorldState[C], m: Move, t: WorldState[C]) -> Iterable[str]:
        fired = getattr(self.policy, "fired", None)
        return fired() if fired is not None else ()

    def is_terminal(self, s: WorldState[C]) -> bool:
        return True  # a quiescent world is a legal end; P5-quiescent judges it

    def format_state(self, s: WorldState[C]) -> str:
        log = " ".join(f"{k}{'' if r < 0 else r}" for k, r in s.log)
        return (
            f"server=[{log}] reqs={list(s.server)} conn={s.conn} prompts={sorted(s.prompts)}"
            f" posts={sorted(s.posts)} t={s.t} ended={s.ended}"
        )

    # ------------------------------------------------------------ internals

    def _ended_if_quiescent(self, s: WorldState[C]) -> bool:
        if s.ended:
            return True
        return any(True for _ in self.actions(s))

    def _post(self, s: WorldState[C], r: int) -> WorldState[C]:
        s = _with(s, posts=s.posts - {r})
        if s.reaped:
            outcome: str = "404"
        elif s.server[r] == "pending":
            s = _with(s, server=_set(s.server, r, "answered"))
            outcome = "202"
            s = self._maybe_complete(s)
        elif s.server[r] == "answered":
            outcome = "202"
        else:
            outcome = self.bounds.unknown_answer
        return self._feed(s, ("outcome", r, outcome))

    def _maybe_complete(self, s: WorldState[C]) -> WorldState[C]:
        done = len(s.server) == self.bounds.requests and all(
            x == "answered" or (x == "dead" and self.bounds.completes_on_deadline) for x in s.server
        )
        if done and ("resp", -1) not in s.log:
            s = _with(s, log=(*s.log, ("resp", -1)))
        return s

    def _observe(self, s: WorldState[C], obs: P.Observation) -> WorldState[C]:
        # The monitor is pure: memoise it (the same (state, observation) recurs on many edges).
        memo = self._monitor_memo
        if isinstance(obs, P.Answered | P.Submitted):  # carry dicts: not hashable
            monitor = P.step(s.monitor, obs, self.budgets)[0]
        elif (cached := memo.get((s.monitor, obs))) is not None:
            monitor = cached
        else:
            monitor = memo[(s.monitor, obs)] = P.step(s.monitor, obs, self.budgets)[0]
        return _with(s, monitor=monitor) if monitor != s.monitor else s

    def _feed(self, s: WorldState[C], inp: Input) -> WorldState[C]:
        # What the client was told, for the monitor.
        if inp[0] == "event":
            _, index, kind, r = inp
            s = self._observe(s, P.EventSeen(STREAM, str(index)))
            if kind == "req":
                replayed = index < _newest(s)
                s = self._observe(s, P.Delivered(key(r), STREAM, s.t, replayed=replayed))
            elif kind == "cancel":
                s = self._observe(s, P.Cancelled(key(r)))
        elif inp[0] == "outcome" and inp[2] in TERMINAL_OUTCOMES:
            s = self._observe(s, P.Rejected(key(inp[1]), session=inp[2] == "404"))
        elif inp[0] == "resume_404":
            s = self._observe(s, P.SessionGone())
        client, outputs = self.policy.step(s.client, inp)
        s = _with(s, client=client)
        for out in outputs:
            s = self._apply(s, out)
        return s

    def _apply(self, s: WorldState[C], out: Output) -> WorldState[C]:
        op = out[0]
        if op == "present":
            s = _with(s, prompts=s.prompts | {out[1]})
            return self._observe(s, P.Presented(key(out[1]), s.t))
        if op == "withdraw":
            s = _with(s, prompts=s.prompts - {out[1]})
            return self._observe(s, P.DeclaredDead(key(out[1])))
        if op == "submit":
            s = _with(s, posts=s.posts | {out[1]})
            return self._observe(s, P.Submitted(key(out[1]), dict(out[2])))
        if op == "wait":
            return _with(s, timer=True)
        if op == "resume":
            s = _with(s, resume=out[1], conn=None)
            return self._observe(s, P.Resumed(STREAM, str(out[1])))
        if op == "end":
            s = _with(s, ended=True, conn=None, timer=False, resume=None)
            return self._observe(s, P.Ended(STREAM, out[1]))
        return s


def transition_label(machine: str, source: str, trigger: str, dest: str) -> str:
    """The coverage label of one declared transition."""
    return f"{machine}: {source} -{trigger}-> {dest}"


def _newest(s: WorldState[Any]) -> int:
    newest = P.newest_event(s.monitor, STREAM)
    return int(newest) if newest is not None else -1


def _holds(name: str) -> Any:
    return lambda s: name not in s.monitor.violated


def _set(t: tuple[str, ...], i: int, v: str) -> tuple[str, ...]:
    return (*t[:i], v, *t[i + 1 :])


def _with(s: WorldState[C], **kw: Any) -> WorldState[C]:
    return s._replace(**kw)
