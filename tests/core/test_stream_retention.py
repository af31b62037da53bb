"""How many ended streams a guard remembers (``GuardConfig.max_ended_streams``): the
newest that many, the library's default as many as ``max_streams`` leaves room for."""

from __future__ import annotations

import pytest

from fsm import Guard, GuardConfig
from fsm import events as ev


def _ended(guard: Guard, n: int) -> list[str]:
    """Open and end ``n`` streams (each its origin's response); their names."""
    guard.feed(ev.SessionStarted("s"))
    names = []
    for rid in range(1, n + 1):
        name = f"post:{rid}"
        guard.feed(ev.StreamOpened(name, rid))
        guard.feed(ev.SseEvent(name, {"jsonrpc": "2.0", "id": rid, "result": {}}, f"e{rid}"))
        assert guard.stream_state(name) == "done"
        names.append(name)
    return names


def test_only_the_newest_ended_streams_are_remembered() -> None:
    guard = Guard(clock=lambda: 0.0, config=GuardConfig(max_ended_streams=2))
    names = _ended(guard, 6)
    guard.feed(ev.StreamOpened("get"))  # a new stream makes the guard forget
    remembered = [n for n in names if guard.stream_state(n) is not None]
    assert remembered == names[-2:]


def test_by_default_ended_streams_stay_until_room_is_needed() -> None:
    guard = Guard(clock=lambda: 0.0, config=GuardConfig(max_streams=4))
    names = _ended(guard, 6)
    guard.feed(ev.StreamOpened("get"))
    assert [n for n in names if guard.stream_state(n) is not None] == names[-3:]
    guard = Guard(clock=lambda: 0.0)
    names = _ended(guard, 6)
    guard.feed(ev.StreamOpened("get"))
    assert all(guard.stream_state(n) == "done" for n in names)


def test_a_negative_bound_is_refused() -> None:
    with pytest.raises(ValueError, match="max_ended_streams"):
        GuardConfig(max_ended_streams=-1)
