"""The monitor's memory: its maps, and the bound an online monitor keeps over a session.

A monitor that remembers every interaction of a long-lived session grows with it, and so
does the cost of each of its steps; an online monitor (``retain``) forgets the oldest
ended interactions. These tests pin what is forgotten, what is not, and that memory stays
flat over thousands of tool calls.
"""

from __future__ import annotations

import gc
import pickle
import tracemalloc

import pytest
from core_support import SESSION, FakeClock, elicit, response

from fsm import Guard, GuardConfig, SubmissionResult
from fsm import events as ev
from fsm import properties as P
from fsm.actions import Complete, Present
from fsm.properties import FrozenMap
from fsm.sse.observe import ObservedGuard

# ------------------------------------------------------------------- FrozenMap


def test_frozen_map_equality_and_hash_ignore_insertion_order() -> None:
    a = FrozenMap[str, int]().set("x", 1).set("y", 2)
    b = FrozenMap({"y": 2, "x": 1})
    assert a == b and hash(a) == hash(b)
    assert a.set("x", 3) != a and a["x"] == 1  # set copies; the original is unchanged


def test_frozen_map_refuses_every_mutation() -> None:
    m = FrozenMap({"x": 1})
    for mutate in (
        lambda: m.__setitem__("y", 2),
        lambda: m.__delitem__("x"),
        lambda: m.update(y=2),
        lambda: m.pop("x"),
        lambda: m.popitem(),
        lambda: m.setdefault("y", 2),
        lambda: m.clear(),
    ):
        with pytest.raises(TypeError, match="immutable"):
            mutate()
    assert m == {"x": 1}


def test_frozen_map_pickles_and_drops_keys() -> None:
    m = FrozenMap({("s", 1): "post:1", ("s", 2): "post:2"})
    again = pickle.loads(pickle.dumps(m))
    assert type(again) is FrozenMap and again == m and hash(again) == hash(m)
    assert m.without({("s", 1)}) == {("s", 2): "post:2"}
    assert m.without({("s", 9)}) is m


# ------------------------------------------------------------------- one interaction


def _interaction(og: ObservedGuard, n: int) -> None:
    """Tool call ``n`` on its own stream: a confirmation asked, answered, accepted, done."""
    stream, key = f"post:{n}", (SESSION, f"e{n}")
    og.feed(ev.StreamOpened(stream, origin=n))
    assert Present(key, "elicitation/create", elicit(key[1])["params"]) in og.feed(
        ev.SseEvent(stream, elicit(key[1]), f"{n}-1")
    )
    og.feed(ev.UserAnswered(key, {"action": "accept"}))
    og.feed(ev.SubmissionOutcome(key, SubmissionResult(202)))
    assert any(isinstance(a, Complete) for a in og.feed(ev.SseEvent(stream, response(n), f"{n}-2")))


def _observed(retain: int | None, **bounds: int) -> ObservedGuard:
    config = GuardConfig(max_tombstones=bounds.pop("max_tombstones", 4096))
    og = ObservedGuard(Guard(clock=FakeClock(), config=config), retain=retain, **bounds)
    og.feed(ev.SessionStarted(SESSION))
    return og


def _facts(state: P.MonitorState) -> int:
    return sum(len(v) for v in state if not isinstance(v, bool))


def test_an_unbounded_monitor_remembers_every_interaction() -> None:
    og = _observed(retain=None)
    for n in range(10):
        _interaction(og, n)
    assert len(og.monitor.state.ended) == 10 and len(og.monitor.state.stream_of) == 10
    assert og.violations == []


def test_a_bounded_monitor_forgets_the_oldest_ended_interactions() -> None:
    og = _observed(retain=3)
    for n in range(10):
        _interaction(og, n)
    state = og.monitor.state
    assert state.ended == {"post:7", "post:8", "post:9"} == state.begun
    assert set(state.stream_of.values()) == {"post:7", "post:8", "post:9"}
    assert set(state.newest) == {"post:7", "post:8", "post:9"}
    assert {stream for stream, _ in state.seen} == {"post:7", "post:8", "post:9"}
    assert state.presented == {(SESSION, f"e{n}") for n in (7, 8, 9)} == set(state.answers)
    assert og.violations == []


def test_an_interaction_still_running_is_never_forgotten() -> None:
    og = _observed(retain=1)
    og.feed(ev.StreamOpened("post:100", origin=100))  # begins, never ends
    for n in range(5):
        _interaction(og, n)
    assert og.monitor.finish() == (P.Violation("P5", "post:100 never ended"),)


def test_forgetting_loses_checks_of_the_forgotten_interaction_only() -> None:
    """P2 on a re-presented key: seen while the interaction is remembered, lost after."""
    monitor = P.Monitor(retain=1)
    for n in (1, 2):
        monitor.observe(P.Began(f"post:{n}"))
        monitor.observe(P.Delivered((SESSION, n), f"post:{n}", 0.0))
        monitor.observe(P.Presented((SESSION, n), 0.0))
        monitor.observe(P.Ended(f"post:{n}", "completed"))
    assert [v.name for v in monitor.observe(P.Presented((SESSION, 2), 1.0))] == ["P2"]
    assert monitor.observe(P.Presented((SESSION, 1), 1.0)) == ()  # forgotten with post:1


def test_retain_must_not_be_negative() -> None:
    with pytest.raises(ValueError, match="retain"):
        P.Monitor(retain=-1)


def test_a_long_session_keeps_the_monitor_flat() -> None:
    """Thousands of tool calls with every window bounded (the monitor's, the guard's
    tombstones, the observation log): once they are full, nothing grows."""
    og = _observed(retain=16, max_tombstones=64, log_limit=256)
    tracemalloc.start()  # before the windows fill, so what they replace is traced too
    try:
        for n in range(300):
            _interaction(og, n)
        facts = _facts(og.monitor.state)
        gc.collect()  # cyclic garbage left by earlier tests is not growth of this one
        base = tracemalloc.get_traced_memory()[0]
        for n in range(300, 2_300):
            _interaction(og, n)
        gc.collect()
        grown = tracemalloc.get_traced_memory()[0] - base
    finally:
        tracemalloc.stop()
    assert grown < 64 * 1024, grown  # unbounded, the monitor alone adds ~1 KiB per call
    assert _facts(og.monitor.state) == facts
    assert og.violations == []
