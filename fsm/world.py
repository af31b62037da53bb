"""A closed world for the model checker: one MCP tool call, its server, network and user.

A model in ``models/`` is ``World(policy, Bounds(...))``: a client policy (the library's
guard, the seed incident's naive client, the measured mcp 2.3.0 client) against an
environment that is free, within bounds, to

* send up to ``requests`` interactive server requests (``elicitation/create``) on the
  tool call's SSE stream, each kept in the server's replay buffer, with any id of
  ``0..requests-1`` not used yet (the server chooses its ids; the client must not care
  which);
* fire each request's server-side deadline, silently or with a ``notifications/cancelled``
  (the v2 courtesy cancel, stored in the buffer too);
* answer an answer POST for a request it no longer has with ``202`` (what the official
  servers do), ``404``, a JSON-RPC error, or a ``500`` wrapping a JSON-RPC error;
* cut the connection cleanly or abruptly (``cuts`` times, or any number of times when
  ``cuts`` is ``None``), fail answer POSTs at the
  transport (``post_faults`` times), reap the session (if ``reaper``);
* let the user answer each presented prompt at any time, or never (``user``);
* replay after the ``Last-Event-ID`` (the specification), from it inclusively (the
  seed incident's server, which re-sent the event the client named), or from the start
  of its buffer whatever the client asked (``"start"``: a server that replays everything);
* send its buffer again from the start on a connection that is not broken (``rewinds``
  times: a broken server, since event ids are unique within a session; the repeats come
  on a live connection, not as the replay of a resume);
* cut the session's standalone GET stream before it carried any event id (``get_cuts``
  times; the client then opens a fresh GET, a new connection generation, see below);
* once the session is gone and the client has ended its interaction, let the client begin
  a new session (up to ``sessions`` in all; not with a standalone GET) with a new tool call
  whose server numbers its requests from the start again: the same ids, in another
  session (keys ``(s2, r)``, stream ``post2``).

The standalone GET stream (only when ``get_cuts > 0``) opens after the session starts
and carries nothing: every cut comes before its first event id, so a client has nothing
to resume from. A client that ends a generation (the guard gives up on it: "no-cursor")
is then free to open a fresh GET, generation ``n + 1``, at any later point; the world
tells the client which generation each connection is, and the client names its
interaction (:func:`fsm.events.standalone_stream`: ``get``, ``get/2``, ...), so P5 sees
each generation end at most once. Requests on the GET stream, cuts after an event id
and resumes of it are not modelled; after the session is reaped no GET opens or breaks
(the client learns of the expiry elsewhere and ends the open generation then).

The server completes the tool call once every request it sent is answered or dead
(``completes_on_deadline``; otherwise a dead request hangs the tool, the seed incident's
server). The client's clock passes every recorded deadline at most once (``clock``).

Request ids are interchangeable: renaming them throughout a state (the environment, the
policy's state, the monitor's) gives a state that behaves alike up to the renaming. A
world whose policy can rename its own state (``rename``, see :class:`ClientPolicy`)
declares that symmetry (:meth:`World.symmetry`): the checker explores one state per
orbit, the representative whose ids are numbered in the order the server sent them,
and the full space is ``requests!/(requests-k)!`` times larger for states with ``k``
requests sent. ``tests/models`` check on the full space of every shipped model up to 3
requests that this is a symmetry (:func:`fsm.checker.verify_symmetry`).

Every step feeds the policy an :data:`Input` and gets :data:`Output` operations back; the
world turns operations into pending work (a timer, a resume GET, an answer POST) that the
environment completes later, and into :mod:`fsm.properties` observations, so P1-P7 are
checked by the one shared monitor. Termination (L1) is the checker's cycle detection.

A state is a pair: the environment (:class:`Env`) and the client side (:class:`Agent`:
the policy's state with the monitor's). Far fewer distinct environments and agents exist
than states (the largest shipped model: 75,384 states, 21,513 environments, 12,564 agents),
so the world interns both and memoises on them what a step computes: the enabled moves and
each move's effect on an environment, the client side's reaction to each input. A step of a
warm world is three dictionary lookups; the rest of the time goes to the policy's own
decisions, each computed once.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, fields, replace
from typing import Any, Generic, Literal, NamedTuple, Protocol, TypeVar, get_args

from fsm import properties as P
from fsm.checker import BaseModel, Property, Symmetry
from fsm.errors import RequestKey
from fsm.events import standalone_stream

C = TypeVar("C")

# Inputs to a client policy: ("event", index, kind, request) | ("cut", clean) | ("timer",)
# | ("resumed",) | ("resume_404",) | ("answer", request) | ("outcome", request, outcome)
# | ("tick",) | ("get_open", generation) | ("get_cut", generation) | ("session", number).
# Outputs: ("present", r)
# | ("withdraw", r) | ("submit", r) | ("wait",) | ("resume", cursor) | ("end", outcome)
# | ("get_end", generation, outcome), where a submit carries the answer it sends as a
# tuple of items: ("submit", r, (("action", "accept"),)), and "end" ends the tool call's
# interaction, "get_end" the standalone GET generation the client names.
Input = tuple[Any, ...]
Output = tuple[Any, ...]

Outcome = Literal["202", "404", "404rpc", "rpc", "500rpc", "neterr"]
"""Answer POST outcomes: accepted, session gone, a 404 whose JSON-RPC body says "unknown
request id" (the seed incident's server), JSON-RPC "no such request" (400), the same
wrapped in a 500, and a transport error."""

TERMINAL_OUTCOMES = frozenset({"404", "404rpc", "rpc", "500rpc"})

Deadline = Literal["silent", "cancel"]
"""A server-side deadline fires silently, or with a ``notifications/cancelled``."""
UserMode = Literal["answers", "never"]
"""The user answers each presented prompt (at any time), or never."""
Replay = Literal["after", "inclusive", "start"]
"""A resumed stream replays after the ``Last-Event-ID`` (the specification), from it, or
from the start of the server's buffer (everything, on every resume)."""
GetState = Literal["closed", "open", "lost"]
"""The standalone GET's connection: none (the client may open a fresh one), open
(carrying nothing yet), or cut and not yet ended by the client."""


class ClientPolicy(Protocol[C]):
    """A client under test, as a pure function of its state and one input.

    Optional: ``rename(state, ids, session) -> state``, the state the policy would be in
    had every request id ``r`` of the mapping ``ids`` in session number ``session`` been
    ``ids[r]`` all along. A policy that has it declares its decisions independent of id
    values, and its worlds reduce by symmetry. A world with ``sessions > 1`` tells the
    policy that a new session began with the input ``("session", number)``."""

    name: str

    def init(self) -> C:
        """The client's state when the tool call's stream has just opened."""
        ...

    def step(self, state: C, inp: Input) -> tuple[C, tuple[Output, ...]]:
        """React to ``inp``; return the new state and the operations to perform."""
        ...


class BoundsError(ValueError):
    """A :class:`Bounds` field set to a value it does not allow; the message names the
    field and the values it allows."""


_CHOICES: dict[str, tuple[str, ...]] = {
    "deadline": get_args(Deadline),
    "unknown_answer": get_args(Outcome),
    "user": get_args(UserMode),
    "replay": get_args(Replay),
}
_COUNTS = ("requests", "cuts", "post_faults", "sessions", "rewinds")
_UNBOUNDED = ("cuts",)  # None: any number; written "none" on the command line
_FLAGS = ("completes_on_deadline", "reaper", "clock")
_TRUE, _FALSE = ("true", "yes", "1"), ("false", "no", "0")


@dataclass(frozen=True, slots=True)
class Bounds:
    """The environment variant and its bounds (all parameters of a model).

    Checked on construction: the counts are integers >= 0 (``cuts`` may be None), the
    flags booleans, ``ttl`` a number > 0 and each variant one of its declared values;
    anything else raises :class:`BoundsError` naming the field and what it allows."""

    requests: int = 1
    cuts: int | None = 2
    """Connection cuts (and failed resume GETs) the network may inflict; ``None``: any
    number (the state space stays finite only for a client whose resumes are bounded)."""
    post_faults: int = 1
    deadline: Deadline = "silent"
    unknown_answer: Outcome = "202"
    completes_on_deadline: bool = True
    user: UserMode = "answers"
    reaper: bool = False
    clock: bool = True
    ttl: float = 0.5
    replay: Replay = "after"
    get_cuts: int = 0
    """Cuts of the standalone GET stream before any event id; 0: no standalone GET."""
    sessions: int = 1
    """Sessions the client may run, one after the other (a new one once the last is gone)."""
    rewinds: int = 0
    """Times the server may send its buffer again from the start on an open connection."""

    def __post_init__(self) -> None:
        for name, allowed in _CHOICES.items():
            value = getattr(self, name)
            if value not in allowed:
                raise BoundsError(f"Bounds.{name}: {value!r} is not one of {', '.join(allowed)}")
        for name in _COUNTS:
            value = getattr(self, name)
            if name in _UNBOUNDED and value is None:
                continue
            if type(value) is not int or value < 0:
                also = " or None (any number)" if name in _UNBOUNDED else ""
                raise BoundsError(f"Bounds.{name}: {value!r} is not an integer >= 0{also}")
        for name in _FLAGS:
            if type(getattr(self, name)) is not bool:
                raise BoundsError(f"Bounds.{name}: {getattr(self, name)!r} is not True or False")
        if type(self.ttl) not in (int, float) or not self.ttl > 0:
            raise BoundsError(f"Bounds.ttl: {self.ttl!r} is not a number > 0")
        if self.sessions > 1 and self.get_cuts > 0:
            raise BoundsError(
                "Bounds.sessions: several sessions need get_cuts=0 (no standalone GET)"
            )

    def updated(self, settings: Mapping[str, str]) -> Bounds:
        """A copy with fields set from text, as the command line gives them
        (``{"requests": "2", "replay": "inclusive", "reaper": "true"}``); BoundsError for
        an unknown field or a value the field does not allow."""
        known = [f.name for f in fields(self)]
        changes: dict[str, Any] = {}
        for name, text in settings.items():
            if name not in known:
                raise BoundsError(f"no bound {name!r}; the bounds are {', '.join(known)}")
            changes[name] = _parse(name, text.strip())
        return replace(self, **changes)


def _parse(name: str, text: str) -> Any:
    """The value of field ``name`` written as ``text`` (left as text when it is not a
    number or a flag: construction judges it)."""
    if name in _UNBOUNDED and text.lower() == "none":
        return None
    try:
        if name in _COUNTS:
            return int(text)
        if name == "ttl":
            return float(text)
    except ValueError:
        return text
    if name in _FLAGS:
        if text.lower() in _TRUE + _FALSE:
            return text.lower() in _TRUE
        raise BoundsError(f"Bounds.{name}: {text!r} is not true or false")
    return text


class Renaming(NamedTuple):
    """How an environment maps to its orbit's representative: the id mapping (old id ->
    new id, None when it is the identity) and the renamed environment."""

    ids: tuple[int, ...] | None
    env: Env


class Agent:
    """The client side of a world state: the client policy's state and the monitor's.

    Compared by value, hashed once at creation. A :class:`World` interns its agents (one
    object per distinct pair) and keeps on each the memo of its reactions: the policy and
    the monitor are pure, so the reaction to an input at a clock value is computed once per
    distinct agent, however many world states share it. Equality by value keeps states from
    different worlds, or unpickled ones, correct; interning only makes it fast.
    """

    __slots__ = ("_hash", "client", "monitor", "reactions", "renamed")

    def __init__(self, client: Any, monitor: P.MonitorState) -> None:
        self.client = client
        self.monitor = monitor
        self._hash = hash((client, monitor))
        self.reactions: dict[tuple[float, int, Input], Reaction] = {}
        self.renamed: dict[tuple[int, tuple[int, ...]], Agent] = {}

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


ENV_FIELDS = (
    "log",
    "server",
    "conn",
    "cuts",
    "faults",
    "reaped",
    "t",
    "prompts",
    "user_done",
    "timer",
    "resume",
    "posts",
    "ended",
    "get",
    "get_gen",
    "get_cuts",
    "session",
    "rewinds",
)
"""The environment's fields, in the order of :attr:`Env.values`."""

# Field positions: an environment step copies the values into a list, edits it, and
# builds the next environment once.
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
    GET,
    GET_GEN,
    GET_CUTS,
    SESSION,
    REWINDS,
) = range(len(ENV_FIELDS))


class Env:
    """The environment's part of a world state: server, network, user, and the client's
    pending work (timer, resume GET, answer POSTs).

    Compared by value, hashed once at creation. A :class:`World` interns its environments
    and keeps on each what it computed there: the enabled moves, each move's effect, and
    the effect of each batch of client operations. A world state is a pair (environment,
    agent) and most of a step is two dictionary lookups.
    """

    __slots__ = (
        "_after",
        "_canon",
        "_hash",
        "_moves",
        "_steps",
        "conn",
        "cuts",
        "ended",
        "faults",
        "get",
        "get_cuts",
        "get_gen",
        "log",
        "posts",
        "prompts",
        "reaped",
        "resume",
        "rewinds",
        "server",
        "session",
        "t",
        "timer",
        "user_done",
        "values",
    )

    log: tuple[tuple[str, int], ...]
    """The server's replay buffer: ("prime"|"req"|"cancel"|"resp", request) per event."""
    server: tuple[str, ...]
    """Per request id: "unsent" | "pending" | "answered" | "dead"."""
    conn: int | None
    """The next log index to deliver; None when disconnected."""
    cuts: int
    """Connection cuts (and failed resumes) left; with unlimited cuts, 1 once the network
    cut the stream at least once (0 before)."""
    faults: int
    """Answer POST transport failures left."""
    reaped: bool
    """The server has reaped the session."""
    t: float
    """The clock: 0.0, or 1.0 once it passed every recorded deadline."""
    prompts: frozenset[int]
    """Requests presented and not yet answered or withdrawn (user-visible)."""
    user_done: frozenset[int]
    """Requests the user answered at least once."""
    timer: bool
    """A backoff timer is running."""
    resume: int | None
    """The cursor (log index) of the resume GET in flight."""
    posts: frozenset[int]
    """Answer POSTs in flight."""
    ended: bool
    """The client ended the interaction."""
    get: GetState | None
    """The standalone GET's connection; ``None``: this world has no standalone GET."""
    get_gen: int
    """The generation of the newest standalone GET connection (0: none opened yet)."""
    get_cuts: int
    """Standalone GET cuts left."""
    session: int
    """Which session: 0 for the first, 1 for the one begun after it was gone, ..."""
    rewinds: int
    """Times the server may still send its buffer again on an open connection."""

    def __init__(self, values: tuple[Any, ...]) -> None:
        (
            self.log,
            self.server,
            self.conn,
            self.cuts,
            self.faults,
            self.reaped,
            self.t,
            self.prompts,
            self.user_done,
            self.timer,
            self.resume,
            self.posts,
            self.ended,
            self.get,
            self.get_gen,
            self.get_cuts,
            self.session,
            self.rewinds,
        ) = values
        self.values = values
        self._hash = hash(values)
        self._moves: tuple[Move, ...] | None = None
        self._steps: dict[Move, tuple[Env, Input | None]] = {}
        self._after: dict[tuple[Output, ...], Env] = {}
        self._canon: Renaming | None = None

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        return self is other or (
            isinstance(other, Env) and self._hash == other._hash and self.values == other.values
        )

    def __repr__(self) -> str:
        fields = ", ".join(f"{f}={v!r}" for f, v in zip(ENV_FIELDS, self.values, strict=True))
        return f"Env({fields})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (Env, (self.values,))


class WorldState(NamedTuple):
    """One global state: the environment and the client side."""

    env: Env
    agent: Agent

    @property
    def client(self) -> Any:
        """The client policy's state."""
        return self.agent.client

    @property
    def monitor(self) -> P.MonitorState:
        """The property monitor's state (what the client was told and did, judged)."""
        return self.agent.monitor


_new_state = tuple.__new__  # WorldState(env, agent) without the Python-level __new__


class Move(NamedTuple):
    """An environment step; ``str(move)`` names it in counterexamples."""

    name: str
    arg: Any = None

    def __str__(self) -> str:
        return self.name if self.arg is None else f"{self.name} {self.arg}"


KEY_SESSION = "s"
USER_ANSWER: tuple[tuple[str, Any], ...] = (("action", "accept"),)
"""What the user answers (outputs carry answers as sorted item tuples, hashable)."""
STREAM = "post"


OPENING: tuple[P.Observation, ...] = (P.Began(STREAM),)
"""What every world's monitor observes before the first step: the tool call began. With
:meth:`World.observations` of each edge, a path's whole event log."""


def session_name(session: int) -> str:
    """The session id of session number ``session``: ``s``, then ``s2``, ``s3``..."""
    return KEY_SESSION if session == 0 else f"{KEY_SESSION}{session + 1}"


def session_number(name: str) -> int:
    """The inverse of :func:`session_name`."""
    return 0 if name == KEY_SESSION else int(name[len(KEY_SESSION) :]) - 1


def stream_name(session: int) -> str:
    """The tool call's stream in session number ``session``: ``post``, then ``post2``..."""
    return STREAM if session == 0 else f"{STREAM}{session + 1}"


def key(r: int, session: int = 0) -> tuple[str, int]:
    """The request key of server request number ``r`` in session number ``session``."""
    return (session_name(session), r)


class World(BaseModel[WorldState, Move], Generic[C]):
    """The closed system ``policy`` x environment within ``bounds``.

    A world memoises what it computes (on its interned :class:`Env` and :class:`Agent`
    objects), so checking it twice is cheaper the second time, and it is not thread-safe.
    The memos live on the states' parts: give a world only states it made (or unpickled
    copies, which start with empty memos), never another world's.
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
        self._envs: dict[tuple[Any, ...], Env] = {}
        self._monitor_steps: dict[Hashable, P.MonitorState] = {}
        self._fired: tuple[str, ...] = ()
        self._policy_fired: Any = getattr(policy, "fired", None)
        self._rename: Any = getattr(policy, "rename", None)
        self._step: dict[str, Any] = {
            "server sends elicitation": self._send,
            "deadline fires": self._deadline,
            "deliver": self._deliver,
            "cut clean": self._cut_clean,
            "cut abrupt": self._cut_abrupt,
            "server repeats its buffer": self._rewind,
            "backoff elapses": self._backoff,
            "resume answered": self._resume_answered,
            "resume fails": self._resume_fails,
            "answer POST": self._post,
            "answer POST fails": self._post_fails,
            "user answers": self._user_answers,
            "clock passes deadlines": self._clock,
            "server reaps session": self._reap,
            "fresh GET opens": self._get_open,
            "cut standalone GET": self._get_cut,
            "new session": self._new_session,
        }

    @property
    def name(self) -> str:
        return self._name

    def with_bounds(self, settings: Mapping[str, str]) -> World[C]:
        """This world with some bounds set from text (:meth:`Bounds.updated`; the command
        line's ``--set``): the same policy and properties, the settings in its name."""
        said = ",".join(f"{k}={v}" for k, v in settings.items())
        return World(
            self.policy,
            self.bounds.updated(settings),
            properties=self._props,
            name=f"{self._name} [{said}]",
            expect=self.expected_violations,
        )

    # ----------------------------------------------------------------- Model API

    def init_states(self) -> Sequence[WorldState]:
        monitor = P.MonitorState()
        for obs in OPENING:
            monitor = P.step(monitor, obs, self.budgets)[0]
        b, empty = self.bounds, frozenset[int]()
        start: dict[str, Any] = {
            "log": (("prime", -1),),
            "server": ("unsent",) * b.requests,
            "conn": 0,
            "cuts": 0 if b.cuts is None else b.cuts,
            "faults": b.post_faults,
            "reaped": False,
            "t": 0.0,
            "prompts": empty,
            "user_done": empty,
            "timer": False,
            "resume": None,
            "posts": empty,
            "ended": False,
            "get": "closed" if b.get_cuts > 0 else None,
            "get_gen": 0,
            "get_cuts": b.get_cuts,
            "session": 0,
            "rewinds": b.rewinds,
        }
        env = self._env([start[f] for f in ENV_FIELDS])
        return [WorldState(env, self._intern(self.policy.init(), monitor))]

    def actions(self, s: WorldState) -> Iterable[Move]:
        env = s.env
        moves = env._moves
        if moves is None:
            moves = env._moves = self._enabled(env)
        return moves

    def next_state(self, s: WorldState, m: Move) -> WorldState | None:
        env, agent = s
        step = env._steps.get(m)
        if step is None:
            edit = self._step.get(m.name)
            if edit is None:
                return None
            w = list(env.values)
            inp = edit(w, m.arg)
            step = env._steps[m] = (self._env(w), inp)
        mid, inp = step
        if inp is None:
            self._fired = ()
            return _new_state(WorldState, (mid, agent))
        memo = (mid.t, mid.session, inp)
        reaction = agent.reactions.get(memo)
        if reaction is None:
            reaction = agent.reactions[memo] = self._react(agent, mid.t, mid.session, inp)
        self._fired = reaction.fired
        outputs = reaction.outputs
        if outputs:
            after = mid._after.get(outputs)
            if after is None:
                after = mid._after[outputs] = self._perform(mid, outputs)
            mid = after
        return _new_state(WorldState, (mid, reaction.agent))

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
                            s.env.ended
                            and not s.env.reaped
                            and any(x == "answered" for x in s.env.server)
                        ),
                        "the interaction can complete with an answer",
                    )
                ]
            ),
            Property.sometimes(
                "cut-and-resumed",
                lambda s: self._was_cut(s.env) and s.env.conn is not None,
                "a cut stream is resumed",
            ),
        ]
        if self.bounds.get_cuts > 0:
            props.append(
                Property.sometimes(
                    "get-reopened",
                    lambda s: s.env.get_cuts == 0 and s.env.get == "open",
                    "the standalone GET is cut before any event id every time it may be, "
                    "and opened fresh after each",
                )
            )
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
        return s.env.ended

    def format_state(self, s: WorldState) -> str:
        e = s.env
        log = " ".join(f"{k}{'' if r < 0 else r}" for k, r in e.log)
        get = "" if e.get is None else f" get={e.get}:{e.get_gen}"
        sent = {r: x for r, x in enumerate(e.server) if x != "unsent"}
        reqs = list(sent.values()) if list(sent) == list(range(len(sent))) else sent
        return (
            f"server=[{log}] reqs={reqs} conn={e.conn} prompts={sorted(e.prompts)}"
            f" posts={sorted(e.posts)} t={e.t} ended={e.ended}{get}"
        )

    def symmetry(self) -> Symmetry[WorldState] | None:
        """Request ids are interchangeable when the policy can rename its state (see the
        module docstring); None for a policy without ``rename`` or a single request."""
        if self.bounds.requests < 2 or self._rename is None:
            return None
        return Symmetry(self.representative, self.orbit_size)

    def representative(self, s: WorldState) -> WorldState:
        """``s`` with its request ids renumbered in the order the server sent them (unsent
        ids after, in order): the same for every state of an orbit."""
        env, agent = s
        canon = env._canon
        if canon is None:
            canon = env._canon = self._renaming(env)
        ids = canon.ids
        if ids is None:
            return s
        memo = (env.session, ids)
        renamed = agent.renamed.get(memo)
        if renamed is None:
            renamed = agent.renamed[memo] = self._rename_agent(agent, ids, env.session)
        return _new_state(WorldState, (canon.env, renamed))

    def orbit_size(self, s: WorldState) -> int:
        """How many states ``s`` stands for: ``n!/(n-k)!`` with ``k`` of ``n`` ids sent
        (the sent requests are told apart by their place in the log; unsent ids are not)."""
        n = self.bounds.requests
        sent = sum(1 for x in s.env.server if x != "unsent")
        return math.perm(n, sent)

    def _renaming(self, env: Env) -> Renaming:
        order = list(dict.fromkeys(r for kind, r in env.log if kind == "req"))
        order += [r for r, x in enumerate(env.server) if x == "unsent"]
        ids = [0] * len(order)
        for new, old in enumerate(order):
            ids[old] = new
        if ids == list(range(len(ids))):
            return Renaming(None, env)
        m = ids
        w = list(env.values)
        w[LOG] = tuple((kind, r if r < 0 else m[r]) for kind, r in env.log)
        server = [""] * len(env.server)
        for old, status in enumerate(env.server):
            server[m[old]] = status
        w[SERVER] = tuple(server)
        for field in (PROMPTS, USER_DONE, POSTS):
            w[field] = frozenset(m[r] for r in w[field])
        renamed = self._env(w)
        renamed._canon = Renaming(None, renamed)
        return Renaming(tuple(ids), renamed)

    def _rename_agent(self, agent: Agent, ids: tuple[int, ...], session: int) -> Agent:
        """``agent`` with the current session's request ids renamed (``ids[old]`` is the
        new id); requests of earlier sessions keep theirs. Only ids delivered to the client
        can be in its state (the monitor records each delivery), so only those are renamed:
        a send of another free id leaves the client side as it is."""
        assert self._rename is not None
        delivered = agent.monitor.stream_of
        keys: dict[RequestKey, RequestKey] = {
            key(old, session): key(new, session)
            for old, new in enumerate(ids)
            if old != new and key(old, session) in delivered
        }
        if not keys:
            return agent
        known = {old: new for old, new in enumerate(ids) if key(old, session) in keys}
        client = self._rename(agent.client, known, session)
        return self._intern(client, P.rename_keys(agent.monitor, keys))

    # ------------------------------------------------------------ the environment

    def _env(self, values: list[Any]) -> Env:
        key = tuple(values)
        env = self._envs.get(key)
        if env is None:
            env = self._envs[key] = Env(key)
        return env

    def _enabled(self, e: Env) -> tuple[Move, ...]:
        """The moves enabled in ``e``, in a fixed order (computed once per environment)."""
        b = self.bounds
        if e.reaped and e.ended:
            idle = not e.posts and e.resume is None and not e.timer
            return (Move("new session"),) if idle and e.session + 1 < b.sessions else ()
        moves: list[Move] = []
        if not e.reaped:
            sends = [r for r, st in enumerate(e.server) if st == "unsent"]
            moves += [Move("server sends elicitation", r) for r in sends]
            moves += [Move("deadline fires", r) for r, st in enumerate(e.server) if st == "pending"]
        if e.conn is not None:
            if e.conn < len(e.log):
                moves.append(Move("deliver", e.conn))
            if self._may_cut(e):
                moves += [Move("cut clean"), Move("cut abrupt")]
            if e.rewinds > 0 and e.conn > 0:
                moves.append(Move("server repeats its buffer"))
        if e.timer:
            moves.append(Move("backoff elapses"))
        if e.resume is not None:
            moves.append(Move("resume answered"))
            if self._may_cut(e) and not e.reaped:
                moves.append(Move("resume fails"))
        for r in sorted(e.posts):
            moves.append(Move("answer POST", r))
            if e.faults > 0 and not e.reaped:
                moves.append(Move("answer POST fails", r))
        if b.user == "answers":
            moves += [Move("user answers", r) for r in sorted(e.prompts)]
        if b.clock and e.t == 0.0:
            moves.append(Move("clock passes deadlines"))
        if b.reaper and not e.reaped:
            moves.append(Move("server reaps session"))
        if e.get is not None and not e.reaped:
            if e.get == "closed":
                moves.append(Move("fresh GET opens", e.get_gen + 1))
            elif e.get == "open" and e.get_cuts > 0:
                moves.append(Move("cut standalone GET", e.get_gen))
        return tuple(moves)

    # Each move edits ``w``, a list of the environment's values (positions above), and
    # returns the input it tells the client, if any.

    def _send(self, w: list[Any], r: int) -> Input | None:
        w[SERVER] = _set(w[SERVER], r, "pending")
        w[LOG] = (*w[LOG], ("req", r))
        return None

    def _deadline(self, w: list[Any], r: int) -> Input | None:
        w[SERVER] = _set(w[SERVER], r, "dead")
        if self.bounds.deadline == "cancel":
            w[LOG] = (*w[LOG], ("cancel", r))
        self._maybe_complete(w)
        return None

    def _deliver(self, w: list[Any], index: int) -> Input:
        kind, r = w[LOG][index]
        w[CONN] = index + 1
        return ("event", index, kind, r)

    def _rewind(self, w: list[Any], _: None) -> Input | None:
        w[CONN] = 0
        w[REWINDS] -= 1
        return None

    def _cut_clean(self, w: list[Any], _: None) -> Input:
        return self._cut(w, clean=True)

    def _cut_abrupt(self, w: list[Any], _: None) -> Input:
        return self._cut(w, clean=False)

    def _cut(self, w: list[Any], *, clean: bool) -> Input:
        w[CONN] = None
        self._spend_cut(w)
        return ("cut", clean)

    def _may_cut(self, e: Env) -> bool:
        return self.bounds.cuts is None or e.cuts > 0

    def _spend_cut(self, w: list[Any]) -> None:
        w[CUTS] = 1 if self.bounds.cuts is None else w[CUTS] - 1

    def _was_cut(self, e: Env) -> bool:
        return e.cuts == 1 if self.bounds.cuts is None else e.cuts < self.bounds.cuts

    def _backoff(self, w: list[Any], _: None) -> Input:
        w[TIMER] = False
        return ("timer",)

    def _resume_answered(self, w: list[Any], _: None) -> Input:
        if w[REAPED]:
            w[RESUME] = None
            return ("resume_404",)
        replay = self.bounds.replay
        w[CONN] = 0 if replay == "start" else (w[RESUME] or 0) + (replay == "after")
        w[RESUME] = None
        return ("resumed",)

    def _resume_fails(self, w: list[Any], _: None) -> Input:
        w[RESUME] = None
        self._spend_cut(w)
        return ("cut", False)

    def _post(self, w: list[Any], r: int) -> Input:
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
        return ("outcome", r, outcome)

    def _post_fails(self, w: list[Any], r: int) -> Input:
        w[POSTS] = w[POSTS] - {r}
        w[FAULTS] -= 1
        return ("outcome", r, "neterr")

    def _user_answers(self, w: list[Any], r: int) -> Input:
        w[PROMPTS] = w[PROMPTS] - {r}
        w[USER_DONE] = w[USER_DONE] | {r}
        return ("answer", r)

    def _clock(self, w: list[Any], _: None) -> Input:
        w[T] = 1.0
        return ("tick",)

    def _reap(self, w: list[Any], _: None) -> Input | None:  # the server ends the stream too
        was_open = w[CONN] is not None
        w[REAPED] = True
        w[CONN] = None
        return ("cut", True) if was_open else None

    def _get_open(self, w: list[Any], generation: int) -> Input:
        w[GET], w[GET_GEN] = "open", generation
        return ("get_open", generation)

    def _get_cut(self, w: list[Any], generation: int) -> Input:
        w[GET] = "lost"
        w[GET_CUTS] -= 1
        return ("get_cut", generation)

    def _new_session(self, w: list[Any], _: None) -> Input:
        """The client begins the next session and its tool call: a fresh server (request
        ids from the start again), the budgets of cuts and faults and the clock go on."""
        fresh = self.init_states()[0].env.values
        keep = (CUTS, FAULTS, T, SESSION, REWINDS)
        w[:] = [w[i] if i in keep else fresh[i] for i in range(len(w))]
        w[SESSION] += 1
        return ("session", w[SESSION])

    def _maybe_complete(self, w: list[Any]) -> None:
        server = w[SERVER]
        done = all(
            x == "answered" or (x == "dead" and self.bounds.completes_on_deadline) for x in server
        )
        if done and ("resp", -1) not in w[LOG]:
            w[LOG] = (*w[LOG], ("resp", -1))

    def _perform(self, e: Env, outputs: tuple[Output, ...]) -> Env:
        """The environment after the client's operations: prompts shown or withdrawn,
        answers POSTed, a backoff timer, a resume GET, the end of the interaction, the
        end of the standalone GET's connection (whatever generation the client named)."""
        w = list(e.values)
        for out in outputs:
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
            elif op == "get_end":
                w[GET] = "closed"
        return self._env(w)

    # ------------------------------------------------------------ the client side

    def _react(self, agent: Agent, t: float, session: int, inp: Input) -> Reaction:
        """The client side's reaction to ``inp`` at time ``t`` in session number
        ``session`` (pure; memoised per agent): the monitor observes what the client is
        told, the policy steps, the monitor observes what the client does."""
        monitor = agent.monitor
        seen = _told(monitor, t, session, inp)
        client, outputs = self.policy.step(agent.client, inp)
        fired = tuple(self._policy_fired()) if self._policy_fired is not None else ()
        for obs in (*seen, *_did(t, session, outputs)):
            monitor = self._observe(monitor, obs)
        return Reaction(self._intern(client, monitor), outputs, fired)

    def observations(self, s: WorldState, m: Move) -> tuple[P.Observation, ...]:
        """The observations of the edge ``s --m-->`` in the monitor's order: what the
        client is told, then what it does (``()`` for an edge that tells it nothing).

        After :data:`OPENING`, written with :func:`fsm.trace.dumps`, a path's observations
        are an event log that ``python -m fsm audit`` judges as the checker's monitor did. Raises
        ``ValueError`` for a move without successor in ``s``.
        """
        if self.next_state(s, m) is None:
            raise ValueError(f"{m} has no successor in {self.format_state(s)}")
        mid, inp = s.env._steps[m]
        if inp is None:
            return ()
        _, outputs = self.policy.step(s.agent.client, inp)
        told = _told(s.agent.monitor, mid.t, mid.session, inp)
        return (*told, *_did(mid.t, mid.session, outputs))

    def _observe(self, monitor: P.MonitorState, obs: P.Observation) -> P.MonitorState:
        """One monitor step, memoised: far fewer monitor states than agents exist. The
        observations that carry an answer dict are keyed by its items (world answers are
        flat item tuples, hashable by the policy contract)."""
        memo_key: Hashable = (
            (monitor, type(obs), obs.key, tuple(sorted(obs.answer.items())))
            if isinstance(obs, P.Answered | P.Submitted)
            else (monitor, obs)
        )
        after = self._monitor_steps.get(memo_key)
        if after is None:
            after = self._monitor_steps[memo_key] = P.step(monitor, obs, self.budgets)[0]
        return after

    def _intern(self, client: Any, monitor: P.MonitorState) -> Agent:
        agent = self._agents.get((client, monitor))
        if agent is None:
            agent = self._agents[(client, monitor)] = Agent(client, monitor)
        return agent


def _told(monitor: P.MonitorState, t: float, session: int, inp: Input) -> list[P.Observation]:
    """What input ``inp`` at time ``t`` in session number ``session`` tells the client, as
    observations (``monitor``: what it was told before, to judge whether a delivery is a
    replay)."""
    kind, stream = inp[0], stream_name(session)
    if kind == "event":
        _, index, what, r = inp
        seen: list[P.Observation] = [P.EventSeen(stream, str(index))]
        if what == "req":
            newest = P.newest_event(monitor, stream)
            replayed = newest is not None and index < int(newest)
            seen.append(P.Delivered(key(r, session), stream, t, replayed=replayed))
        elif what == "cancel":
            seen.append(P.Cancelled(key(r, session)))
        return seen
    if kind == "outcome" and inp[2] in TERMINAL_OUTCOMES:
        return [P.Rejected(key(inp[1], session), session=inp[2] == "404")]
    if kind == "resume_404":
        return [P.SessionGone()]
    if kind == "answer":
        return [P.Answered(key(inp[1], session), dict(USER_ANSWER))]
    if kind == "session":
        return [P.SessionBegan(session_name(session)), P.Began(stream)]
    return []


def _did(t: float, session: int, outputs: Iterable[Output]) -> list[P.Observation]:
    """What the client's ``outputs`` at time ``t`` in session number ``session`` show it
    doing, as observations."""
    seen: list[P.Observation] = []
    stream = stream_name(session)
    for out in outputs:
        op = out[0]
        if op == "present":
            seen.append(P.Presented(key(out[1], session), t))
        elif op == "withdraw":
            seen.append(P.DeclaredDead(key(out[1], session)))
        elif op == "submit":
            seen.append(P.Submitted(key(out[1], session), dict(out[2])))
        elif op == "resume":
            seen.append(P.Resumed(stream, str(out[1])))
        elif op == "end":
            seen.append(P.Ended(stream, out[1]))
        elif op == "get_end":
            seen.append(P.Ended(standalone_stream(out[1]), out[2]))
    return seen


def transition_label(machine: str, source: str, trigger: str, dest: str) -> str:
    """The coverage label of one declared transition."""
    return f"{machine}: {source} -{trigger}-> {dest}"


def _holds(name: str) -> Any:
    return lambda s: name not in s.agent.monitor.violated


def _set(t: tuple[str, ...], i: int, v: str) -> tuple[str, ...]:
    return (*t[:i], v, *t[i + 1 :])
