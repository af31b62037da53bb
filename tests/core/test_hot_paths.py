"""The guard's hot paths for SSE events (``on_event``, ``on_plain_notification``) decide
exactly as ``feed`` does, and the small queries adapters ask between events.

The random-sequence comparisons in test_engines_agree.py cover the same ground broadly;
these cases pin each branch with one event.
"""

from __future__ import annotations

from core_support import GET, POST, elicit, make_guard, progress

from fsm import Guard
from fsm import events as ev
from fsm.actions import Ignore, Present


def _twins(engine: str) -> tuple[Guard, Guard]:
    return make_guard(engine), make_guard(engine)


def test_a_repeated_progress_event_is_ignored_as_feed_ignores_it(engine: str) -> None:
    fast, slow = _twins(engine)
    for guard, deliver in ((fast, fast.on_event), (slow, None)):
        for _ in range(2):
            if deliver is not None:
                acts = deliver(POST, "e1", progress())
            else:
                acts = guard.feed(ev.SseEvent(POST, progress(), "e1"))
        assert acts == (Ignore("duplicate-event", "e1", stream=POST),)
        assert guard.cursor(POST) == "e1"


def test_the_id_only_path_moves_the_cursor_and_reports_duplicates(engine: str) -> None:
    guard = make_guard(engine)
    assert guard.on_plain_notification(POST, "e1") == ()
    assert guard.on_plain_notification(POST, "e2") == ()
    assert guard.cursor(POST) == "e2"
    assert guard.on_plain_notification(POST, "e1") == (
        Ignore("duplicate-event", "e1", stream=POST),
    )
    assert guard.cursor(POST) == "e2"  # a replayed id never moves the cursor back
    assert guard.on_plain_notification(POST, None) == ()


def test_the_id_only_path_declines_streams_it_cannot_judge(engine: str) -> None:
    guard = make_guard(engine)
    assert guard.on_plain_notification("nowhere", "e1") is None
    assert guard.cursor("nowhere") is None
    guard.feed(ev.SseEvent(POST, progress(), "e1"))
    guard.feed(ev.StreamLost(POST, clean=False))
    assert guard.on_plain_notification(POST, "e2") is None  # waiting, not open
    assert guard.cursor(POST) == "e1"


def test_a_request_through_the_hot_path_is_presented_and_its_id_kept(engine: str) -> None:
    guard = make_guard(engine)
    acts = guard.on_event(POST, "e7", elicit(1))
    assert [type(a) for a in acts] == [Present]
    assert guard.cursor(POST) == "e7"
    assert guard.on_event(POST, "e7", elicit(1)) == guard.feed(ev.SseEvent(POST, elicit(1), "e7"))


def test_a_notification_on_a_stream_not_open_goes_through_feed(engine: str) -> None:
    guard = make_guard(engine)
    assert guard.on_event("nowhere", "e1", progress()) == (
        Ignore("unknown-stream", "event on unknown stream 'nowhere'", stream="nowhere"),
    )


def test_connection_resumed_is_true_only_on_a_resumed_connection(engine: str) -> None:
    guard = make_guard(engine)
    assert not guard.connection_resumed("nowhere")
    guard.feed(ev.SseEvent(GET, progress(), "g1"))
    assert not guard.connection_resumed(GET)
    guard.feed(ev.StreamLost(GET, clean=False))
    guard.feed(ev.TimerFired(GET))
    assert not guard.connection_resumed(GET)  # resuming, not yet reconnected
    guard.feed(ev.StreamResumed(GET))
    assert guard.connection_resumed(GET)
    assert not guard.connection_resumed(POST)
    guard.feed(ev.StreamLost(GET, clean=False))
    assert not guard.connection_resumed(GET)
