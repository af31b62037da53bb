"""The requester of ``@modelcontextprotocol/ext-tasks`` 0.2.2 (npm), as measured.

``dist/client/task-protocol-v2.js`` and ``session.js`` of the tarball:

* ``InputRequestLedger`` reserves each ``inputRequests`` key while its handler runs and
  commits it only once ``tasks/update`` succeeded; a key reserved or committed is skipped
  when a poll lists it again (l.6-32, l.176-191);
* a failed ``tasks/update`` releases its keys and rethrows (l.215-243): the execution
  fails (``execution.js`` l.147-175 turns the driver's error into a failed outcome), so
  a released key is presented again only by a new execution, ``resumeTask``;
* keys are deduplicated by key, not by question: an answered question the server asks
  again under a new key is presented again;
* ``resumeTask(reference)`` after a crash or hand-off starts with an empty ledger
  (``serializeReference()`` persists only the endpoint and the task handle);
* it keeps no clock of its own and never withdraws a prompt; a terminal status or an error
  ends the execution.

The checker must find P2 (a question presented a second time): with no crash, once the
server asks an answered question again under a new key; with one crash, once a key
answered before it is still listed after the restart (the acknowledgement is eventually
consistent, the ledger is gone). An update that fails ends the execution failed, once,
with nothing presented twice: P2 holds there.
"""

from __future__ import annotations

from typing import NamedTuple

from fsm.worlds import tasks as world

LEGEND = (
    "ext-tasks-0.2.2[case]: the ext-tasks requester when the server asks an answered "
    "question again under a new key (reask), when an update fails (update-fails), and "
    "when it crashes and resumes the task by its persisted reference (crash)"
)
"""What the fields of this file's model names mean (``fsm check --overview`` prints it)."""


class Ledger(NamedTuple):
    reserved: frozenset[int] = frozenset()
    committed: frozenset[int] = frozenset()
    waiting: frozenset[int] = frozenset()
    answered: tuple[int, ...] = ()
    inflight: tuple[int, ...] = ()
    ended: bool = False


class ExtTasksRequester:
    """The 0.2.2 requester as a policy: poll, present the keys its ledger does not hold,
    send their answers in one update once every handler returned, commit or release."""

    name = "ext-tasks-0.2.2"

    def init(self) -> Ledger:
        return Ledger()

    def step(
        self, c: Ledger, t: float, inp: world.Input
    ) -> tuple[Ledger, tuple[world.Output, ...]]:
        if isinstance(inp, world.Restart):  # resumeTask: a fresh, empty ledger
            return Ledger(), (world.Poll(),)
        if c.ended:
            return c, ()
        if isinstance(inp, world.Status):
            if inp.status in ("completed", "failed"):
                outcome = "completed" if inp.status == "completed" else "failed"
                return c._replace(ended=True), (world.End(outcome),)
            held = c.reserved | c.committed
            new = tuple(k for k, _ in inp.listed if k not in held)
            if not new:
                return c, (world.Poll(),)
            c = c._replace(reserved=c.reserved | set(new), waiting=c.waiting | set(new))
            return c, tuple(world.Present(k) for k in new)
        if isinstance(inp, world.Answer) and inp.request in c.waiting:
            c = c._replace(waiting=c.waiting - {inp.request}, answered=(*c.answered, inp.request))
            if c.waiting:
                return c, ()
            answers = tuple((k, world.USER_ANSWER) for k in sorted(c.answered))
            return c._replace(answered=(), inflight=tuple(sorted(c.answered))), (
                world.Update(answers),
            )
        if isinstance(inp, world.Acked):
            done = frozenset(c.inflight)
            c = c._replace(reserved=c.reserved - done, committed=c.committed | done, inflight=())
            return c, (world.Poll(),)
        if isinstance(inp, world.Error):  # a failed update releases its keys and rethrows
            return c._replace(ended=True), (world.End("failed"),)
        return c, ()


REQUESTER = ExtTasksRequester()

MODELS = [
    world.TasksWorld(
        REQUESTER,
        world.TasksBounds(reasks=1),
        name="ext-tasks-0.2.2[reask]",
        expect=("P2",),
    ),
    world.TasksWorld(
        REQUESTER,
        world.TasksBounds(lost=1),
        name="ext-tasks-0.2.2[update-fails]",
    ),
    world.TasksWorld(
        REQUESTER,
        world.TasksBounds(crashes=1),
        name="ext-tasks-0.2.2[crash]",
        expect=("P2",),
    ),
]
