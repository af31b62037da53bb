"""A closed world for the model checker in the tasks era (``io.modelcontextprotocol/tasks``).

One ``tools/call`` answered with a task. The client polls ``tasks/get``; the task lists its
questions under keys in ``inputRequests`` (question ``q`` first under key ``q``, then a new
key each time the server asks it again); the client answers with ``tasks/update``, which
the server acknowledges at once and takes later (the acknowledgement is *eventually
consistent*). Within :class:`TasksBounds` the environment is free to

* take the acknowledged answers of keys still outstanding (the keys leave the listing),
  then complete the task once every question is taken;
* supersede an outstanding key (``supersedes``: the key vanishes, its question appears
  under a new key), re-ask a taken question under a new key (``reasks``), fail the task
  (``fails``), purge it (``purges``: both requests then answer -32602), acknowledge an
  update and drop it (``drops``), lose an update in transit (``lost``);
* let the task's ``createdAt + ttlMs`` pass (``expiries``: the clock jumps past it and the
  client is told the time, a :class:`Tick`);
* crash the client (``crashes``) while no prompt is on screen: the requests in flight are
  lost, the client restarts with only its persisted task id (:class:`Restart`). (A crash
  while a prompt is up loses the prompt with the process; showing that unanswered
  question again after the restart is the only way to get it answered, so it is not
  explored);
* let the user answer each shown prompt at any time, or never (``user``).

A ``tasks/get`` in flight is answered once something changed since the client's last poll
result (the server's task, an update sent, an answer given, the clock): a poll that returns
what the client already knows, with nothing else happening, is a stutter the client
provably ignores (``tests/core/test_tasks_rules.py``) and is not explored.

The client is a policy: ``step(state, t, input) -> (state, outputs)``. Inputs
(:data:`Input`): :class:`Status` (``("status", status, ((key, question), ...))``, the
``tasks/get`` result), :class:`Error` (``("error", "get" | "update", "expired" |
"lost")``), :class:`Acked` (the update's empty result), :class:`Answer` (``("answer",
key)``), :class:`Tick`, :class:`Restart`. Outputs (:data:`Output`): :class:`Present`,
:class:`Withdraw` (of a key), :class:`Poll`, :class:`Update` (``("update", ((key, answer
items), ...))``), :class:`End`.

Properties: the shared monitor (:mod:`fsm.properties`) judges observations read in task
terms (``docs/tasks.md``): a key is a request key ``(task, key)``; a poll result is a
delivery of each key it lists (with the key of its question the user answered, if any, so
P2 counts an answered question's prompts across keys and P4 takes a re-ask's answer from
its question), and
a withdrawal of each key it no longer lists before its answer was taken; -32602 is a
terminal rejection of the answers the request carried; an update is a submission of each
answer and a resume of the task. P6 is restated: no answer is sent after the task's TTL
passed. Termination (L1) is the checker's cycle detection.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple, Protocol, TypeVar

from fsm import properties as P
from fsm.tasks import observe
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
    "TASK",
    "USER_ANSWER",
    "Acked",
    "Answer",
    "End",
    "Env",
    "Error",
    "Input",
    "Move",
    "Output",
    "Poll",
    "Present",
    "Restart",
    "State",
    "Status",
    "TaskStatus",
    "TasksBounds",
    "TasksPolicy",
    "TasksSnapshotPolicy",
    "TasksWorld",
    "Tick",
    "Update",
    "UserMode",
    "Withdraw",
    "key",
]

C = TypeVar("C")

TASK = "task"

TaskStatus = Literal["working", "input_required", "completed", "failed"]
"""The statuses a poll of this world reports (a purged task answers -32602 instead)."""

TTL_PASSED = 2.0
"""The clock once the task's ``createdAt + ttlMs`` (1.0) passed."""


def key(k: int) -> tuple[str, int]:
    """The request key of input request key ``k`` of the task."""
    return (TASK, k)


# ------------------------------------------------------------------ inputs and outputs

Listing = tuple[tuple[int, int], ...]
"""``((key, question), ...)``: the keys a poll lists and the question each asks."""


class Status(
    base.Tagged,
    NamedTuple("Status", [("op", Literal["status"]), ("status", TaskStatus), ("listed", Listing)]),
):
    """Input: a ``tasks/get`` result: the task's status and (``input_required``) its keys."""

    __slots__ = ()

    def __new__(cls, status: TaskStatus, listed: Listing = ()) -> Status:
        return super().__new__(cls, "status", status, listed)


class Error(
    base.Tagged,
    NamedTuple(
        "Error",
        [
            ("op", Literal["error"]),
            ("request", Literal["get", "update"]),
            ("reason", Literal["expired", "lost"]),
        ],
    ),
):
    """Input: the ``tasks/get`` or ``tasks/update`` failed: -32602 (``expired``: the task
    was purged) or lost in transit (``lost``)."""

    __slots__ = ()

    def __new__(
        cls, request: Literal["get", "update"], reason: Literal["expired", "lost"]
    ) -> Error:
        return super().__new__(cls, "error", request, reason)


class Acked(base.Tagged, NamedTuple("Acked", [("op", Literal["acked"])])):
    """Input: the ``tasks/update`` came back with its empty result."""

    __slots__ = ()

    def __new__(cls) -> Acked:
        return super().__new__(cls, "acked")


Input = Status | Error | Acked | Answer | Tick | Restart
"""What this world tells a client policy (``Answer.request``: the key)."""


class Poll(base.Tagged, NamedTuple("Poll", [("op", Literal["poll"])])):
    """Output: send ``tasks/get``."""

    __slots__ = ()

    def __new__(cls) -> Poll:
        return super().__new__(cls, "poll")


class Update(
    base.Tagged,
    NamedTuple(
        "Update",
        [
            ("op", Literal["update"]),
            ("answers", tuple[tuple[int, tuple[tuple[str, Any], ...]], ...]),
        ],
    ),
):
    """Output: send ``tasks/update`` with ``answers``, each ``(key, answer items)``."""

    __slots__ = ()

    def __new__(cls, answers: tuple[tuple[int, tuple[tuple[str, Any], ...]], ...]) -> Update:
        return super().__new__(cls, "update", answers)


Output = Present | Withdraw | Poll | Update | End
"""What a client policy of this world does (``Present.request``: the key)."""

OUTPUTS = base.output_kinds(Present, Withdraw, Poll, Update, End)


class TasksPolicy(base.ClockedPolicy[C, Input, Output], Protocol[C]):
    """A client under test, as a pure function of its state, the clock and one input;
    ``init()`` is its state when the task was created and its first poll is in flight."""


@dataclass(frozen=True, slots=True)
class TasksBounds(base.WorldBounds):
    """The environment variant and its bounds, checked on construction as every world's
    are (:class:`~fsm.worlds.common.WorldBounds`)."""

    questions: int = 1
    supersedes: int = 0
    reasks: int = 0
    fails: int = 0
    purges: int = 0
    drops: int = 0
    lost: int = 0
    expiries: int = 0
    crashes: int = 0
    user: UserMode = "answers"
    ttl: float = 0.5


class Env(base.EnvBase):
    """The environment's part of a state; interned, with its memos."""

    FIELDS = (
        "status",
        "listed",
        "next_key",
        "pending",
        "taken",
        "get",
        "fresh",
        "update",
        "supersedes",
        "reasks",
        "fails",
        "purges",
        "drops",
        "lost",
        "expiries",
        "crashes",
        "t",
        "asked",
        "seen",
        "prompts",
        "answered",
        "void",
        "ended",
    )
    __slots__ = FIELDS

    status: str
    """The server's task: working, input_required, completed, failed or purged."""
    listed: Listing
    """The outstanding keys and their questions."""
    next_key: int
    pending: frozenset[int]
    """Keys whose answers the server acknowledged and has not taken yet."""
    taken: frozenset[int]
    """Questions whose answers the server took."""
    get: bool
    """A ``tasks/get`` is in flight."""
    fresh: bool
    """Something changed since the client's last poll result."""
    update: frozenset[int] | None
    """The keys of the ``tasks/update`` in flight."""
    supersedes: int
    reasks: int
    fails: int
    purges: int
    drops: int
    lost: int
    expiries: int
    crashes: int
    t: float
    asked: Listing
    """Every key issued and its question, in order."""
    seen: tuple[int, ...]
    """The keys the client's last poll result listed."""
    prompts: frozenset[int]
    answered: frozenset[int]
    """Questions the user answered."""
    void: bool
    """An update was sent after the task's TTL passed."""
    ended: str


State = base.WorldState[Env]
"""One state: the environment and the client side (its ``client`` and ``monitor``)."""


class Context(NamedTuple):
    """What the client's reaction and its observations depend on besides the input (the
    clock first, as in every clocked world's context)."""

    t: float
    asked: Listing
    seen: tuple[int, ...]
    taken: frozenset[int]
    carried: frozenset[int]


class TasksSnapshotPolicy(base.ClockedSnapshotPolicy[base.D, Input, Output]):
    """A :class:`~fsm.worlds.common.SnapshotPolicy` in this world's form
    (:class:`TasksPolicy`): its state is the decider's snapshot, its clock the world's.
    On :class:`Restart` the decider starts again from its ``fresh`` snapshot (it keeps
    nothing durable), then is fed the restart."""

    def step(self, state: Any, t: float, inp: Input) -> tuple[Any, tuple[Output, ...]]:
        return self.decide(self.fresh if isinstance(inp, Restart) else state, t, inp)


class TasksWorld(base.ClockedWorld[Env, TasksBounds, Input, Output]):
    """The closed system ``policy`` x tasks environment within ``bounds``."""

    interaction = TASK
    env_type = Env
    opening = (P.Began(TASK),)
    outputs = OUTPUTS
    subject = "task"
    presented_doc = "an input request is presented"
    completed_doc = "the task can complete with the user's answers"
    policy: TasksPolicy[Any]

    void_doc = "no answer is sent after the task's createdAt + ttlMs passed"

    def format_state(self, s: State) -> str:
        e = s.env
        return (
            f"status={e.status} listed={list(e.listed)} pending={sorted(e.pending)}"
            f" get={e.get} update={e.update and sorted(e.update)} prompts={sorted(e.prompts)}"
            f" t={e.t} ended={e.ended}"
        )

    # ------------------------------------------------------------ the environment

    def _initial(self) -> dict[str, Any]:
        b, empty = self.bounds, frozenset[int]()
        listed = tuple((q, q) for q in range(b.questions))
        return {
            "status": "input_required" if listed else "working",
            "listed": listed,
            "next_key": b.questions,
            "pending": empty,
            "taken": empty,
            "get": True,
            "fresh": True,
            "update": None,
            "supersedes": b.supersedes,
            "reasks": b.reasks,
            "fails": b.fails,
            "purges": b.purges,
            "drops": b.drops,
            "lost": b.lost,
            "expiries": b.expiries,
            "crashes": b.crashes,
            "t": 0.0,
            "asked": listed,
            "seen": (),
            "prompts": empty,
            "answered": empty,
            "void": False,
            "ended": "",
        }

    def _enabled(self, e: Env) -> tuple[Move, ...]:
        moves: list[Move] = []
        live = e.status in ("working", "input_required")
        if e.get and (e.fresh or e.status == "purged"):
            moves.append(Move("server answers the poll"))
        if e.update is not None:
            moves.append(Move("server acknowledges the update"))
            if e.drops > 0 and e.status != "purged":
                moves.append(Move("server acknowledges and drops the update"))
            if e.lost > 0:
                moves.append(Move("update lost"))
        if e.pending and live:
            moves.append(Move("server takes the answers"))
        if e.status == "working" and not e.listed and len(e.taken) == self.bounds.questions:
            moves.append(Move("server completes the task"))
        if e.supersedes > 0 and live:
            moves += [Move("server supersedes key", k) for k, _ in e.listed if k not in e.pending]
        if e.fails > 0 and live:
            moves.append(Move("server fails the task"))
        if e.purges > 0 and (live or e.status == "failed"):
            moves.append(Move("server purges the task"))
        if self.bounds.user == "answers":
            moves += [Move("user answers key", k) for k in sorted(e.prompts)]
        if e.expiries > 0 and e.t < TTL_PASSED and not e.ended:
            moves.append(Move("the task's TTL passes"))
        if e.crashes > 0 and not e.ended and not e.prompts:
            moves.append(Move("client crashes"))
        return tuple(moves)

    def _edit(self, e: Env, m: Move) -> tuple[tuple[Any, ...], Input | None, Hashable] | None:
        inp: Input | None = None
        carried: frozenset[int] = frozenset()
        before = e
        if m.name == "server answers the poll" and e.get:
            if e.status == "purged":
                inp = Error("get", "expired")
            else:
                status: Any = e.status
                inp = Status(status, e.listed if e.status == "input_required" else ())
            e = e.replace(get=False, fresh=False, seen=tuple(k for k, _ in e.listed))
        elif m.name == "server acknowledges the update" and e.update is not None:
            carried = e.update
            if e.status == "purged":
                inp = Error("update", "expired")
                e = e.replace(update=None, fresh=True)
            else:
                outstanding = {k for k, _ in e.listed}
                pending = e.pending | (carried & outstanding)
                e, inp = e.replace(update=None, pending=pending, fresh=True), Acked()
        elif m.name == "server acknowledges and drops the update" and e.drops > 0:
            e, inp = e.replace(update=None, drops=e.drops - 1, fresh=True), Acked()
        elif m.name == "update lost" and e.update is not None and e.lost > 0:
            carried = e.update
            e = e.replace(update=None, lost=e.lost - 1, fresh=True)
            inp = Error("update", "lost")
        elif m.name == "server takes the answers" and e.pending:
            e = self._take(e)
        elif m.name == "server completes the task":
            e = e.replace(status="completed", fresh=True)
        elif m.name == "server supersedes key" and e.supersedes > 0:
            k = m.arg
            listed = tuple((e.next_key, q) if x == k else (x, q) for x, q in e.listed)
            q = next(q for x, q in e.listed if x == k)
            e = e.replace(
                listed=listed,
                asked=(*e.asked, (e.next_key, q)),
                next_key=e.next_key + 1,
                supersedes=e.supersedes - 1,
                fresh=True,
            )
        elif m.name == "server fails the task" and e.fails > 0:
            e = e.replace(status="failed", listed=(), fails=e.fails - 1, fresh=True)
        elif m.name == "server purges the task" and e.purges > 0:
            e = e.replace(status="purged", listed=(), purges=e.purges - 1, fresh=True)
        elif m.name == "user answers key" and m.arg in e.prompts:
            k = m.arg
            q = next(q for x, q in e.asked if x == k)
            e = e.replace(prompts=e.prompts - {k}, answered=e.answered | {q}, fresh=True)
            inp = Answer(k)
        elif m.name == "the task's TTL passes" and e.expiries > 0:
            e, inp = e.replace(t=TTL_PASSED, expiries=e.expiries - 1, fresh=True), Tick()
        elif m.name == "client crashes" and e.crashes > 0:
            e = e.replace(crashes=e.crashes - 1, get=False, update=None, fresh=True)
            inp = Restart()
        else:
            return None
        context = Context(before.t if inp is None else e.t, e.asked, before.seen, e.taken, carried)
        return e.values, inp, context

    def _take(self, e: Env) -> Env:
        """The server takes the acknowledged answers of keys still outstanding; a re-asking
        task asks one taken question again under a new key."""
        took = {k for k, _ in e.listed if k in e.pending}
        taken = e.taken | {q for k, q in e.listed if k in took}
        listed = tuple((k, q) for k, q in e.listed if k not in took)
        asked = e.asked
        next_key, reasks = e.next_key, e.reasks
        if reasks > 0 and took:
            q = min(q for k, q in e.asked if k in took)
            listed, asked = (*listed, (next_key, q)), (*asked, (next_key, q))
            next_key, reasks = next_key + 1, reasks - 1
        return e.replace(
            listed=listed,
            asked=asked,
            next_key=next_key,
            reasks=reasks,
            pending=frozenset(),
            taken=taken,
            status="input_required" if listed else "working",
            fresh=True,
        )

    def _perform(self, e: Env, outputs: tuple[Output, ...]) -> Env:
        """The environment after the client's operations."""
        for out in outputs:
            if isinstance(out, Present):
                e = e.replace(prompts=e.prompts | {out.request})
            elif isinstance(out, Withdraw):
                e = e.replace(prompts=e.prompts - {out.request})
            elif isinstance(out, Poll):
                e = e.replace(get=True)
            elif isinstance(out, Update):
                keys = frozenset(k for k, _ in out.answers)
                e = e.replace(update=keys, fresh=True, void=e.void or e.t >= TTL_PASSED)
            else:
                e = e.replace(
                    ended=e.ended or out.outcome, prompts=frozenset(), get=False, update=None
                )
        return self._env(e.values)

    # ------------------------------------------------------------ the client side

    def _told(self, monitor: P.MonitorState, context: Context, inp: Input) -> list[P.Observation]:
        """A poll result is a delivery of each key it lists (with the key of its question
        the user answered, if any) and a withdrawal of each key it
        no longer lists whose question was not taken; -32602 a terminal rejection of the
        answers the request carried (and, on a poll, the death of every key the client
        knew listed): the one reading of :mod:`fsm.tasks.observe`."""
        if isinstance(inp, Status):
            asked = [(key(k), q) for k, q in context.asked]
            listed = [(key(k), q) for k, q in inp.listed]
            seen = [key(k) for k in context.seen]
            return observe.polled(
                monitor, TASK, context.t, inp.status, listed, asked, seen, context.taken
            )
        if isinstance(inp, Error) and inp.reason == "expired":
            carried = [key(k) for k in sorted(context.carried)]
            return observe.gone(inp.request, carried, [key(k) for k in context.seen])
        if isinstance(inp, Answer):
            return [P.Answered(key(inp.request), dict(USER_ANSWER))]
        return []

    def _did_own(self, out: Output) -> list[P.Observation]:
        """An update is a submission of each answer it carries and a resume of the task."""
        if isinstance(out, Update):
            return observe.updated(TASK, ((key(k), dict(a)) for k, a in out.answers))
        return []
