"""Snapshots are canonical and carry everything a restored guard needs: equal decision
states give equal snapshots (the model checker de-duplicates states by them), and a
restored guard resubmits the answer the user gave.
"""

from __future__ import annotations

from typing import Any

from core_support import POST, SESSION, FakeClock, elicit, make_guard

from fsm import LIVE_MARKER, Guard, SubmissionResult
from fsm import events as ev
from fsm.actions import Submit


def _presented(engine: str, ids: list[Any]) -> Guard:
    guard = make_guard(engine)
    for rid in ids:
        guard.feed(ev.SseEvent(POST, elicit(rid)))
    return guard


def test_requests_freeze_in_one_order_whatever_the_delivery_order(engine: str) -> None:
    """(A stream keeps its requests in delivery order: that order decides the order of
    their outcomes, so it is part of the state.)"""
    ids: list[Any] = [1, "1", 2, 10, "b", "a"]
    requests = _presented(engine, ids).snapshot()[2]
    assert _presented(engine, ids[::-1]).snapshot()[2] == requests
    assert _presented(engine, [2, "a", 10, "1", "b", 1]).snapshot()[2] == requests
    assert len(requests) == 6


def _answered(engine: str, answer: dict[str, Any]) -> Guard:
    guard = _presented(engine, [1])
    guard.feed(ev.UserAnswered((SESSION, 1), answer))
    guard.feed(ev.SubmissionOutcome((SESSION, 1), SubmissionResult(202)))
    assert guard.state_of((SESSION, 1)) == "submitted"
    return guard


def test_equal_answers_give_equal_snapshots_whatever_their_key_order(engine: str) -> None:
    one = _answered(engine, {"action": "accept", "content": {"a": 1, "b": 2}})
    other = _answered(engine, {"content": {"b": 2, "a": 1}, "action": "accept"})
    assert one.snapshot() == other.snapshot()


def test_a_restored_guard_resubmits_the_answer_the_user_gave(engine: str) -> None:
    answer = {"action": "accept", "content": {"confirm": True}}
    guard = _answered(engine, answer)
    twin = Guard(clock=FakeClock(), config=guard.config, engine=engine)  # type: ignore[arg-type]
    twin.restore(guard.snapshot())
    live = elicit(1, meta={LIVE_MARKER: True})
    assert twin.feed(ev.SseEvent(POST, live, replayed=True)) == (
        Submit((SESSION, 1), answer, 2, 0.0),
    )
