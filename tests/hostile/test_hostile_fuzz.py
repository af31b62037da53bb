"""Fuzz the guard with arbitrary event sequences, well-formed and hostile.

Every event type of :mod:`fsm.events` is generated, with adversarial payloads (bad ids,
bad ``retry:``, undecodable bytes, nested garbage, unknown methods, clock jumps). Each
sequence runs through :class:`~fsm.sse.observe.ObservedGuard`, and after every event:

* only :class:`~fsm.errors.GuardUsageError` escapes, only for events an embedding
  application produces (never for wire input), and the state is then unchanged;
* the P1-P7 monitor (and bounded L1) records no violation;
* every interaction ends at most once (P5), checked again independently;
* every ``Submit`` carries exactly the answer the user gave for that key, and never
  comes before the ``UserAnswered`` for it (P4, checked independently of the monitor);
* tracked state stays under the configured caps.

CI runs a short profile. Run it long with ``FSM_FUZZ_EXAMPLES=100000``.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from hostile_support import Clock
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fsm import Guard, GuardConfig
from fsm import events as ev
from fsm.actions import Complete, Fail, Present, Submit
from fsm.errors import GuardUsageError
from fsm.outcomes import SubmissionResult
from fsm.sse.guard import LIVE_MARKER
from fsm.sse.observe import ObservedGuard

EXAMPLES = int(os.environ.get("FSM_FUZZ_EXAMPLES", "300"))

# Events only an embedding application produces: the guard may raise GuardUsageError
# for these (and must leave its state unchanged). Wire input never raises.
APP_MISUSE = (
    ev.StreamOpened,
    ev.UserAnswered,
    ev.StreamLost,
    ev.TimerFired,
    ev.StreamResumed,
    ev.ResumeRefused,
    ev.OriginResponse,
)

ids = st.sampled_from(
    [1, 2, 3, "1", "2", 0, -1, 2**63, 10**40, True, False, 1.5, None, [1], {"a": 1}, "x" * 300]
)
good_ids = st.sampled_from([1, 2, 3, "1", "2", 0, 10**40])
methods = st.sampled_from(
    [
        "elicitation/create",
        "sampling/createMessage",
        "ping",
        "roots/list",
        "x/unknown",
        "notifications/cancelled",
        "notifications/progress",
        "",
        7,
    ]
)
garbage = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=8,
)
params = st.one_of(
    st.none(),
    st.builds(lambda m: {"message": m}, st.sampled_from(["Delete 3 files?", "Delete ALL?"])),
    st.just({"message": "Delete 3 files?", "_meta": {LIVE_MARKER: True}}),
    st.builds(lambda r: {"requestId": r, "reason": "timeout"}, ids),
    garbage,
)


@st.composite
def messages(draw: st.DrawFn) -> Any:
    kind = draw(st.sampled_from(["request", "request", "notification", "response", "odd"]))
    msg: dict[str, Any] = {"jsonrpc": draw(st.sampled_from(["2.0", "2.0", "2.0", "1.0"]))}
    if kind == "request":
        msg.update(id=draw(st.one_of(good_ids, ids)), method=draw(methods))
    elif kind == "notification":
        msg["method"] = draw(methods)
    elif kind == "response":
        msg["id"] = draw(st.one_of(st.sampled_from([1, 2, 7, "7"]), ids))
        msg[draw(st.sampled_from(["result", "error"]))] = draw(garbage)
    else:
        msg.update(draw(st.dictionaries(st.sampled_from(["id", "method", "x"]), garbage)))
    p = draw(params)
    if p is not None:
        msg["params"] = p
    return msg


data = st.one_of(
    messages(),
    messages().map(json.dumps),
    messages().map(lambda m: json.dumps(m).encode()),
    st.sampled_from([None, "", b"", "{not json", b"\xff\xfe\x00", "[1,2]", '"s"', "null"]),
    garbage,
)
event_ids = st.one_of(
    st.none(), st.sampled_from(["e1", "e2", "e3", "e4", "e5", "e6", "", "z" * 500])
)
retries = st.one_of(st.none(), st.sampled_from([-1, 0, 50, True, 1.5, "10", 2**70]))


@dataclass(frozen=True)
class Op:
    """One step; stream and key picks are resolved against what exists when it runs."""

    kind: str
    pick: int = 0
    payload: Any = None


def sse(pick: int) -> st.SearchStrategy[Op]:
    return st.builds(
        lambda d, i, r, rep: Op("sse", pick, (d, i, r, rep)),
        data,
        event_ids,
        retries,
        st.one_of(st.none(), st.booleans()),
    )


picks = st.integers(0, 7)
answers = st.one_of(
    st.sampled_from([{"action": "accept", "content": {"confirm": True}}, {"action": "decline"}]),
    st.sampled_from([None, [1], "yes"]),  # not a JSON object: app misuse
)
results = st.builds(
    SubmissionResult,
    status=st.sampled_from([None, 200, 202, 400, 404, 410, 429, 500, 503]),
    body=st.sampled_from(
        [
            None,
            {},
            {"jsonrpc": "2.0", "id": 1, "error": {"code": -32602, "message": "Request not found"}},
        ]
    ),
    error=st.sampled_from([None, "ConnectError", "ReadTimeout"]),
    retry_after=st.sampled_from([None, 0.0, 2.0]),
)
ops = st.one_of(
    picks.flatmap(sse),
    picks.flatmap(sse),
    picks.flatmap(sse),
    st.builds(
        lambda p, items: Op("batch", p, items), picks, st.lists(picks.flatmap(sse), max_size=4)
    ),
    st.builds(lambda p, o: Op("open", p, o), picks, st.sampled_from([1, 2, 7, "7", None])),
    st.builds(lambda p, c: Op("lost", p, c), picks, st.booleans()),
    st.builds(lambda p: Op("timer", p), picks),
    st.builds(lambda p: Op("resumed", p), picks),
    st.builds(
        lambda p, s, e: Op("refused", p, (s, e)),
        picks,
        st.sampled_from([None, 400, 404, 405, 409, 500, 503]),
        st.sampled_from([None, "ConnectError"]),
    ),
    st.builds(lambda p, a: Op("answer", p, a), picks, answers),
    st.builds(lambda p, a: Op("answer", p, a), picks, answers),
    st.builds(lambda p, r: Op("outcome", p, r), picks, results),
    st.builds(lambda p: Op("origin", p), picks),
    st.builds(lambda p: Op("assert", p), picks),
    st.just(Op("expired")),
    st.builds(
        lambda d: Op("clock", 0, d), st.sampled_from([0.0, 0.5, 30.0, 60.0, 61.0, 1e9, -5.0, -1e9])
    ),
)


ON_A_STREAM: dict[str, Any] = {
    "lost": ev.StreamLost,
    "timer": lambda stream, _: ev.TimerFired(stream),
    "resumed": lambda stream, _: ev.StreamResumed(stream),
    "refused": lambda stream, payload: ev.ResumeRefused(stream, *payload),
    "origin": lambda stream, _: ev.OriginResponse(stream),
}
"""The event of each op kind that names a stream, from the stream picked and the payload."""

ON_A_KEY: dict[str, Any] = {
    "answer": ev.UserAnswered,
    "outcome": ev.SubmissionOutcome,
    "assert": lambda key, _: ev.LivenessAsserted(key),
}
"""The event of each op kind that names a request key, from the key picked and the payload."""


class Run:
    """Drive one sequence and check every invariant after every event."""

    def __init__(self) -> None:
        self.clock = Clock()
        self.config = GuardConfig()
        self.og = ObservedGuard(Guard(clock=self.clock, config=self.config))
        self.g = self.og.guard
        self.streams: list[str] = []
        self.opened = 0
        self.presented: list[tuple[str, Any]] = []
        self.accepted: dict[tuple[str, Any], Mapping[str, Any]] = {}
        self.ends: Counter[str] = Counter()
        self.raised = 0
        self.expired = False
        self.idempotent: set[tuple[str, Any]] = set()
        self.interactive: set[tuple[str, Any]] = set()
        self.g.feed(ev.SessionStarted("s1"))

    def stream(self, pick: int) -> str:
        pool = [*self.streams, "ghost"]
        return pool[pick % len(pool)]

    def key(self, pick: int) -> tuple[str, Any]:
        pool = [*self.presented, (self.g.session, 99)]
        return pool[pick % len(pool)]

    def event(self, op: Op) -> ev.Event | None:
        k = op.kind
        if k == "sse":
            d, i, r, rep = op.payload
            return ev.SseEvent(self.stream(op.pick), d, i, r, rep)
        if k == "batch":
            s = self.stream(op.pick)
            return ev.ReplayBatch(s, tuple(ev.SseEvent(s, *o.payload) for o in op.payload))
        if k == "open":
            if self.expired:
                # Documented app contract: after SessionExpired the application starts a
                # new session (a new guard) instead of opening streams on the dead one.
                return None
            live = [s for s in self.streams if self.g.stream_state(s) not in ("done", "dead")]
            if live and op.pick % 2:  # reopen a live stream: app misuse
                return ev.StreamOpened(live[op.pick % len(live)], op.payload)
            self.opened += 1
            name = f"post:{self.opened}" if op.payload is not None else f"get:{self.opened}"
            self.streams.append(name)
            return ev.StreamOpened(name, op.payload)
        if k in ON_A_STREAM:
            return ON_A_STREAM[k](self.stream(op.pick), op.payload)
        if k in ON_A_KEY:
            return ON_A_KEY[k](self.key(op.pick), op.payload)
        if k == "expired":
            return ev.SessionExpired()
        assert k == "clock"
        self.clock.now += op.payload
        return None

    def step(self, op: Op) -> None:
        event = self.event(op)
        if event is None:
            return
        before, told = self.g.snapshot(), self.og.monitor.state
        try:
            actions = self.og.feed(event)
        except GuardUsageError:
            assert isinstance(event, APP_MISUSE), event
            assert self.g.snapshot() == before, "state changed before GuardUsageError"
            self.raised += 1
            # the event was refused as misuse: it did not happen, so the monitor forgets
            # what ObservedGuard told it before the guard raised
            self.og.monitor.state = told
            return
        for a in actions:
            if isinstance(a, Present):
                self.presented.append(a.key)
                if a.method in self.config.idempotent_methods:
                    self.idempotent.add(a.key)
                else:
                    assert a.key not in self.interactive, f"{a.key!r} presented twice"
                    self.interactive.add(a.key)
            elif isinstance(a, Submit):
                assert isinstance(
                    event, ev.UserAnswered | ev.SseEvent | ev.ReplayBatch | ev.SubmissionOutcome
                )
                assert a.key in self.accepted or (
                    isinstance(event, ev.UserAnswered) and event.key == a.key
                ), f"Submit for {a.key!r} before any UserAnswered for it"
                if isinstance(event, ev.UserAnswered) and a.key not in self.accepted:
                    self.accepted[a.key] = event.answer
                assert a.answer == self.accepted[a.key], "answer the user did not give"
            elif isinstance(a, Complete | Fail):
                self.ends[a.interaction] += 1
        if isinstance(event, ev.SessionExpired) or (
            isinstance(event, ev.ResumeRefused) and event.status == 404
        ):
            self.expired = True
        self.check()

    def check(self) -> None:
        assert not self.og.violations, self.og.violations
        assert all(n == 1 for n in self.ends.values()), self.ends
        live, tombstones, streams = self.g.tracked()
        cfg = self.config
        assert 0 <= live <= cfg.max_live_requests
        assert tombstones <= cfg.max_tombstones
        assert streams <= cfg.max_streams
        for stream in self.g._streams.values():
            assert len(stream.history.recent) < cfg.max_seen_event_ids + stream.history.batch
            assert stream.history.count <= cfg.max_event_history


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(st.lists(ops, min_size=1, max_size=40))
def test_arbitrary_event_sequences_keep_every_property(seq: list[Op]) -> None:
    run = Run()
    for op in [Op("open", 0, 7), Op("open", 0, None), *seq]:
        run.step(op)
