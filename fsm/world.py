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


class Agent:
    """The client's state and the monitor's state together: what a :class:`WorldState`
    holds of the client side. Compared by value; hashed once, at creation.

    A :class:`World` interns its agents (one object per distinct pair) and keeps, on each,
    the memo of its transitions: the client policy and the monitor are pure, so the
    reaction to an input at a clock value is computed once per distinct agent, however
    many world states share it. Equality by value keeps states from different worlds (or
    unpickled ones) correct; interning only makes it fast.
    """

    __slots__ = ("_hash", "client", "monitor", "reactions")

    def __init__(self, client: Any, monitor: P.MonitorState) -> None:
        self.client = client
        self.monitor = monitor
        self._hash = hash((client, monitor))
        self.reactions: dict[tuple[float, Input], Reaction] = {}

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        return self is other or (
            isinstance(other, Agent)
            and self._hash == other._hash
            and self.client == other.client
            and self.monitor == other.monitor
        )

    def __repr__(self) -> str:
        return f"Agent(client={self.client!r}, monitor={self.monitor!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (Agent, (self.client, self.monitor))


class Reaction(NamedTuple):
    """The client side's reaction to one input: its next agent, the operations the world
    performs, and the declared transition labels the policy fired."""

    agent: Agent
    outputs: tuple[Output, ...]
    fired: tuple[str, ...]


class WorldState(NamedTuple):
    """One global state: server, network, user, pending client work, and the client side
    (:class:`Agent`: the client policy's state and the monitor's)."""

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
    agent: Agent

    @property
    def client(self) -> Any:
        """The client policy's state."""
        return self.agent.client

    @property
    def monitor(self) -> P.MonitorState:
        """The property monitor's state (what the client was told and did, judged)."""
        return self.agent.monitor


# Field positions: a step copies the state into a list, edits it, and builds the successor
# once (a NamedTuple ``_replace`` per edited field would dominate the checker's time).
(
    LOG,
    SERVER,
    CONN,
    CUTS,
    FAULTS,
    REAPED,
    T,
    PROMPTS,
    USER_DONE,
    TIMER,
    RESUME,
    POSTS,
    ENDED,
    AGENT,
) = range(len(WorldState._fields))
_make = WorldState._make


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


class World(BaseModel[WorldState, Move], Generic[C]):
    """The closed system ``policy`` x environment within ``bounds``.

    Not thread-safe: the memo of agent reactions is shared by every state of the world.
    """

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
        self.budgets = P.Budgets(ttl=bounds.ttl, counters=False)
        self._agents: dict[tuple[Any, P.MonitorState], Agent] = {}
        self._fired: tuple[str, ...] = ()
        self._policy_fired: Any = getattr(policy, "fired", None)
        requests = range(bounds.requests)
        self._moves = {
            name: [Move(name, r) for r in requests]
            for name in (
                "server sends elicitation",
                "deadline fires",
                "answer POST",
                "answer POST fails",
                "user answers",
            )
        }
        self._deliver: list[Move] = []
        self._step: dict[str, Any] = {
            "server sends elicitation": self._send,
            "deadline fires": self._deadline,
            "deliver": self._deliver_event,
            "cut clean": self._cut,
            "cut abrupt": self._cut,
            "backoff elapses": self._backoff,
            "resume answered": self._resume_answered,
            "resume fails": self._resume_fails,
            "answer POST": self._post,
            "answer POST fails": self._post_fails,
            "user answers": self._user_answers,
            "clock passes deadlines": self._clock,
            "server reaps session": self._reap,
        }

    @property
    def name(self) -> str:
        return self._name

    # ----------------------------------------------------------------- Model API

    def init_states(self) -> Sequence[WorldState]:
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
                agent=self._intern(self.policy.init(), monitor),
            )
        ]

    def actions(self, s: WorldState) -> Iterable[Move]:
        b = self.bounds
        reaped = s.reaped
        if reaped and s.ended:
            return []
        moves: list[Move] = []
        server = s.server
        if not reaped:
            if len(server) < b.requests:
                moves.append(self._moves["server sends elicitation"][len(server)])
            deadline = self._moves["deadline fires"]
            moves += [deadline[r] for r, st in enumerate(server) if st == "pending"]
        conn = s.conn
        if conn is not None:
            if conn < len(s.log):
                moves.append(self._deliver_move(conn))
            if s.cuts > 0:
                moves += _CUTS
        if s.timer:
            moves.append(_BACKOFF)
        if s.resume is not None:
            moves.append(_RESUME_ANSWERED)
            if s.cuts > 0 and not reaped:
                moves.append(_RESUME_FAILS)
        if s.posts:
            post, fails = self._moves["answer POST"], self._moves["answer POST fails"]
            can_fail = s.faults > 0 and not reaped
            for r in sorted(s.posts):
                moves.append(post[r])
                if can_fail:
                    moves.append(fails[r])
        if s.prompts and b.user == "answers":
            answers = self._moves["user answers"]
            moves += [answers[r] for r in sorted(s.prompts)]
        if b.clock and s.t == 0.0:
            moves.append(_CLOCK)
        if b.reaper and not reaped:
            moves.append(_REAP)
        return moves

    def next_state(self, s: WorldState, m: Move) -> WorldState | None:
        step = self._step.get(m.name)
        if step is None:
            return None
        w = list(s)
        step(w, m)
        return _make(w)

    def properties(self) -> Sequence[Property[WorldState]]:
        props: list[Property[WorldState]] = [
            Property.always(p, _holds(p), P.PROPERTIES[p]) for p in self._props if p != "L1"
        ]
        if "P5" in self._props:
            props.append(
                Property.deadlock(
                    "P5-quiescent",
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
                lambda s: bool(s.agent.monitor.presented),
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

    def fired_transitions(self, s: WorldState, m: Move, t: WorldState) -> Iterable[str]:
        """The labels the policy fired on the last :meth:`next_state` (the checker asks
        right after computing each edge)."""
        return self._fired

    def is_terminal(self, s: WorldState) -> bool:
        """An ended interaction may rest; any other quiescent state is P5-quiescent's
        counterexample (the checker's deadlock check, at no extra cost per state)."""
        return s.ended

    def format_state(self, s: WorldState) -> str:
        log = " ".join(f"{k}{'' if r < 0 else r}" for k, r in s.log)
        return (
            f"server=[{log}] reqs={list(s.server)} conn={s.conn} prompts={sorted(s.prompts)}"
            f" posts={sorted(s.posts)} t={s.t} ended={s.ended}"
        )

    # ------------------------------------------------------------ environment steps
    # Each edits ``w``, a list copy of the state (see the field positions above).

    def _deliver_move(self, index: int) -> Move:
        deliver = self._deliver
        while len(deliver) <= index:
            deliver.append(Move("deliver", len(deliver)))
        return deliver[index]

    def _send(self, w: list[Any], m: Move) -> None:
        w[SERVER] = (*w[SERVER], "pending")
        w[LOG] = (*w[LOG], ("req", m.arg))

    def _deadline(self, w: list[Any], m: Move) -> None:
        w[SERVER] = _set(w[SERVER], m.arg, "dead")
        if self.bounds.deadline == "cancel":
            w[LOG] = (*w[LOG], ("cancel", m.arg))
        self._maybe_complete(w)

    def _deliver_event(self, w: list[Any], m: Move) -> None:
        kind, r = w[LOG][m.arg]
        w[CONN] = m.arg + 1
        self._feed(w, ("event", m.arg, kind, r))

    def _cut(self, w: list[Any], m: Move) -> None:
        w[CONN] = None
        w[CUTS] -= 1
        self._feed(w, _CUT_INPUT[m is _CUTS[0]])

    def _backoff(self, w: list[Any], m: Move) -> None:
        w[TIMER] = False
        self._feed(w, ("timer",))

    def _resume_answered(self, w: list[Any], m: Move) -> None:
        if w[REAPED]:
            w[RESUME] = None
            self._feed(w, ("resume_404",))
            return
        w[CONN] = (w[RESUME] or 0) + (1 if self.bounds.replay == "after" else 0)
        w[RESUME] = None
        self._feed(w, ("resumed",))

    def _resume_fails(self, w: list[Any], m: Move) -> None:
        w[RESUME] = None
        w[CUTS] -= 1
        self._feed(w, _CUT_INPUT[False])

    def _post(self, w: list[Any], m: Move) -> None:
        r = m.arg
        w[POSTS] = w[POSTS] - {r}
        if w[REAPED]:
            outcome: str = "404"
        elif w[SERVER][r] == "pending":
            w[SERVER] = _set(w[SERVER], r, "answered")
            outcome = "202"
            self._maybe_complete(w)
        elif w[SERVER][r] == "answered":
            outcome = "202"
        else:
            outcome = self.bounds.unknown_answer
        self._feed(w, ("outcome", r, outcome))

    def _post_fails(self, w: list[Any], m: Move) -> None:
        w[POSTS] = w[POSTS] - {m.arg}
        w[FAULTS] -= 1
        self._feed(w, ("outcome", m.arg, "neterr"))

    def _user_answers(self, w: list[Any], m: Move) -> None:
        w[PROMPTS] = w[PROMPTS] - {m.arg}
        w[USER_DONE] = w[USER_DONE] | {m.arg}
        self._feed(w, ("answer", m.arg))

    def _clock(self, w: list[Any], m: Move) -> None:
        w[T] = 1.0
        self._feed(w, ("tick",))

    def _reap(self, w: list[Any], m: Move) -> None:  # the server also ends the open stream
        was_open = w[CONN] is not None
        w[REAPED] = True
        w[CONN] = None
        if was_open:
            self._feed(w, _CUT_INPUT[True])

    def _maybe_complete(self, w: list[Any]) -> None:
        server = w[SERVER]
        done = len(server) == self.bounds.requests and all(
            x == "answered" or (x == "dead" and self.bounds.completes_on_deadline) for x in server
        )
        if done and ("resp", -1) not in w[LOG]:
            w[LOG] = (*w[LOG], ("resp", -1))

    # ------------------------------------------------------------ the client side

    def _feed(self, w: list[Any], inp: Input) -> None:
        """Tell the client ``inp``; perform the operations it answers with."""
        agent: Agent = w[AGENT]
        t = w[T]
        reaction = agent.reactions.get((t, inp))
        if reaction is None:
            reaction = agent.reactions[(t, inp)] = self._react(agent, t, inp)
        w[AGENT] = reaction.agent
        self._fired = reaction.fired
        for out in reaction.outputs:
            op = out[0]
            if op == "present":
                w[PROMPTS] = w[PROMPTS] | {out[1]}
            elif op == "withdraw":
                w[PROMPTS] = w[PROMPTS] - {out[1]}
            elif op == "submit":
                w[POSTS] = w[POSTS] | {out[1]}
            elif op == "wait":
                w[TIMER] = True
            elif op == "resume":
                w[RESUME], w[CONN] = out[1], None
            elif op == "end":
                w[ENDED], w[CONN], w[TIMER], w[RESUME] = True, None, False, None

    def _react(self, agent: Agent, t: float, inp: Input) -> Reaction:
        """The client side's reaction to ``inp`` at time ``t`` (pure; memoised by _feed):
        the monitor observes what the client is told, the policy steps, the monitor
        observes what the client does."""
        monitor = agent.monitor
        seen: list[P.Observation] = []
        kind = inp[0]
        if kind == "event":
            _, index, what, r = inp
            seen.append(P.EventSeen(STREAM, str(index)))
            if what == "req":
                newest = P.newest_event(monitor, STREAM)
                replayed = newest is not None and index < int(newest)
                seen.append(P.Delivered(key(r), STREAM, t, replayed=replayed))
            elif what == "cancel":
                seen.append(P.Cancelled(key(r)))
        elif kind == "outcome" and inp[2] in TERMINAL_OUTCOMES:
            seen.append(P.Rejected(key(inp[1]), session=inp[2] == "404"))
        elif kind == "resume_404":
            seen.append(P.SessionGone())
        elif kind == "answer":
            seen.append(P.Answered(key(inp[1]), dict(USER_ANSWER)))
        client, outputs = self.policy.step(agent.client, inp)
        fired = tuple(self._policy_fired()) if self._policy_fired is not None else ()
        for out in outputs:
            op = out[0]
            if op == "present":
                seen.append(P.Presented(key(out[1]), t))
            elif op == "withdraw":
                seen.append(P.DeclaredDead(key(out[1])))
            elif op == "submit":
                seen.append(P.Submitted(key(out[1]), dict(out[2])))
            elif op == "resume":
                seen.append(P.Resumed(STREAM, str(out[1])))
            elif op == "end":
                seen.append(P.Ended(STREAM, out[1]))
        for obs in seen:
            monitor = P.step(monitor, obs, self.budgets)[0]
        return Reaction(self._intern(client, monitor), outputs, fired)

    def _intern(self, client: Any, monitor: P.MonitorState) -> Agent:
        agent = self._agents.get((client, monitor))
        if agent is None:
            agent = self._agents[(client, monitor)] = Agent(client, monitor)
        return agent


_CUTS = (Move("cut clean"), Move("cut abrupt"))
_CUT_INPUT: dict[bool, Input] = {True: ("cut", True), False: ("cut", False)}
_BACKOFF = Move("backoff elapses")
_RESUME_ANSWERED = Move("resume answered")
_RESUME_FAILS = Move("resume fails")
_CLOCK = Move("clock passes deadlines")
_REAP = Move("server reaps session")


def transition_label(machine: str, source: str, trigger: str, dest: str) -> str:
    """The coverage label of one declared transition."""
    return f"{machine}: {source} -{trigger}-> {dest}"


def _holds(name: str) -> Any:
    return lambda s: name not in s.agent.monitor.violated


def _set(t: tuple[str, ...], i: int, v: str) -> tuple[str, ...]:
    return (*t[:i], v, *t[i + 1 :])
