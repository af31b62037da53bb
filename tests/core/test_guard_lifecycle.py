"""The guard before and between sessions, the limits on streams, and what its usage
errors and stale verdicts say."""

from __future__ import annotations

import pytest
from core_support import POST, SESSION, FakeClock, elicit, make_guard, progress

from fsm import Guard
from fsm import events as ev
from fsm.actions import Fail, Ignore, Present
from fsm.errors import GuardUsageError

K1 = (SESSION, 1)


def test_before_any_session_requests_are_keyed_by_the_empty_session(engine: str) -> None:
    guard = Guard(clock=FakeClock(), engine=engine)  # type: ignore[arg-type]
    assert guard.expired is False and guard.session == ""
    guard.feed(ev.StreamOpened(POST, 7))
    assert guard.feed(ev.SseEvent(POST, elicit(1), "e1")) == (
        Present(("", 1), "elicitation/create", {"message": "Delete 3 files?"}),
    )


def test_a_new_session_is_not_expired(engine: str) -> None:
    guard = make_guard(engine)
    guard.feed(ev.SessionExpired())
    assert guard.expired is True
    guard.feed(ev.SessionStarted("s2"))
    assert guard.expired is False and guard.session == "s2"


def test_usage_errors_say_what_was_wrong(engine: str) -> None:
    guard = make_guard(engine, max_streams=3)
    with pytest.raises(GuardUsageError, match=r"^not a guard event: 'hello'$"):
        guard.feed("hello")  # type: ignore[arg-type]
    with pytest.raises(GuardUsageError, match=r"^stream 'post:7' is already open \(open\)$"):
        guard.feed(ev.StreamOpened(POST, 7))
    guard.feed(ev.StreamOpened("third", None))  # the third live stream: within the limit
    with pytest.raises(GuardUsageError, match=r"^more than max_streams=3 live streams$"):
        guard.feed(ev.StreamOpened("fourth", None))
    with pytest.raises(
        ValueError, match=r"^unknown engine 'fast' \(use 'transitions' or 'tables'\)$"
    ):
        Guard(clock=FakeClock(), engine="fast")  # type: ignore[arg-type]


def test_ignored_redeliveries_name_the_request(engine: str) -> None:
    guard = make_guard(engine)
    guard.feed(ev.SseEvent(POST, elicit(1), "e1"))
    assert guard.feed(ev.SseEvent(POST, elicit(1, "Other?"), "e2")) == (
        Ignore("id-reused", f"{K1!r} redelivered with other method or params", key=K1),
    )
    guard.feed(
        ev.SseEvent(
            POST,
            {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}},
            "e3",
        )
    )
    assert guard.feed(ev.SseEvent(POST, elicit(1), "e4")) == (
        Ignore("request-terminal", f"{K1!r} is cancelled", key=K1),
    )


def test_a_stale_replay_fails_saying_why(engine: str) -> None:
    clock = FakeClock()
    guard = make_guard(engine, clock, request_ttl_s=1.0)
    guard.feed(ev.SseEvent(POST, elicit(1), "e1"))
    clock.advance(5)
    (fail,) = [
        a
        for a in guard.feed(ev.SseEvent(POST, elicit(1), "e1", replayed=True))
        if isinstance(a, Fail)
    ]
    assert str(fail.error) == (
        f"request {K1!r} replayed past its deadline without liveness assertion: "
        "dead, not presented again"
    )


def test_a_loss_before_any_event_id_says_so(engine: str) -> None:
    guard = make_guard(engine)
    (fail,) = [a for a in guard.feed(ev.StreamLost(POST, clean=False)) if isinstance(a, Fail)]
    assert (
        str(fail.error) == f"{POST} lost (abrupt cut) before any event id: nothing to resume from"
    )


def test_a_fresh_stream_is_not_a_resumed_connection(engine: str) -> None:
    guard = make_guard(engine)
    guard.feed(ev.SseEvent(POST, progress(), "e1"))
    assert guard.connection_resumed(POST) is False
