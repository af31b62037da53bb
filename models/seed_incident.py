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

from fsm.world import TERMINAL_OUTCOMES, Bounds, Input, Output, World


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

    def step(self, c: Naive, inp: Input) -> tuple[Naive, tuple[Output, ...]]:
        if inp[0] == "session":  # a new session and tool call: nothing carried over
            return Naive(), ()
        if c.ended:
            return c, ()
        kind = inp[0]
        if kind == "event":
            _, index, what, r = inp
            if what == "req":
                pending = (*(p for p in c.pending if p[0] != r), (r, index))
                return c._replace(pending=pending), (("present", r),)
            if what == "resp":
                return c._replace(ended=True, cursor=index), (("end", "completed"),)
            return c._replace(cursor=index), ()
        if kind in ("cut", "resume_404"):
            return c, (("wait",),)
        if kind == "timer":
            return c, (("resume", c.cursor if c.cursor is not None else 0),)
        if kind == "answer":
            r = inp[1]
            index = dict(c.pending).get(r)
            c = c._replace(
                cursor=index if index is not None else c.cursor,
                pending=tuple(p for p in c.pending if p[0] != r),
            )
            return c, (("submit", r, (("confirm", True),)),)
        if kind == "outcome" and (inp[2] in TERMINAL_OUTCOMES or inp[2] == "neterr"):
            return c, (("resume", c.cursor if c.cursor is not None else 0),)
        return c, ()


MODEL = World(
    NaivePolicy(),
    Bounds(
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
