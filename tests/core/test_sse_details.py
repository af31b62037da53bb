"""Details of how one SSE event is taken: the ``retry:`` field (0 is valid), priming
events, the replay flag inferred from a resumed connection, a request cancelled later in
its own replay batch, and the transitions reported to an ``on_fire`` observer."""

from __future__ import annotations

import core_support as cs
import pytest

from fsm import Guard, GuardConfig
from fsm import events as ev
from fsm.actions import Fail, Ignore, Present, Wait, Withdraw
from fsm.errors import RequestCancelledError, StaleRequestError

K1 = (cs.SESSION, 1)


def test_a_retry_of_zero_means_resume_at_once(engine: str) -> None:
    guard = cs.make_guard(engine)
    assert guard.feed(ev.SseEvent(cs.POST, None, "e1", retry_ms=0)) == ()
    assert guard.feed(ev.StreamLost(cs.POST, clean=False)) == (Wait(cs.POST, 0.0),)


def test_a_bad_retry_is_ignored_naming_the_stream_and_value(engine: str) -> None:
    guard = cs.make_guard(engine)
    assert guard.feed(ev.SseEvent(cs.POST, None, "e1", retry_ms=-1)) == (
        Ignore("bad-retry", "retry: -1", stream=cs.POST),
    )


@pytest.mark.parametrize("data", ["", b"", None])
def test_a_priming_event_only_moves_the_cursor(engine: str, data: object) -> None:
    guard = cs.make_guard(engine)
    assert guard.feed(ev.SseEvent(cs.POST, data, "e1")) == ()  # type: ignore[arg-type]
    assert guard.cursor(cs.POST) == "e1"


def test_events_on_a_resumed_connection_count_as_replays(engine: str) -> None:
    clock = cs.FakeClock()
    guard = cs.make_guard(engine, clock, request_ttl_s=10.0)
    assert [type(a) for a in guard.feed(ev.SseEvent(cs.POST, cs.elicit(1), "e1"))] == [Present]
    guard.feed(ev.StreamLost(cs.POST, clean=False))
    guard.feed(ev.TimerFired(cs.POST))
    guard.feed(ev.StreamResumed(cs.POST))
    clock.advance(60)
    acts = guard.feed(ev.SseEvent(cs.POST, cs.elicit(1), "e1"))  # replayed is left to the guard
    assert [type(a) for a in acts] == [Withdraw, Fail]
    assert isinstance(acts[1].error, StaleRequestError)  # type: ignore[union-attr]


def test_a_request_cancelled_later_in_its_batch_fails_as_cancelled(engine: str) -> None:
    guard = cs.make_guard(engine)
    batch = ev.ReplayBatch(
        cs.GET, (ev.SseEvent(cs.GET, cs.elicit(1), "g1"), ev.SseEvent(cs.GET, cs.cancel(1), "g2"))
    )
    acts = guard.feed(batch)
    (fail,) = [a for a in acts if isinstance(a, Fail)]
    assert not [a for a in acts if isinstance(a, Present)]
    assert isinstance(fail.error, RequestCancelledError)
    assert fail.error.key == K1 and fail.error.evidence == ()
    assert str(fail.error) == f"{K1!r} cancelled (cancel)"


def test_every_transition_is_reported_to_on_fire(engine: str) -> None:
    fired: list[tuple[str, str, str, str]] = []
    guard = Guard(
        clock=cs.FakeClock(),
        config=GuardConfig(),
        engine=engine,  # type: ignore[arg-type]
        on_fire=lambda *t: fired.append(t),
    )
    guard.feed(ev.SessionStarted(cs.SESSION))
    guard.feed(ev.StreamOpened(cs.POST, 7))
    guard.feed(ev.SseEvent(cs.POST, cs.elicit(1), "e1"))
    guard.feed(ev.SseEvent(cs.POST, cs.progress(), "e2"))
    guard.feed(ev.StreamLost(cs.POST, clean=False))
    assert fired == [
        ("liveness", "new", "present", "presented"),
        ("transport", "open", "lose", "broken"),
        ("transport", "broken", "schedule", "waiting"),
    ]


def test_a_response_under_an_event_id_already_seen_is_a_replay(engine: str) -> None:
    guard = cs.make_guard(engine)
    guard.feed(ev.SseEvent(cs.POST, cs.progress(), "e1"))
    response = {"jsonrpc": "2.0", "id": 7, "result": {}}
    assert guard.feed(ev.SseEvent(cs.POST, response, "e1")) == (
        Ignore("duplicate-event", "e1", stream=cs.POST),
    )
    assert guard.stream_state(cs.POST) == "open"


def test_a_foreign_response_and_a_malformed_message_name_their_stream(engine: str) -> None:
    guard = cs.make_guard(engine)
    foreign = {"jsonrpc": "2.0", "id": 99, "result": {}}
    assert guard.feed(ev.SseEvent(cs.POST, foreign, "e1")) == (
        Ignore("foreign-response", f"response id 99 was never sent on {cs.POST}", stream=cs.POST),
    )
    (bad,) = guard.feed(ev.SseEvent(cs.POST, "{not json", "e2"))
    assert isinstance(bad, Ignore) and (bad.reason, bad.stream) == ("malformed", cs.POST)
