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
* having received the answer to a request, lose it and ask the same question again under
  a new id (``reasks`` times: a server-side shim, such as the TypeScript legacy MRTR shim
  or the Go SDK's MRTR middleware, that turns one input request into an
  ``elicitation/create`` per attempt); the re-ask is a :class:`Reask` input, and its
  delivery names the request that first asked the question (P2 counts a question's
  presentations, P4 takes its answer: :mod:`fsm.questions`);
* crash the client (``crashes`` times, before it ended its interaction): its process
  ends, with its connections, timer and prompts; each answer POST in flight may or may
  not have reached the server; the client then starts again from what it stored
  (:class:`Restart`), in the same session. A client with a durable store may show a
  prompt that was on screen once more (:class:`Reshow`, docs/durability.md);
* after an abrupt cut, keep the old connection as a server does that never saw its client
  go (``hold``): it refuses every resume while it holds it (``held_answer``: the
  TypeScript SDK's 409, a 409 with ``Retry-After``, Render's 400 "session already
  exists"), for up to ``hold`` refusals (or for ever: ``None``), and may let go sooner;
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

A world with ``hold`` above 0 checks one more invariant, ``patience``: a refusal of a
server that still holds the old connection never ends the interaction. There the server
always lets go within ``hold`` refusals, so a client that fails on such a refusal gives up
on a call the server would still have completed (a server that holds for ever cannot be
waited out: ``patience`` is not checked against it, L1 is).

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

Every step feeds the policy an :data:`Input` (a typed tuple: :class:`Event`, :class:`Cut`,
...) and gets :data:`Output` operations back (:class:`Present`, :class:`Submit`, ...); the
world turns operations into pending work (a timer, a resume GET, an answer POST) that the
environment completes later, and into :mod:`fsm.properties` observations, so P1-P7 are
checked by the one shared monitor. Termination (L1) is the checker's cycle detection.

A state is a pair: the environment (:class:`Env`) and the client side (:class:`Agent`:
the policy's state with the monitor's). Far fewer distinct environments and agents exist
than states (the largest shipped model: 75,384 states, 21,513 environments, 12,564 agents),
so the world interns both and memoises on them what a step computes (:mod:`fsm.worlds.common`,
which every era's world shares); the rest of the time goes to the policy's own decisions,
each computed once.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Literal, NamedTuple, Protocol, TypeVar

from fsm import properties as P
from fsm.checker import Property, Symmetry
from fsm.errors import RequestKey
from fsm.events import standalone_stream
from fsm.worlds import common as base
from fsm.worlds.common import (
    USER_ANSWER,
    Agent,
    Answer,
    BoundsError,
    End,
    Move,
    OutputError,
    Present,
    Reaction,
    Restart,
    Tick,
    UserMode,
    Withdraw,
    transition_label,
)

__all__ = [
    "ENV_FIELDS",
    "OPENING",
    "STREAM",
    "TERMINAL_OUTCOMES",
    "USER_ANSWER",
    "Agent",
    "Answer",
    "Bounds",
    "BoundsError",
    "ClientPolicy",
    "Cut",
    "Deadline",
    "End",
    "Env",
    "Event",
    "GetCut",
    "GetEnd",
    "GetOpened",
    "HeldAnswer",
    "Input",
    "Move",
    "NewSession",
    "Outcome",
    "Output",
    "OutputError",
    "PostOutcome",
    "Present",
    "Reaction",
    "Reask",
    "Replay",
    "Reshow",
    "Restart",
    "Resume",
    "ResumeConflict",
    "ResumeRefused",
    "Resumed",
    "SsePolicy",
    "Submit",
    "Tick",
    "Timer",
    "UserMode",
    "Wait",
    "Withdraw",
    "World",
    "WorldState",
    "key",
    "session_name",
    "session_number",
    "stream_name",
    "transition_label",
]

C = TypeVar("C")

Outcome = Literal["202", "404", "404rpc", "rpc", "500rpc", "neterr"]
"""Answer POST outcomes: accepted, session gone, a 404 whose JSON-RPC body says "unknown
request id" (the seed incident's server), JSON-RPC "no such request" (400), the same
wrapped in a 500, and a transport error."""

TERMINAL_OUTCOMES = frozenset({"404", "404rpc", "rpc", "500rpc"})

Deadline = Literal["silent", "cancel"]
"""A server-side deadline fires silently, or with a ``notifications/cancelled``."""
Replay = Literal["after", "inclusive", "start"]
"""A resumed stream replays after the ``Last-Event-ID`` (the specification), from it, or
from the start of the server's buffer (everything, on every resume)."""
HeldAnswer = Literal["409", "409-retry-after", "400-exists"]
"""How a server that still holds the old connection refuses a resume: the TypeScript SDK's
409 "Conflict: Stream already has an active connection", a 409 with ``Retry-After`` (IBM
ContextForge's listener claim), Render's 400 "session already exists" in plain text."""
GetState = Literal["closed", "open", "lost"]
"""The standalone GET's connection: none (the client may open a fresh one), open
(carrying nothing yet), or cut and not yet ended by the client."""


# ------------------------------------------------------------------ inputs


class Event(
    base.Tagged,
    NamedTuple(
        "Event", [("op", Literal["event"]), ("event_id", int), ("what", str), ("request", int)]
    ),
):
    """Input: the server's event ``event_id`` (its place in the server's buffer) arrived on
    the tool call's stream: ``what`` is ``"prime"`` (the priming event), ``"req"`` (an
    elicitation of ``request``), ``"cancel"`` (its ``notifications/cancelled``) or
    ``"resp"`` (the tool's result; ``request`` -1)."""

    __slots__ = ()

    def __new__(cls, event_id: int, what: str, request: int) -> Event:
        return super().__new__(cls, "event", event_id, what, request)


class Reask(
    base.Tagged,
    NamedTuple(
        "Reask",
        [
            ("op", Literal["reask"]),
            ("event_id", int),
            ("request", int),
            ("first", int),
            ("first_event", int),
        ],
    ),
):
    """Input: the server's event ``event_id`` arrived on the tool call's stream: an
    elicitation of ``request`` (a new id) asking again the question that request
    ``first`` asked in event ``first_event``, whose answer the server received and lost.
    Its params are those of event ``first_event``'s: a client tells it from a new
    question only by comparing them (what the SDK clients present as any elicitation)."""

    __slots__ = ()

    def __new__(cls, event_id: int, request: int, first: int, first_event: int) -> Reask:
        return super().__new__(cls, "reask", event_id, request, first, first_event)


class Cut(base.Tagged, NamedTuple("Cut", [("op", Literal["cut"]), ("clean", bool)])):
    """Input: the tool call's stream (or its resume GET) broke, cleanly or not."""

    __slots__ = ()

    def __new__(cls, clean: bool) -> Cut:
        return super().__new__(cls, "cut", clean)


class Timer(base.Tagged, NamedTuple("Timer", [("op", Literal["timer"])])):
    """Input: the backoff timer the client started (:class:`Wait`) elapsed."""

    __slots__ = ()

    def __new__(cls) -> Timer:
        return super().__new__(cls, "timer")


class Resumed(base.Tagged, NamedTuple("Resumed", [("op", Literal["resumed"])])):
    """Input: the resume GET was answered with a stream; its events follow."""

    __slots__ = ()

    def __new__(cls) -> Resumed:
        return super().__new__(cls, "resumed")


class ResumeRefused(base.Tagged, NamedTuple("ResumeRefused", [("op", Literal["resume_404"])])):
    """Input: the resume GET was answered 404: the session is gone."""

    __slots__ = ()

    def __new__(cls) -> ResumeRefused:
        return super().__new__(cls, "resume_404")


class ResumeConflict(
    base.Tagged,
    NamedTuple("ResumeConflict", [("op", Literal["resume_held"]), ("answer", HeldAnswer)]),
):
    """Input: the resume GET was refused (``answer``) by a server that still holds the
    connection the last abrupt cut left half-open."""

    __slots__ = ()

    def __new__(cls, answer: HeldAnswer) -> ResumeConflict:
        return super().__new__(cls, "resume_held", answer)


class PostOutcome(
    base.Tagged,
    NamedTuple("PostOutcome", [("op", Literal["outcome"]), ("request", int), ("outcome", Outcome)]),
):
    """Input: how the answer POST for ``request`` ended (:data:`Outcome`)."""

    __slots__ = ()

    def __new__(cls, request: int, outcome: Outcome) -> PostOutcome:
        return super().__new__(cls, "outcome", request, outcome)


class GetOpened(
    base.Tagged, NamedTuple("GetOpened", [("op", Literal["get_open"]), ("generation", int)])
):
    """Input: the standalone GET's connection number ``generation`` opened."""

    __slots__ = ()

    def __new__(cls, generation: int) -> GetOpened:
        return super().__new__(cls, "get_open", generation)


class GetCut(base.Tagged, NamedTuple("GetCut", [("op", Literal["get_cut"]), ("generation", int)])):
    """Input: the standalone GET's connection ``generation`` broke before any event id."""

    __slots__ = ()

    def __new__(cls, generation: int) -> GetCut:
        return super().__new__(cls, "get_cut", generation)


class NewSession(
    base.Tagged, NamedTuple("NewSession", [("op", Literal["session"]), ("number", int)])
):
    """Input: the client began session ``number`` (0 is the first) and its tool call."""

    __slots__ = ()

    def __new__(cls, number: int) -> NewSession:
        return super().__new__(cls, "session", number)


Input = (
    Event
    | Reask
    | Cut
    | Timer
    | Resumed
    | ResumeRefused
    | ResumeConflict
    | Answer
    | PostOutcome
    | Tick
    | GetOpened
    | GetCut
    | NewSession
    | Restart
)
"""What this world tells a client policy. Each is a tuple tagged by its first field
(``Cut(False) == ("cut", False)``), the form older policies match on."""


# ------------------------------------------------------------------ outputs


class Submit(
    base.Tagged,
    NamedTuple(
        "Submit",
        [("op", Literal["submit"]), ("request", int), ("answer", tuple[tuple[str, Any], ...])],
    ),
):
    """Output: POST ``answer`` (the answer's items, sorted: hashable) for ``request``."""

    __slots__ = ()

    def __new__(cls, request: int, answer: tuple[tuple[str, Any], ...]) -> Submit:
        return super().__new__(cls, "submit", request, answer)


class Wait(base.Tagged, NamedTuple("Wait", [("op", Literal["wait"])])):
    """Output: start a backoff timer (:class:`Timer` tells when it elapsed)."""

    __slots__ = ()

    def __new__(cls) -> Wait:
        return super().__new__(cls, "wait")


class Resume(base.Tagged, NamedTuple("Resume", [("op", Literal["resume"]), ("cursor", int)])):
    """Output: resume the tool call's stream with ``Last-Event-ID: cursor``."""

    __slots__ = ()

    def __new__(cls, cursor: int) -> Resume:
        return super().__new__(cls, "resume", cursor)


class GetEnd(
    base.Tagged,
    NamedTuple("GetEnd", [("op", Literal["get_end"]), ("generation", int), ("outcome", str)]),
):
    """Output: end the standalone GET's generation ``generation`` with ``outcome``."""

    __slots__ = ()

    def __new__(cls, generation: int, outcome: str) -> GetEnd:
        return super().__new__(cls, "get_end", generation, outcome)


class Reshow(base.Tagged, NamedTuple("Reshow", [("op", Literal["reshow"]), ("request", int)])):
    """Output: after a restart, show the prompt of ``request`` again, marked as asked
    again after a restart (it was on screen when the process ended, unanswered)."""

    __slots__ = ()

    def __new__(cls, request: int) -> Reshow:
        return super().__new__(cls, "reshow", request)


Output = Present | Withdraw | Submit | Wait | Resume | End | GetEnd | Reshow
"""What a client policy of this world does. :class:`End` ends the tool call's interaction,
:class:`GetEnd` the standalone GET generation the client names. A policy may return the
plain tuple spelling (``("present", 0)``); anything else raises :class:`OutputError`."""

OUTPUTS = base.output_kinds(Present, Withdraw, Submit, Wait, Resume, End, GetEnd, Reshow)


class ClientPolicy(Protocol[C]):
    """A client under test, as a pure function of its state and one input.

    Optional: ``rename(state, ids, session) -> state``, the state the policy would be in
    had every request id ``r`` of the mapping ``ids`` in session number ``session`` been
    ``ids[r]`` all along. A policy that has it declares its decisions independent of id
    values, and its worlds reduce by symmetry. A world with ``sessions > 1`` tells the
    policy that a new session began with the input :class:`NewSession`."""

    name: str

    def init(self) -> C:
        """The client's state when the tool call's stream has just opened."""
        ...

    def step(self, state: C, inp: Input) -> tuple[C, tuple[Output, ...]]:
        """React to ``inp``; return the new state and the operations to perform."""
        ...


@dataclass(frozen=True, slots=True)
class Bounds(base.WorldBounds):
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
    hold: int | None = 0
    """Resumes the server refuses while it still holds the connection an abrupt cut left
    half-open (it may let go sooner); 0: it lets go at once, ``None``: never."""
    held_answer: HeldAnswer = "409"
    """How it refuses them."""
    reasks: int = 0
    """Times the server, having received the answer to a request, loses it and asks the
    same question again under a new id (an id of ``0..requests-1`` not used yet)."""
    crashes: int = 0
    """Times the client's process may end before its interaction did, and restart."""

    def _check(self) -> None:
        if self.sessions > 1 and self.get_cuts > 0:
            raise BoundsError(
                "Bounds.sessions: several sessions need get_cuts=0 (no standalone GET)"
            )


class Renaming(NamedTuple):
    """How an environment maps to its orbit's representative: the id mapping (old id ->
    new id, None when it is the identity) and the renamed environment."""

    ids: tuple[int, ...] | None
    env: Env


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
    "held",
    "conflict",
    "asks",
    "crashes",
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
    HELD,
    CONFLICT,
    ASKS,
    CRASHES,
) = range(len(ENV_FIELDS))


class Env(base.EnvBase):
    """The environment's part of a world state: server, network, user, and the client's
    pending work (timer, resume GET, answer POSTs); interned, with its memos
    (:class:`fsm.worlds.common.EnvBase`)."""

    __slots__ = ("_canon", *ENV_FIELDS)

    FIELDS = ENV_FIELDS

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
    held: int | None
    """Resumes the server will still refuse, holding the old connection (0: it holds
    none; ``None``: for ever)."""
    conflict: str
    """``"refused"`` right after such a refusal, ``"failed"`` once the client ended the
    interaction failed on one (the ``patience`` invariant), else ``""``."""
    asks: tuple[int, ...]
    """Per request id: the log index of the first ask of the question it asks again (a
    re-ask), or -1 (a question of its own)."""
    crashes: int
    """Client crashes left."""

    def __init__(self, values: tuple[Any, ...]) -> None:
        super().__init__(values)
        self._canon: Renaming | None = None


WorldState = base.WorldState[Env]
"""One state of this world: the environment and the client side (its ``client`` and
``monitor``)."""

KEY_SESSION = "s"
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


class SsePolicy(base.SnapshotPolicy[base.D, Input, Output]):
    """A :class:`~fsm.worlds.common.SnapshotPolicy` in this world's form
    (:class:`ClientPolicy`): its state is ``(t, snapshot)``, where :class:`Tick` (the clock
    passing every deadline) sets ``t`` without a decision, and it renames its state with
    the decider's renaming of request keys (``rename=``, required for a world of several
    requests: its worlds reduce by symmetry)."""

    def init(self) -> tuple[float, Any]:
        return (0.0, self.initial)

    def step(
        self, state: tuple[float, Any], inp: Input
    ) -> tuple[tuple[float, Any], tuple[Output, ...]]:
        t, snap = state
        if isinstance(inp, Tick):
            self._last_fired = ()
            return (1.0, snap), ()
        after, outputs = self.decide(snap, t, inp)
        return (t, after), outputs

    def rename(
        self, state: tuple[float, Any], ids: Mapping[int, int], session: int
    ) -> tuple[float, Any]:
        """The state had request ``r`` of session ``session`` been ``ids[r]`` all along
        (the decider's own renaming of its snapshot: its decisions never depend on an id's
        value)."""
        if self._rename_snapshot is None:
            raise TypeError(f"policy {self.name!r} was made without rename=: it cannot rename")
        t, snap = state
        keys: dict[RequestKey, RequestKey] = {
            key(old, session): key(new, session) for old, new in ids.items() if old != new
        }
        return t, self._rename_snapshot(snap, keys)


class World(base.WorldBase[Env, Bounds, Input, Output], Generic[C]):
    """The closed system ``policy`` x environment within ``bounds`` (see the module
    docstring; what every era's world shares: :class:`fsm.worlds.common.WorldBase`)."""

    env_type = Env
    opening = OPENING
    outputs = OUTPUTS
    policy: ClientPolicy[C]

    def __init__(
        self,
        policy: ClientPolicy[C],
        bounds: Bounds,
        *,
        properties: Sequence[str] = tuple(P.PROPERTIES),
        name: str = "",
        expect: Sequence[str] = (),
    ) -> None:
        super().__init__(policy, bounds, properties=properties, name=name, expect=expect)
        self._rename: Any = getattr(policy, "rename", None)
        self._step: dict[str, Callable[[list[Any], Any], Input | None]] = {
            "server sends elicitation": self._send,
            "server re-asks under a new id": self._reask,
            "deadline fires": self._deadline,
            "deliver": self._deliver,
            "cut clean": self._cut_clean,
            "cut abrupt": self._cut_abrupt,
            "server repeats its buffer": self._rewind,
            "server lets go of the old connection": self._let_go,
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
            "client crashes": self._crash,
        }

    def _witnesses(self) -> list[Property[WorldState]]:
        props: list[Property[WorldState]] = [
            Property.sometimes(
                "cut-and-resumed",
                lambda s: self._was_cut(s.env) and s.env.conn is not None,
                "a cut stream is resumed",
            )
        ]
        hold = self.bounds.hold
        if hold != 0:
            props.append(
                Property.sometimes(
                    "held",
                    lambda s: s.env.conflict != "" and s.env.held in (0, None),
                    "the server refuses a resume while it holds the old connection, as many"
                    " times as it may",
                )
            )
        if hold:
            props.append(
                Property.always(
                    "patience",
                    lambda s: s.env.conflict != "failed",
                    f"a resume refused while the server still holds the old connection (it"
                    f" lets go within {hold} refusals) never ends the interaction",
                )
            )
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

    def _completed(self, s: WorldState) -> bool:
        e = s.env
        return e.ended and not e.reaped and any(x == "answered" for x in e.server)

    def format_state(self, s: WorldState) -> str:
        e = s.env
        log = " ".join(f"{k}{'' if r < 0 else r}" for k, r in e.log)
        get = "" if e.get is None else f" get={e.get}:{e.get_gen}"
        sent = {r: x for r, x in enumerate(e.server) if x != "unsent"}
        reqs = list(sent.values()) if list(sent) == list(range(len(sent))) else sent
        return (
            f"server=[{log}] reqs={reqs} conn={e.conn} prompts={sorted(e.prompts)}"
            f" posts={sorted(e.posts)} t={e.t} ended={e.ended}{get}"
            + ("" if self.bounds.hold == 0 else f" held={e.held}{e.conflict and ':'}{e.conflict}")
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
        return base.new_state(base.WorldState, (canon.env, renamed))

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
        asks = [-1] * len(env.asks)
        for old, status in enumerate(env.server):
            server[m[old]] = status
            asks[m[old]] = env.asks[old]
        w[SERVER] = tuple(server)
        w[ASKS] = tuple(asks)
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
    def _initial(self) -> dict[str, Any]:
        b, empty = self.bounds, frozenset[int]()
        return {
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
            "held": 0,
            "conflict": "",
            "asks": (-1,) * b.requests,
            "crashes": b.crashes,
        }

    def _edit(self, e: Env, m: Move) -> tuple[list[Any], Input | None, Hashable] | None:
        """Each move edits ``w``, a list of the environment's values (positions above),
        and returns the input it tells the client, if any; the client's reaction depends
        on the clock and the session besides."""
        edit = self._step.get(m.name)
        if edit is None:
            return None
        w = list(e.values)
        if w[CONFLICT] == "refused":
            w[CONFLICT] = ""  # the refusal was the move before
        inp = edit(w, m.arg)
        return w, inp, (w[T], w[SESSION])

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
            if sends and b.reasks > sum(1 for a in e.asks if a >= 0):
                answered = [r for r, st in enumerate(e.server) if st == "answered"]
                moves += [
                    Move("server re-asks under a new id", (r, new))
                    for r in answered
                    for new in sends
                ]
        if e.conn is not None:
            if e.conn < len(e.log):
                moves.append(Move("deliver", e.conn))
            if self._may_cut(e):
                moves += [Move("cut clean"), Move("cut abrupt")]
            if e.rewinds > 0 and e.conn > 0:
                moves.append(Move("server repeats its buffer"))
        if e.held and not e.reaped:  # a count of refusals left (None: holds for ever)
            moves.append(Move("server lets go of the old connection"))
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
        if e.crashes > 0 and not e.ended:
            moves.append(Move("client crashes", False))
            if e.posts and not e.reaped:  # the POSTs in flight reached the server
                moves.append(Move("client crashes", True))
        if e.get is not None and not e.reaped:
            if e.get == "closed":
                moves.append(Move("fresh GET opens", e.get_gen + 1))
            elif e.get == "open" and e.get_cuts > 0:
                moves.append(Move("cut standalone GET", e.get_gen))
        return tuple(moves)

    def _send(self, w: list[Any], r: int) -> Input | None:
        w[SERVER] = _set(w[SERVER], r, "pending")
        w[LOG] = (*w[LOG], ("req", r))
        return None

    def _reask(self, w: list[Any], arg: tuple[int, int]) -> Input | None:
        """The server lost the answer to ``r`` and asks its question again as ``new``."""
        r, new = arg
        first = w[ASKS][r]
        if first < 0:
            first = w[LOG].index(("req", r))
        w[SERVER] = _set(w[SERVER], new, "pending")
        w[ASKS] = (*w[ASKS][:new], first, *w[ASKS][new + 1 :])
        w[LOG] = (*w[LOG], ("req", new))
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
        if kind == "req" and w[ASKS][r] >= 0:
            first_event = w[ASKS][r]
            return Reask(index, r, w[LOG][first_event][1], first_event)
        return Event(index, kind, r)

    def _rewind(self, w: list[Any], _: None) -> Input | None:
        w[CONN] = 0
        w[REWINDS] -= 1
        return None

    def _cut_clean(self, w: list[Any], _: None) -> Input:
        return self._cut(w, clean=True)

    def _cut_abrupt(self, w: list[Any], _: None) -> Input:
        if self.bounds.hold != 0:  # the server never saw the client go
            w[HELD] = self.bounds.hold
        return self._cut(w, clean=False)

    def _let_go(self, w: list[Any], _: None) -> Input | None:
        w[HELD] = 0
        return None

    def _cut(self, w: list[Any], *, clean: bool) -> Input:
        w[CONN] = None
        self._spend_cut(w)
        return Cut(clean)

    def _may_cut(self, e: Env) -> bool:
        return self.bounds.cuts is None or e.cuts > 0

    def _spend_cut(self, w: list[Any]) -> None:
        w[CUTS] = 1 if self.bounds.cuts is None else w[CUTS] - 1

    def _was_cut(self, e: Env) -> bool:
        return e.cuts == 1 if self.bounds.cuts is None else e.cuts < self.bounds.cuts

    def _backoff(self, w: list[Any], _: None) -> Input:
        w[TIMER] = False
        return Timer()

    def _resume_answered(self, w: list[Any], _: None) -> Input:
        if w[REAPED]:
            w[RESUME] = None
            return ResumeRefused()
        if w[HELD] != 0:
            w[RESUME] = None
            if w[HELD] is not None:
                w[HELD] -= 1
            w[CONFLICT] = "refused"
            return ResumeConflict(self.bounds.held_answer)
        replay = self.bounds.replay
        w[CONN] = 0 if replay == "start" else (w[RESUME] or 0) + (replay == "after")
        w[RESUME] = None
        return Resumed()

    def _resume_fails(self, w: list[Any], _: None) -> Input:
        w[RESUME] = None
        self._spend_cut(w)
        return Cut(False)

    def _post(self, w: list[Any], r: int) -> Input:
        w[POSTS] = w[POSTS] - {r}
        if w[REAPED]:
            outcome: Outcome = "404"
        elif w[SERVER][r] == "pending":
            w[SERVER] = _set(w[SERVER], r, "answered")
            outcome = "202"
            self._maybe_complete(w)
        elif w[SERVER][r] == "answered":
            outcome = "202"
        else:
            outcome = self.bounds.unknown_answer
        return PostOutcome(r, outcome)

    def _post_fails(self, w: list[Any], r: int) -> Input:
        w[POSTS] = w[POSTS] - {r}
        w[FAULTS] -= 1
        return PostOutcome(r, "neterr")

    def _user_answers(self, w: list[Any], r: int) -> Input:
        w[PROMPTS] = w[PROMPTS] - {r}
        w[USER_DONE] = w[USER_DONE] | {r}
        return Answer(r)

    def _clock(self, w: list[Any], _: None) -> Input:
        w[T] = 1.0
        return Tick()

    def _reap(self, w: list[Any], _: None) -> Input | None:  # the server ends the stream too
        was_open = w[CONN] is not None
        w[REAPED] = True
        w[CONN] = None
        return Cut(True) if was_open else None

    def _get_open(self, w: list[Any], generation: int) -> Input:
        w[GET], w[GET_GEN] = "open", generation
        return GetOpened(generation)

    def _get_cut(self, w: list[Any], generation: int) -> Input:
        w[GET] = "lost"
        w[GET_CUTS] -= 1
        return GetCut(generation)

    def _new_session(self, w: list[Any], _: None) -> Input:
        """The client begins the next session and its tool call: a fresh server (request
        ids from the start again), the budgets of cuts and faults and the clock go on."""
        fresh = self._initial_values()
        keep = (CUTS, FAULTS, T, SESSION, REWINDS)
        w[:] = [w[i] if i in keep else fresh[i] for i in range(len(w))]
        w[SESSION] += 1
        return NewSession(w[SESSION])

    def _crash(self, w: list[Any], delivered: bool) -> Input:
        """The client's process ends: its connection, timer, resume GET and prompts go;
        its answer POSTs in flight reach the server first (``delivered``) or never."""
        if delivered:
            for r in sorted(w[POSTS]):
                if w[SERVER][r] == "pending":
                    w[SERVER] = _set(w[SERVER], r, "answered")
            self._maybe_complete(w)
        if w[CONN] is not None and self.bounds.hold != 0:
            w[HELD] = self.bounds.hold  # the server never saw the client go
        w[CONN], w[TIMER], w[RESUME] = None, False, None
        w[POSTS], w[PROMPTS] = frozenset(), frozenset()
        w[CRASHES] -= 1
        return Restart()

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
            if isinstance(out, Present | Reshow):
                w[PROMPTS] = w[PROMPTS] | {out.request}
            elif isinstance(out, Withdraw):
                w[PROMPTS] = w[PROMPTS] - {out.request}
            elif isinstance(out, Submit):
                w[POSTS] = w[POSTS] | {out.request}
            elif isinstance(out, Wait):
                w[TIMER] = True
            elif isinstance(out, Resume):
                w[RESUME], w[CONN] = out.cursor, None
            elif isinstance(out, End):
                w[ENDED], w[CONN], w[TIMER], w[RESUME] = True, None, False, None
                if out.outcome == "failed" and w[CONFLICT] == "refused":
                    w[CONFLICT] = "failed"
            else:
                w[GET] = "closed"
        return self._env(w)

    # ------------------------------------------------------------ the client side

    def _policy_step(
        self, client: Any, context: tuple[float, int], inp: Input
    ) -> tuple[Any, tuple[Output, ...]]:
        return self.policy.step(client, inp)

    def _told(
        self, monitor: P.MonitorState, context: tuple[float, int], inp: Input
    ) -> list[P.Observation]:
        """What input ``inp`` at time ``t`` in session number ``session`` tells the
        client, as observations (``monitor``: what it was told before, to judge whether a
        delivery is a replay)."""
        t, session = context
        stream = stream_name(session)
        if isinstance(inp, Event):
            seen: list[P.Observation] = [P.EventSeen(stream, str(inp.event_id))]
            if inp.what == "req":
                newest = P.newest_event(monitor, stream)
                replayed = newest is not None and inp.event_id < int(newest)
                seen.append(P.Delivered(key(inp.request, session), stream, t, replayed=replayed))
            elif inp.what == "cancel":
                seen.append(P.Cancelled(key(inp.request, session)))
            return seen
        if isinstance(inp, Reask):
            newest = P.newest_event(monitor, stream)
            replayed = newest is not None and inp.event_id < int(newest)
            first = key(inp.first, session)
            return [
                P.EventSeen(stream, str(inp.event_id)),
                P.Delivered(
                    key(inp.request, session), stream, t, replayed=replayed, question=first
                ),
            ]
        if isinstance(inp, PostOutcome) and inp.outcome in TERMINAL_OUTCOMES:
            return [P.Rejected(key(inp.request, session), session=inp.outcome == "404")]
        if isinstance(inp, ResumeRefused):
            return [P.SessionGone()]
        if isinstance(inp, Answer):
            return [P.Answered(key(inp.request, session), dict(USER_ANSWER))]
        if isinstance(inp, NewSession):
            return [P.SessionBegan(session_name(session)), P.Began(stream)]
        if isinstance(inp, Restart):
            return [P.Restarted()]
        return []

    def _did(self, context: tuple[float, int], outputs: tuple[Output, ...]) -> list[P.Observation]:
        """What the client's ``outputs`` at time ``t`` in session number ``session`` show
        it doing, as observations."""
        t, session = context
        seen: list[P.Observation] = []
        stream = stream_name(session)
        for out in outputs:
            if isinstance(out, Present):
                seen.append(P.Presented(key(out.request, session), t))
            elif isinstance(out, Reshow):
                seen.append(P.Reshown(key(out.request, session), t))
            elif isinstance(out, Withdraw):
                seen.append(P.DeclaredDead(key(out.request, session)))
            elif isinstance(out, Submit):
                seen.append(P.Submitted(key(out.request, session), dict(out.answer)))
            elif isinstance(out, Resume):
                seen.append(P.Resumed(stream, str(out.cursor)))
            elif isinstance(out, End):
                seen.append(P.Ended(stream, out.outcome))
            elif isinstance(out, GetEnd):
                seen.append(P.Ended(standalone_stream(out.generation), out.outcome))
        return seen


def _set(t: tuple[str, ...], i: int, v: str) -> tuple[str, ...]:
    return (*t[:i], v, *t[i + 1 :])
