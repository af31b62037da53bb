"""The standalone GET stream's connection generations: one interaction each.

A fresh GET after the previous one ended is a new stream under a new name
(:func:`fsm.events.standalone_stream`), so each generation ends once and the monitor
stays quiet; a generation that really ends twice (its name reused) is still P5.
"""

from __future__ import annotations

import pytest
from core_support import SESSION, FakeClock

from fsm import Guard
from fsm import events as ev
from fsm.actions import Fail
from fsm.errors import ResumeBudgetSpentError
from fsm.events import standalone_generation, standalone_stream
from fsm.sse.observe import ObservedGuard


def test_generation_names_round_trip() -> None:
    names = [standalone_stream(g) for g in range(1, 5)]
    assert names == ["get", "get/2", "get/3", "get/4"]
    assert [standalone_generation(n) for n in names] == [1, 2, 3, 4]
    assert standalone_stream() == "get"
    for other in ("post:2", "get/", "get/1", "get/02", "get/x", "get/²", "gets/2", "get#2"):
        assert standalone_generation(other) is None, other
    with pytest.raises(ValueError, match=">= 1"):
        standalone_stream(0)


def _cut_before_any_event_id(og: ObservedGuard, stream: str) -> Fail:
    og.feed(ev.StreamOpened(stream))
    (fail,) = og.feed(ev.StreamLost(stream, clean=False))
    assert isinstance(fail, Fail) and fail.interaction == stream
    assert isinstance(fail.error, ResumeBudgetSpentError) and fail.error.reason == "no-cursor"
    return fail


def test_each_generation_ends_once_and_a_reused_name_is_p5() -> None:
    og = ObservedGuard(Guard(clock=FakeClock()))
    og.feed(ev.SessionStarted(SESSION))
    for generation in range(1, 5):
        _cut_before_any_event_id(og, standalone_stream(generation))
    assert og.violations == []

    # the adapter's former behaviour: a fresh GET tracked under a name that already ended
    _cut_before_any_event_id(og, standalone_stream(2))
    assert [(v.name, v.why) for _, _, v in og.violations] == [("P5", "get/2 ended twice")]
