"""Synthetic client event logs (:mod:`fsm.trace` records) of any length, for the audit's
memory tests and its benchmark.

:func:`synthetic_log` plays a client through sessions of interleaved interactions, as
:class:`fsm.sse.observe.ObservedGuard` would record them: tool calls whose confirmation is
presented, answered and submitted (some streams lost, resumed from the newest event id and
replayed with a liveness assertion, the client not presenting again), tool calls with
progress only, tool calls whose request the server cancels (the client withdraws it and
the call fails), and origin-less requests on the standalone GET stream. Every few hundred
interactions the session is lost (the GET generation ends with it) and a new one begins.
Such a log conforms to P1-P7 and the machines, whatever the audit's ``retain``; with
``violation=True`` its last records are a fresh tool call whose request is replayed and
presented again (P2): the audit then reads the whole log and reports its last line.

Deterministic for a given ``seed``; standard library and :mod:`fsm` only.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterator

from fsm import properties as P
from fsm.errors import RequestKey
from fsm.events import standalone_stream
from fsm.trace import SCHEMA, to_record

ANSWER = {"action": "accept", "content": {"ok": True}}
LIVE = 8
"""Interactions open at once."""
SESSION_INTERACTIONS = 300
"""Interactions per session before it is lost."""


def synthetic_log(
    records: int, *, seed: int = 0, violation: bool = False
) -> Iterator[tuple[P.Observation, float]]:
    """``(observation, t)`` pairs: exactly ``records`` of them, the last one the P2
    violation when ``violation``; ``t`` advances 10 ms a record."""
    rng = random.Random(seed)
    out = 0
    session_no, interaction_no, request_no, generation = 1, 0, 0, 1
    session = f"s{session_no}"
    get = standalone_stream(generation)
    get_events = 0

    def call(kind: str) -> Iterator[P.Observation]:
        nonlocal interaction_no, request_no, get_events
        interaction_no += 1
        n = interaction_no
        stream = f"post:{n}"
        if kind == "get":  # an origin-less request on the GET stream: its own interaction
            request_no += 1
            key = (session, request_no)
            get_events += 1
            yield P.EventSeen(get, f"g-{get_events}")
            yield P.Delivered(key, get, out * 0.01)
            yield P.Presented(key, out * 0.01)
            yield P.Answered(key, ANSWER)
            yield P.Submitted(key, ANSWER)
            yield P.Ended(f"{get}#{key[1]!r}", "completed")
            return
        yield P.Began(stream)
        if kind == "progress":
            for i in range(rng.randint(1, 6)):
                yield P.EventSeen(stream, f"{n}-{i}")
            yield P.Ended(stream, "completed")
            return
        request_no += 1
        key = (session, request_no)
        yield P.EventSeen(stream, f"{n}-1")
        yield P.Delivered(key, stream, out * 0.01)
        yield P.Presented(key, out * 0.01)
        if kind == "cancelled":
            yield P.Cancelled(key)
            yield P.DeclaredDead(key)
            yield P.Ended(stream, "failed", "cancelled")
            return
        yield P.Answered(key, ANSWER)
        if rng.random() < 0.3:  # the stream is lost: resumed, the request replayed
            yield P.Resumed(stream, f"{n}-1")
            yield P.EventSeen(stream, f"{n}-1")
            yield P.Delivered(key, stream, out * 0.01, replayed=True, asserted=True)
        yield P.Submitted(key, ANSWER)
        yield P.EventSeen(stream, f"{n}-2")
        yield P.Ended(stream, "completed")

    def roll() -> Iterator[P.Observation]:
        nonlocal session_no, session, generation, get, get_events, request_no
        yield P.SessionGone()
        yield P.Ended(get, "failed", "session-expired")
        session_no += 1
        generation += 1
        session, get, get_events, request_no = f"s{session_no}", standalone_stream(generation), 0, 0
        yield P.SessionBegan(session)

    live: list[Iterator[P.Observation]] = []
    started = 0
    pending: list[P.Observation] = [P.SessionBegan(session)]
    room = records - len(TAIL) if violation else records
    while out < room:
        if pending:
            obs = pending.pop(0)
        else:
            if started == SESSION_INTERACTIONS and not live:
                if out + 3 <= room:  # a roll is never cut: the tail's session is alive
                    pending = list(roll())
                started = 0
                continue
            while started < SESSION_INTERACTIONS and len(live) < LIVE:
                r = rng.random()
                kind = (
                    "elicit"
                    if r < 0.6
                    else "progress"
                    if r < 0.85
                    else "cancelled"
                    if r < 0.95
                    else "get"
                )
                live.append(call(kind))
                started += 1
            i = rng.randrange(len(live))
            got = next(live[i], None)
            if got is None:
                live.pop(i)
                continue
            obs = got
        yield obs, out * 0.01
        out += 1
    if violation:  # a fresh tool call whose request, replayed, is presented again
        interaction_no += 1
        stream, key = f"post:{interaction_no}", (session, request_no + 1)
        for make in TAIL:
            yield make(stream, key, out * 0.01), out * 0.01
            out += 1


TAIL: tuple[Callable[[str, RequestKey, float], P.Observation], ...] = (
    lambda stream, key, t: P.Began(stream),
    lambda stream, key, t: P.EventSeen(stream, f"{stream}-1"),
    lambda stream, key, t: P.Delivered(key, stream, t),
    lambda stream, key, t: P.Presented(key, t),
    lambda stream, key, t: P.Resumed(stream, f"{stream}-1"),
    lambda stream, key, t: P.Delivered(key, stream, t, replayed=True),
    lambda stream, key, t: P.Presented(key, t),
)
"""The records of the violation ``violation=True`` ends a log with (P2 on the last)."""


def synthetic_lines(records: int, *, seed: int = 0, violation: bool = False) -> Iterator[str]:
    """The JSON Lines of :func:`synthetic_log` (a header first, no line separators)."""
    yield json.dumps({"kind": "header", "schema": SCHEMA})
    for obs, t in synthetic_log(records, seed=seed, violation=violation):
        yield json.dumps(to_record(obs, t), sort_keys=True)
