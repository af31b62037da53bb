"""A transitions-engine guard and a tables-engine guard decide identically on the same
random event sequences, and the hot paths (``on_event``, ``on_plain_notification``)
decide like ``feed``."""

from __future__ import annotations

import dataclasses
import json
import os
import random
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import core_support as cs

from fsm import Guard, SubmissionResult
from fsm import events as ev
from fsm.actions import Present
from fsm.errors import GuardUsageError
from fsm.messages import is_plain_notification

STREAMS = {cs.POST: cs.ORIGIN, cs.GET: None, "post:8": 8}
RESULTS = [
    SubmissionResult(202),
    SubmissionResult(200),
    SubmissionResult(503),
    SubmissionResult(429, retry_after=2.0),
    SubmissionResult(None, error="ReadTimeout"),
    SubmissionResult(410),
    SubmissionResult(404),
    SubmissionResult(500, {"error": {"code": -32602, "message": "Request not found"}}),
]


def random_step(rng: random.Random, n: int) -> tuple[float, Any]:
    """One (clock advance, event) pair."""
    sid = rng.choice(list(STREAMS))
    rid = rng.randint(1, 4)
    key = (cs.SESSION, rid)
    eid = f"{sid}-{rng.randint(0, n)}"  # ids repeat: duplicates and replays
    replayed = rng.choice([None, True, False])
    kind = rng.randrange(17)
    event: Any
    if kind <= 2:
        event = ev.SseEvent(sid, cs.elicit(rid), eid, replayed=replayed)
    elif kind == 3:
        event = ev.SseEvent(sid, cs.cancel(rid), eid, replayed=replayed)
    elif kind == 4:
        event = ev.SseEvent(sid, cs.progress(), eid, retry_ms=rng.choice([None, 200]))
    elif kind == 5:
        event = ev.SseEvent(sid, cs.response(rng.choice([cs.ORIGIN, 8, "7"])), eid)
    elif kind == 6:
        event = ev.StreamLost(sid, clean=rng.random() < 0.5)
    elif kind == 7:
        event = ev.TimerFired(sid)
    elif kind == 8:
        event = ev.StreamResumed(sid)
    elif kind == 9:
        event = ev.ResumeRefused(sid, status=rng.choice([503, 405, None, 404, 404, 503]))
    elif kind in (10, 11):
        event = ev.UserAnswered(key, {"action": "accept", "n": rid})
    elif kind == 12:
        event = ev.SubmissionOutcome(key, rng.choice(RESULTS))
    elif kind == 13:
        event = ev.LivenessAsserted(key)
    elif kind == 14:
        batch = tuple(
            ev.SseEvent(
                sid,
                rng.choice([cs.elicit(rng.randint(1, 6)), cs.cancel(rng.randint(1, 6))]),
                f"{sid}-b{rng.randint(0, n)}",
            )
            for _ in range(rng.randint(1, 4))
        )
        event = ev.ReplayBatch(sid, batch)
    elif kind == 15:
        event = ev.StreamOpened(sid, STREAMS[sid])
    else:
        event = ev.SessionExpired() if rng.random() < 0.2 else ev.OriginResponse(sid)
    return rng.choice([0.0, 0.0, 1.0, 25.0]), event


def run(
    guard: Guard,
    clock: cs.FakeClock,
    steps: list[tuple[float, Any]],
    feed: Callable[[Guard, Any], tuple[Any, ...]],
) -> list[Any]:
    trace: list[Any] = []
    for advance, event in steps:
        clock.advance(advance)
        before = guard.snapshot()
        try:
            trace.append(cs.normalise(feed(guard, event)))
        except GuardUsageError as exc:
            assert guard.snapshot() == before, "a usage error must leave the state unchanged"
            trace.append(("raised", type(exc).__name__, str(exc)))
        except Exception as exc:  # compared, not hidden: both sides must raise alike
            trace.append(("raised", type(exc).__name__, str(exc)))
        trace.append(guard.snapshot())
    return trace


def plain_feed(guard: Guard, event: Any) -> tuple[Any, ...]:
    return guard.feed(event)


def full_feed(guard: Guard, event: Any) -> tuple[Any, ...]:
    """``feed`` with every event's message as its JSON text: the guard decodes it and
    decides through its handlers, never a hot path (the reference of the others)."""
    if isinstance(event, ev.SseEvent) and isinstance(event.data, dict):
        event = dataclasses.replace(event, data=json.dumps(event.data))
    return guard.feed(event)


def _plain_sse(event: Any) -> bool:
    """An SSE event a hot path may take: no ``retry:`` field, no replay flag."""
    return isinstance(event, ev.SseEvent) and event.retry_ms is None and event.replayed is None


def hot_path_feed(guard: Guard, event: Any) -> tuple[Any, ...]:
    if _plain_sse(event) and isinstance(event.data, dict):
        return guard.on_event(event.stream, event.event_id, event.data)
    return guard.feed(event)


def plain_notification_feed(guard: Guard, event: Any) -> tuple[Any, ...]:
    if _plain_sse(event) and is_plain_notification(event.data):
        actions = guard.on_plain_notification(event.stream, event.event_id)
        if actions is not None:
            return actions
    return guard.feed(event)


def scenario(seed: int, n: int = 60) -> list[tuple[float, Any]]:
    """``n`` random steps; one in eight is an outage on one stream (lost, timer, resumed),
    so resume budgets are in play when later events arrive (rare from single steps)."""
    rng = random.Random(seed)
    steps: list[tuple[float, Any]] = []
    while len(steps) < n:
        if rng.random() < 0.125:
            sid = rng.choice(list(STREAMS))
            steps += [
                (0.0, ev.StreamLost(sid, clean=rng.random() < 0.5)),
                (1.0, ev.TimerFired(sid)),
                (0.0, ev.StreamResumed(sid)),
            ]
        else:
            steps.append(random_step(rng, n))
    return steps


def _new(engine: str) -> tuple[Guard, cs.FakeClock]:
    clock = cs.FakeClock()
    guard = cs.make_guard(
        engine,
        clock,
        streams=list(STREAMS.items()),
        request_ttl_s=30.0,
        max_resumes_without_progress=2,
        max_submit_attempts=2,
        max_live_requests=3,
        max_tombstones=4,
    )
    return guard, clock


def test_transitions_and_tables_engines_decide_identically() -> None:
    kinds: Counter[str] = Counter()
    for seed in range(150):
        steps = scenario(seed)
        a, clock_a = _new("transitions")
        b, clock_b = _new("tables")
        trace_a = run(a, clock_a, steps, plain_feed)
        trace_b = run(b, clock_b, steps, plain_feed)
        assert trace_a == trace_b, f"seed {seed}"
        for item in trace_a[::2]:
            if isinstance(item, tuple):
                kinds["raised:" + item[1]] += 1
            else:
                kinds.update(type(x).__name__ if not isinstance(x, tuple) else x[0] for x in item)
    # the sequences exercise every kind of decision, so the comparison is not vacuous
    for kind in (
        "Present",
        "Withdraw",
        "Submit",
        "Resume",
        "Wait",
        "Fail",
        "Complete",
        "Ignore",
        "Refuse",
        "raised:GuardUsageError",
    ):
        assert kinds[kind] > 0, (kind, kinds)


def _agrees_with_feed(alternative: Any, first_seed: int, counted: Any) -> int:
    """Run 150 scenarios through ``feed`` and through ``alternative`` on two guards; assert
    identical traces; return how many events ``counted`` (the path under test) selects."""
    taken = 0
    for seed in range(150):
        steps = scenario(first_seed + seed)
        a, clock_a = _new("tables")
        b, clock_b = _new("tables")
        assert run(a, clock_a, steps, full_feed) == run(b, clock_b, steps, alternative), seed
        taken += sum(
            isinstance(e, ev.SseEvent) and e.retry_ms is None and bool(counted(e.data))
            for _, e in steps
        )
    return taken


def test_hot_path_decides_like_feed() -> None:
    assert _agrees_with_feed(hot_path_feed, 1000, lambda data: data == cs.progress()) > 150


def test_id_only_path_decides_like_feed() -> None:
    assert _agrees_with_feed(plain_notification_feed, 3000, is_plain_notification) > 150


def test_feed_of_a_decoded_notification_decides_like_the_full_path() -> None:
    assert _agrees_with_feed(plain_feed, 5000, is_plain_notification) > 150


def test_no_interactive_key_is_presented_twice_on_random_sequences() -> None:
    """P2 on both engines (default caps: no tombstone is evicted with six ids)."""
    for engine in ("transitions", "tables"):
        for seed in range(100):
            clock = cs.FakeClock()
            guard = cs.make_guard(engine, clock, streams=list(STREAMS.items()), request_ttl_s=30.0)
            seen: set[Any] = set()
            for advance, event in scenario(2000 + seed):
                clock.advance(advance)
                try:
                    acts = guard.feed(event)
                except Exception:
                    continue
                for act in acts:
                    if isinstance(act, Present):
                        assert act.key not in seen, (engine, seed, act)
                        seen.add(act.key)


_SNAPSHOT_SCRIPT = """
import ast, sys
from core_support import FakeClock, POST, elicit, make_guard
from fsm import events as ev
clock = FakeClock()
guard = make_guard(clock=clock, request_ttl_s=1.0)
if sys.argv[1] == "save":
    guard.feed(ev.SseEvent(POST, elicit(1), "e1"))
    print(repr(guard.snapshot()))
else:
    guard.restore(ast.literal_eval(sys.stdin.read()))
    clock.now = 5.0
    acts = guard.feed(ev.SseEvent(POST, elicit(1), "e1", replayed=True))
    print(" ".join(type(a).__name__ + ":" + getattr(a, "reason", "") for a in acts))
"""


def test_snapshot_restored_in_another_process_decides_the_same() -> None:
    here = Path(__file__).resolve().parent
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(here.parents[1]), str(here)]))

    def run_script(mode: str, seed: str, stdin: str = "") -> str:
        proc = subprocess.run(
            [sys.executable, "-c", _SNAPSHOT_SCRIPT, mode],
            input=stdin,
            env={**env, "PYTHONHASHSEED": seed},
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        return proc.stdout.strip()

    snap = run_script("save", "1")
    # the same hash seed decides like the saving process: stale, so withdrawn and failed
    assert run_script("load", "1", snap) == "Withdraw:stale-request Fail:"
    assert run_script("load", "2", snap) == "Withdraw:stale-request Fail:"
