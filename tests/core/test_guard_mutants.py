"""The SSE guard's exact outputs (``fsm/sse/guard.py``), pinned where ``make mutate`` found
them unpinned: an abandoned stream's failure and the abandonment of one already ended,
a renaming that renames a failure's key everywhere it is named, a restarted stream's
wait (its own retry) and cursor, whatever state it was in, or its end without a cursor;
a question without params reshown, an answer lost to the restart; the patience's last
wait under a second and the refusals it counts; the re-asks a question is resubmitted
for, and the failure after them, naming the question; what a snapshot and a delta keep
(an expired session, when a request was shown and whether it was asserted, a question
without params, the streams dropped), a durable guard's writes (an expiry with nothing
live, none for an event that changes nothing), and a session expiry over ended requests."""

from __future__ import annotations

from typing import Any

import pytest

from fsm import events as ev
from fsm.actions import Action, Fail, Ignore, Persist, Reshown, Resume, Submit, Wait
from fsm.errors import (
    QuestionReaskedError,
    SessionExpiredError,
    StaleRequestError,
    StreamAbandonedError,
)
from fsm.machines.product import Cause
from fsm.questions import question_id
from fsm.sse.guard import (
    Guard,
    GuardConfig,
    GuardSnapshot,
    KeyRenaming,
    Question,
    RequestRecord,
    SseDelta,
    SseStored,
    StreamRecord,
)

ASK = {"jsonrpc": "2.0", "id": 1, "method": "elicitation/create", "params": {"message": "Go?"}}


def test_an_abandoned_stream_fails_once_then_is_ignored_by_name() -> None:
    guard = Guard(clock=lambda: 0.0)
    guard.feed(ev.SessionStarted("s"))
    guard.feed(ev.StreamOpened("get"))
    (fail,) = guard.feed(ev.StreamAbandoned("get"))
    assert isinstance(fail, Fail) and isinstance(fail.error, StreamAbandonedError)
    assert str(fail.error) == "get abandoned (the application stopped following it)"
    assert fail.error.evidence == ("the application stopped following it",)
    assert guard.feed(ev.StreamAbandoned("get", detail="again")) == (
        Ignore("stream-terminal", "get is dead", stream="get"),
    )


def test_a_renaming_renames_a_causes_key_message_and_evidence() -> None:
    renaming = KeyRenaming({("s", 1): ("s", 2)})
    cause = Cause(StaleRequestError, "('s', 1) is stale", ("s", 1), ("key ('s', 1)", "t=3"))
    assert renaming.cause(cause) == Cause(
        StaleRequestError, "('s', 2) is stale", ("s", 2), ("key ('s', 2)", "t=3")
    )
    unkeyed = Cause(StaleRequestError, "the stream died", None, ())
    assert renaming.cause(unkeyed) == unkeyed
    assert renaming.cause(None) is None


def _durable_guard_asked(*, lost: bool) -> tuple[Guard, SseStored]:
    """A durable guard whose stream post:2 (retry 3 s) showed one question, its store."""
    guard = Guard(clock=lambda: 0.0, config=GuardConfig(durable=True))
    stored = SseStored(GuardSnapshot("", (), (), False))
    events: list[ev.Event] = [
        ev.SessionStarted("s1"),
        ev.StreamOpened("post:2", origin=2),
        ev.SseEvent("post:2", ASK, "e1", retry_ms=3000),
    ]
    if lost:
        events.append(ev.StreamLost("post:2", False))
    for event in events:
        for action in guard.feed(event):
            if isinstance(action, Persist):
                assert isinstance(action.delta, SseDelta)
                stored = stored.apply(action.delta)
    return Guard(clock=lambda: 0.0, config=GuardConfig(durable=True)), stored


@pytest.mark.parametrize("lost", [False, True], ids=["open", "waiting"])
def test_a_live_stream_restarts_waiting_its_retry_then_resumes_from_its_cursor(
    lost: bool,
) -> None:
    fresh, stored = _durable_guard_asked(lost=lost)
    actions = fresh.restart(stored)
    assert actions[1:] == (
        Wait("post:2", 3.0),
        Reshown(("s1", 1), "elicitation/create", {"message": "Go?"}),
    )
    assert fresh.feed(ev.TimerFired("post:2")) == (Resume("post:2", "e1"),)


def test_the_config_refuses_a_negative_window_or_patience_by_name() -> None:
    GuardConfig(max_ended_streams=0)  # keep no ended stream: allowed
    with pytest.raises(
        ValueError,
        match=r"^GuardConfig.max_ended_streams: -1 is not an integer >= 0 or None \(no limit\)$",
    ):
        GuardConfig(max_ended_streams=-1)
    with pytest.raises(
        ValueError, match=r"^GuardConfig.resume_patience_s: nan is not a number >= 0$"
    ):
        GuardConfig(resume_patience_s=float("nan"))


@pytest.mark.parametrize(
    ("draw", "delay"),
    [(0.0, 0.5), (0.5, 0.75), (1.0, 1.0), (1.5, 1.0), (-0.1, 1.0), (float("nan"), 1.0)],
    ids=["none", "half", "all", "above-1", "below-0", "nan"],
)
def test_a_patient_delay_spreads_half_its_step_by_the_draw_else_takes_it_whole(
    draw: float, delay: float
) -> None:
    """Equal jitter over a 1 s step: a draw outside [0, 1] (or NaN) gives the whole step."""
    config = GuardConfig(resume_jitter=lambda: draw)
    assert config.patient_delay(0, None, None) == delay


def _req(key: tuple[str, int | str]) -> RequestRecord:
    return RequestRecord(key, "post:1", "elicitation/create", 0, 10.0, "presented", None, 0,
                         0.0, False, False, None)  # fmt: skip


def _stream(name: str) -> StreamRecord:
    return StreamRecord(name, 1, "open", None, (), 0, 0, None, False, False, None, ())


def test_a_stored_delta_drops_and_forgets_by_name_even_what_is_not_stored() -> None:
    """Dropped streams and forgotten keys go, absent ones are no error; records and open
    questions come back in key order, numeric ids before string ids."""
    num, text = ("s1", 2), ("s1", "a")
    stored = SseStored(GuardSnapshot("s1", (_stream("a"), _stream("b")), (_req(num),), False))
    delta = SseDelta(
        "s1",
        False,
        (),
        (_req(text), _req(num)),
        questions=(Question(text, "elicitation/create", None), Question(num, "m", None)),
        forgotten=(("s1", 99),),
        dropped=("a", "gone"),
    )
    after = stored.apply(delta)
    assert [s.id for s in after.snapshot.streams] == ["b"]
    assert [r.key for r in after.snapshot.requests] == [num, text]
    assert [q.key for q in after.questions] == [num, text]


def test_a_stream_record_keeps_its_resume_end_and_cause_and_a_delta_no_history() -> None:
    """The snapshot's record of a resumed then abandoned stream says so, with its history;
    the record a durable guard persists has the cursor alone."""
    guard = Guard(clock=lambda: 0.0, config=GuardConfig(durable=True))
    persisted: list[StreamRecord] = []
    for event in (
        ev.SessionStarted("s1"),
        ev.StreamOpened("post:1", origin=1),
        ev.SseEvent("post:1", ASK, "e1"),
        ev.StreamLost("post:1", False),
        ev.TimerFired("post:1"),
        ev.StreamResumed("post:1"),
        ev.StreamAbandoned("post:1"),
    ):
        for action in guard.feed(event):
            if isinstance(action, Persist):
                assert isinstance(action.delta, SseDelta)
                persisted += action.delta.streams
    (record,) = guard.snapshot().streams
    assert (record.state, record.cursor, record.resumed, record.ended) == ("dead", "e1", True, True)
    assert record.cause is not None and record.cause.reason == "abandoned"
    assert record.history and all(r.history == () for r in persisted)
    assert persisted[-1] == record._replace(history=())


def test_a_restarted_stream_knows_its_cursor_event_as_seen() -> None:
    """The store keeps no history, only the cursor: the server's replay of the cursor's
    own event after the resume is a duplicate, the next one is new."""
    fresh, stored = _durable_guard_asked(lost=False)
    fresh.restart(stored)
    assert fresh.feed(ev.TimerFired("post:2")) == (Resume("post:2", "e1"),)
    assert fresh.feed(ev.StreamResumed("post:2")) == ()
    progress = {"jsonrpc": "2.0", "method": "notifications/progress", "params": {}}
    assert fresh.feed(ev.SseEvent("post:2", progress, "e1")) == (
        Ignore("duplicate-event", "e1", stream="post:2"),
    )
    assert fresh.feed(ev.SseEvent("post:2", progress, "e2")) == ()


def test_a_notification_marked_replayed_is_checked_against_the_whole_history() -> None:
    """Past the live window only an event marked ``replayed`` is checked against every
    id the stream carried (feed's shortcut for a notification would check the window)."""
    progress = {"jsonrpc": "2.0", "method": "notifications/progress", "params": {}}
    duplicate = (Ignore("duplicate-event", "e1", stream="get"),)
    for replayed, expected in ((True, duplicate), (None, ())):
        guard = Guard(clock=lambda: 0.0, config=GuardConfig(max_seen_event_ids=2))
        guard.feed(ev.SessionStarted("s1"))
        guard.feed(ev.StreamOpened("get"))
        for n in range(1, 6):
            guard.feed(ev.SseEvent("get", progress, f"e{n}"))
        assert guard.feed(ev.SseEvent("get", progress, "e1", replayed=replayed)) == expected


def test_a_durable_guard_persists_a_new_session_and_a_change_to_a_stream_alone() -> None:
    guard = Guard(clock=lambda: 0.0, config=GuardConfig(durable=True))
    assert guard.feed(ev.SessionStarted("s1")) == (Persist(SseDelta("s1", False, (), ())),)
    (persist,) = guard.feed(ev.StreamOpened("get"))
    assert isinstance(persist, Persist) and isinstance(persist.delta, SseDelta)
    assert [s.id for s in persist.delta.streams] == ["get"] and persist.delta.requests == ()


def _ask(rid: int | str) -> dict[str, object]:
    return {"jsonrpc": "2.0", "id": rid, "method": "elicitation/create", "params": {"n": rid}}


def test_an_expired_session_persists_every_request_ended_in_key_order() -> None:
    """One delta: the session expired, each request ended, numeric ids before strings."""
    guard = Guard(clock=lambda: 0.0, config=GuardConfig(durable=True))
    guard.feed(ev.SessionStarted("s1"))
    guard.feed(ev.StreamOpened("get"))
    guard.feed(ev.SseEvent("get", _ask("a"), "e1"))
    guard.feed(ev.SseEvent("get", _ask(2), "e2"))
    persist = guard.feed(ev.SessionExpired())[0]
    assert isinstance(persist, Persist) and isinstance(persist.delta, SseDelta)
    assert persist.delta.expired is True
    assert [r.key for r in persist.delta.requests] == [("s1", 2), ("s1", "a")]
    assert all(r.ended is True and r.state == "dead" for r in persist.delta.requests)


def _restarted(events: list[ev.Event], **config: Any) -> tuple[Guard, tuple[Action, ...]]:
    """A fresh guard restarted from the whole snapshot of one fed ``events`` (session
    s1, stream post:2 opened first), and what the restart returned."""
    guard = Guard(clock=lambda: 0.0, config=GuardConfig(**config))
    for event in [ev.SessionStarted("s1"), ev.StreamOpened("post:2", origin=2), *events]:
        guard.feed(event)
    fresh = Guard(clock=lambda: 0.0, config=GuardConfig(**config))
    return fresh, fresh.restart(SseStored(guard.snapshot()))


LOST = [ev.SseEvent("post:2", ASK, "e1", retry_ms=3000), ev.StreamLost("post:2", False)]


@pytest.mark.parametrize(
    "events",
    [
        LOST,
        [*LOST, ev.TimerFired("post:2")],
        [*LOST, ev.TimerFired("post:2"), ev.StreamResumed("post:2")],
    ],
    ids=["waiting", "resuming", "resumed"],
)
def test_a_stream_live_in_any_state_restarts_waiting_its_retry_on_no_resumed_connection(
    events: list[ev.Event],
) -> None:
    fresh, actions = _restarted(events)
    assert actions == (Wait("post:2", 3.0),)
    assert fresh.connection_resumed("post:2") is False


def test_a_stream_without_a_cursor_ends_at_a_restart_saying_so() -> None:
    _, actions = _restarted([])
    (fail,) = actions
    assert isinstance(fail, Fail)
    assert str(fail.error) == (
        "post:2 lost (client restart) before any event id: nothing to resume from"
    )
    assert fail.error.evidence == ("client restart", "no event id seen")


def test_a_question_without_params_is_reshown_without_params() -> None:
    bare = {"jsonrpc": "2.0", "id": 1, "method": "elicitation/create"}
    guard = Guard(clock=lambda: 0.0, config=GuardConfig(durable=True))
    stored = SseStored(GuardSnapshot("", (), (), False))
    for event in (ev.SessionStarted("s1"), ev.StreamOpened("post:2", origin=2)):
        guard.feed(event)
    for action in guard.feed(ev.SseEvent("post:2", bare, "e1")):
        if isinstance(action, Persist):
            assert isinstance(action.delta, SseDelta)
            stored = stored.apply(action.delta)
    actions = Guard(clock=lambda: 0.0, config=GuardConfig(durable=True)).restart(stored)
    assert Reshown(("s1", 1), "elicitation/create", None) in actions


def test_an_answer_in_flight_at_a_restart_fails_as_lost_to_the_restart() -> None:
    answer = ev.UserAnswered(("s1", 1), {"action": "accept"})
    _, actions = _restarted([ev.SseEvent("post:2", ASK, "e1"), answer], max_submit_attempts=1)
    (fail,) = [a for a in actions if isinstance(a, Fail)]
    assert str(fail.error) == (
        "answer for ('s1', 1) failed 1 times (last: no response (client-restart)"
        " -> transport-error (retryable))"
    )


def _refused(patience: float) -> tuple[Action, ...]:
    """What a guard with ``patience`` answers the first refusal of a server that still
    holds the connection it lost (stream post:2, cursor e1)."""
    config = GuardConfig(resume_patience_s=patience, resume_jitter=lambda: 1.0)
    guard = Guard(clock=lambda: 0.0, config=config)
    for event in [ev.SessionStarted("s1"), ev.StreamOpened("post:2", origin=2), *LOST]:
        guard.feed(event)
    assert guard.feed(ev.TimerFired("post:2")) == (Resume("post:2", "e1"),)
    return guard.feed(ev.ResumeRefused("post:2", 409))


def test_patience_under_a_second_still_waits_what_is_left() -> None:
    assert _refused(0.5) == (Wait("post:2", 0.5),)


def test_spent_patience_counts_the_refusals_in_its_evidence() -> None:
    fail = _refused(0.0)[0]  # then the question it carried is withdrawn
    assert isinstance(fail, Fail)
    assert fail.error.evidence[1:] == (
        "1 refusals of a server holding the old connection",
        "cursor e1",
    )


def test_a_question_is_resubmitted_max_reasks_times_then_fails_the_call_once() -> None:
    guard = Guard(clock=lambda: 0.0, config=GuardConfig(max_reasks=2))
    guard.feed(ev.SessionStarted("s1"))
    guard.feed(ev.StreamOpened("post:2", origin=2))
    guard.feed(ev.SseEvent("post:2", ASK, "e1"))
    guard.feed(ev.UserAnswered(("s1", 1), {"action": "accept"}))
    for rid in (2, 3):  # the stored answer, never a second prompt
        assert guard.feed(ev.SseEvent("post:2", {**ASK, "id": rid}, f"e{rid}")) == (
            Submit(("s1", rid), {"action": "accept"}, 1, 0.0),
        )
    (fail,) = guard.feed(ev.SseEvent("post:2", {**ASK, "id": 4}, "e4"))
    assert isinstance(fail, Fail) and isinstance(fail.error, QuestionReaskedError)
    qid = question_id("elicitation/create", {"message": "Go?"})  # method and params
    assert str(fail.error) == (
        f"the server asked {qid} again under ('s1', 4) after ('s1', 1) was answered;"
        " the user is not asked twice"
    )
    assert fail.error.evidence[1] == "resubmitted 2 time(s), max_reasks=2, on_reask=resubmit"


def _persisted(actions: tuple[Action, ...]) -> SseDelta:
    persist = actions[0]
    assert isinstance(persist, Persist) and isinstance(persist.delta, SseDelta), actions
    return persist.delta


def test_a_snapshot_keeps_that_the_session_expired() -> None:
    guard = Guard(clock=lambda: 0.0)
    guard.feed(ev.SessionStarted("s1"))
    guard.feed(ev.SessionExpired())
    snap = guard.snapshot()
    assert snap.expired is True
    restored = Guard(clock=lambda: 0.0)
    restored.restore(snap)
    assert restored.feed(ev.StreamOpened("get")) == ()
    assert restored.feed(ev.SseEvent("get", ASK, "e1")) == (
        Ignore("session-expired", "('s1', 1) arrived after the session expired", key=("s1", 1)),
    )


def test_a_request_record_keeps_when_it_was_shown_and_whether_it_was_asserted() -> None:
    guard = Guard(clock=lambda: 5.0)
    guard.feed(ev.SessionStarted("s1"))
    guard.feed(ev.StreamOpened("get"))
    guard.feed(ev.SseEvent("get", ASK, "e1"))
    (before,) = guard.snapshot().requests
    assert (before.presented_at, before.asserted) == (5.0, False)
    guard.feed(ev.LivenessAsserted(("s1", 1)))
    (after,) = guard.snapshot().requests
    assert (after.presented_at, after.asserted) == (5.0, True)


def test_a_question_without_params_is_stored_without_params() -> None:
    guard = Guard(clock=lambda: 0.0, config=GuardConfig(durable=True))
    guard.feed(ev.SessionStarted("s1"))
    guard.feed(ev.StreamOpened("get"))
    bare = {"jsonrpc": "2.0", "id": 1, "method": "elicitation/create"}
    delta = _persisted(guard.feed(ev.SseEvent("get", bare, "e1")))
    assert delta.questions == (Question(("s1", 1), "elicitation/create", None),)


def test_a_delta_names_the_streams_dropped_to_make_room_or_opened_again() -> None:
    guard = Guard(clock=lambda: 0.0, config=GuardConfig(durable=True, max_streams=1))
    guard.feed(ev.SessionStarted("s1"))
    guard.feed(ev.StreamOpened("post:1", origin=1))
    guard.feed(ev.OriginResponse("post:1"))  # done: room for one more
    assert _persisted(guard.feed(ev.StreamOpened("post:2", origin=2))).dropped == ("post:1",)
    guard.feed(ev.StreamAbandoned("post:2"))
    assert _persisted(guard.feed(ev.StreamOpened("post:2", origin=2))).dropped == ("post:2",)


def test_an_expiry_with_nothing_live_is_written() -> None:
    guard = Guard(clock=lambda: 0.0, config=GuardConfig(durable=True))
    guard.feed(ev.SessionStarted("s1"))
    assert guard.feed(ev.SessionExpired()) == (Persist(SseDelta("s1", True, (), ())),)


def test_a_durable_guard_writes_nothing_for_an_event_that_changes_nothing() -> None:
    """Neither first nor after a restart: nothing is dirty until something changes."""
    unknown = ev.SseEvent("nowhere", ASK, "e1")
    ignored = (Ignore("unknown-stream", "event on unknown stream 'nowhere'", stream="nowhere"),)
    fresh = Guard(clock=lambda: 0.0, config=GuardConfig(durable=True))
    assert fresh.feed(unknown) == ignored
    restarted, stored = _durable_guard_asked(lost=True)
    restarted.restart(stored)
    assert restarted.feed(unknown) == ignored


def test_a_session_expiry_passes_over_requests_already_ended() -> None:
    """A tombstone (a cancelled request) is terminal: the expiry fires on the live only."""
    cancel = {
        "jsonrpc": "2.0",
        "method": "notifications/cancelled",
        "params": {"requestId": 1, "reason": "timeout"},
    }
    guard = Guard(clock=lambda: 0.0)
    guard.feed(ev.SessionStarted("s1"))
    guard.feed(ev.StreamOpened("get"))
    guard.feed(ev.SseEvent("get", ASK, "e1"))
    guard.feed(ev.SseEvent("get", cancel, "e2"))
    (fail,) = guard.feed(ev.SessionExpired())
    assert isinstance(fail, Fail) and isinstance(fail.error, SessionExpiredError)
    assert [r.state for r in guard.snapshot().requests] == ["cancelled"]
