"""Snapshot records by name: fields read by name, values that stay plain tuples (hashed,
compared and printed as tuples), and renaming done field by field."""

from __future__ import annotations

import ast

from core_support import POST, SESSION, FakeClock, cancel, elicit, make_guard

from fsm import events as ev
from fsm.mrtr.call import CallSnapshot, MrtrCall, QuestionRecord, RoundResult
from fsm.sse.guard import GuardSnapshot, KeyRenaming, RequestRecord, StreamRecord

ASK = {"method": "elicitation/create", "params": {"message": "Delete 3 files?"}}


def _guard_snapshot(engine: str) -> GuardSnapshot:
    """Request 1 presented, request 2 cancelled by the server, both on the POST stream."""
    guard = make_guard(engine, FakeClock())
    for n, msg in enumerate((elicit(1), elicit(2), cancel(2)), start=1):
        guard.feed(ev.SseEvent(POST, msg, f"e{n}"))
    return guard.snapshot()


def test_guard_records_are_read_by_name(engine: str) -> None:
    snap = _guard_snapshot(engine)
    assert snap.session == SESSION and not snap.expired
    post = next(s for s in snap.streams if s.id == POST)
    assert (post.state, post.cursor, post.requests) == ("open", "e3", ((SESSION, 1), (SESSION, 2)))
    first, second = snap.requests
    assert (first.key, first.state, first.cause) == ((SESSION, 1), "presented", None)
    assert (second.key, second.state) == ((SESSION, 2), "cancelled")
    assert second.cause is not None and second.cause.key == (SESSION, 2)


def test_records_are_plain_tuples_to_hash_compare_and_print(engine: str) -> None:
    snap = _guard_snapshot(engine)
    for record in (snap, *snap.streams, *snap.requests):
        plain = tuple(record)
        assert record == plain and hash(record) == hash(plain)
        assert repr(record) == repr(plain)
    presented = snap._replace(requests=snap.requests[:1])  # no cause: a Python literal
    guard = make_guard(engine)
    guard.restore(ast.literal_eval(repr(presented)))
    assert guard.snapshot() == presented
    assert type(guard.snapshot().requests[0]) is RequestRecord


def test_renaming_touches_only_the_fields_that_hold_keys(engine: str) -> None:
    snap = _guard_snapshot(engine)
    plan = KeyRenaming({(SESSION, 2): (SESSION, 9)})
    post = next(s for s in snap.streams if s.id == POST)
    renamed = post.rename(plan)
    assert isinstance(renamed, StreamRecord)
    assert renamed.requests == ((SESSION, 1), (SESSION, 9))
    assert renamed._replace(requests=post.requests) == post
    cancelled = snap.requests[1].rename(plan)
    assert cancelled.key == (SESSION, 9)
    assert cancelled.cause is not None and cancelled.cause.key == (SESSION, 9)
    assert repr((SESSION, 9)) in cancelled.cause.message
    assert repr((SESSION, 2)) not in cancelled.cause.message
    assert cancelled._replace(key=(SESSION, 2), cause=snap.requests[1].cause) == snap.requests[1]
    assert snap.requests[0].rename(plan) == snap.requests[0]
    assert snap.rename(KeyRenaming({})) == snap


def test_an_mrtr_snapshot_is_read_by_name_and_restores_from_plain_tuples() -> None:
    call = MrtrCall("c", clock=lambda: 2.0)
    call.feed(RoundResult({"resultType": "input_required", "inputRequests": {"k": ASK}}))
    snap = call.snapshot()
    assert isinstance(snap, CallSnapshot) and (snap.state, snap.round) == ("answering", 1)
    (question,) = snap.questions
    assert isinstance(question, QuestionRecord)
    assert (question.state, question.shown_at, question.answer) == ("presented", 2.0, None)
    assert snap.round_keys == (("k", question.id),)
    plain = ast.literal_eval(repr(snap))
    assert type(plain) is tuple and plain == snap and hash(plain) == hash(snap)
    twin = MrtrCall("c", clock=lambda: 2.0)
    twin.restore(plain)
    assert twin.snapshot() == snap
