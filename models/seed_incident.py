"""The client of the seed incident, against the incident's server.

The naive client re-processes every replayed event (no de-duplication: each delivery of
an ``elicitation/create`` is presented), commits its resume cursor only once an event is
fully handled (a request only when answered), submits ``{"confirm": true}`` for the
request (the incident write-up's snippet fabricates that consent), and treats any
rejection of an answer as transient: it re-resumes the stream at once. The server replays
from the named event inclusively, fires a silent 30 s deadline, answers a late answer
with a 404 "unknown request id", and its tool hangs once the request is dead.

The checker must find P1, P2, P3 and L1 violated, each with a shortest counterexample
(and P4, the fabricated consent, and P7, the cursor held back at the request).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

from fsm.worlds import sse as world


class Naive(NamedTuple):
    """cursor: the last fully handled event; pending: request -> its event index."""

    cursor: int | None = None
    pending: tuple[tuple[int, int], ...] = ()
    ended: bool = False


class NaivePolicy:
    """Replays re-processed, every delivery presented, rejections treated as transient."""

    name = "seed-incident"

    def init(self) -> Naive:
        return Naive()

    def rename(self, c: Naive, ids: Mapping[int, int], session: int) -> Naive:
        """``c`` had request ``r`` been ``ids[r]`` all along."""
        return c._replace(pending=tuple((ids.get(r, r), index) for r, index in c.pending))

    def step(self, c: Naive, inp: world.Input) -> tuple[Naive, tuple[world.Output, ...]]:
        if isinstance(inp, world.NewSession):  # a new session and tool call: nothing carried over
            return Naive(), ()
        if c.ended:
            return c, ()
        if isinstance(inp, world.Event):
            index, r = inp.event_id, inp.request
            if inp.what == "req":
                pending = (*(p for p in c.pending if p[0] != r), (r, index))
                return c._replace(pending=pending), (world.Present(r),)
            if inp.what == "resp":
                return c._replace(ended=True, cursor=index), (world.End("completed"),)
            return c._replace(cursor=index), ()
        if isinstance(inp, world.Cut | world.ResumeRefused | world.ResumeConflict):
            return c, (world.Wait(),)
        if isinstance(inp, world.Timer):
            return c, (world.Resume(c.cursor if c.cursor is not None else 0),)
        if isinstance(inp, world.Answer):
            r = inp.request
            at = dict(c.pending).get(r)
            c = c._replace(
                cursor=at if at is not None else c.cursor,
                pending=tuple(p for p in c.pending if p[0] != r),
            )
            return c, (world.Submit(r, (("confirm", True),)),)
        if isinstance(inp, world.PostOutcome) and (
            inp.outcome in world.TERMINAL_OUTCOMES or inp.outcome == "neterr"
        ):
            return c, (world.Resume(c.cursor if c.cursor is not None else 0),)
        return c, ()


MODEL = world.World(
    NaivePolicy(),
    world.Bounds(
        requests=1,
        cuts=1,
        post_faults=0,
        deadline="silent",
        unknown_answer="404rpc",
        completes_on_deadline=False,
        replay="inclusive",
        clock=False,
    ),
    name="seed-incident",
    expect=("P1", "P2", "P3", "P4", "P7", "L1"),
)
