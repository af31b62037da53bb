"""One question, one prompt, in the SSE era: a request of a tool call asking again under a
new id what the user answered (a server-side shim that lost the answer) gets the stored
answer, bounded, then the call fails once; never a second prompt. The monitor's P2 and
P4 judge questions the same way, through the one book of first askers."""

from __future__ import annotations

from typing import Any

import pytest
from core_support import GET, POST, SESSION, elicit, make_guard, of

from fsm import SubmissionResult
from fsm import events as ev
from fsm import properties as P
from fsm.actions import Complete, Fail, Present, Submit
from fsm.errors import QuestionReaskedError
from fsm.questions import QuestionBook, question_id
from fsm.sse.observe import ObservedGuard

ANSWER = {"action": "accept", "content": {"ok": True}}


def _answered(guard: Any, rid: int = 1, stream: str = POST) -> None:
    """Request ``rid`` delivered, presented, answered and its answer accepted."""
    assert of(guard.feed(ev.SseEvent(stream, elicit(rid), f"e{rid}")), Present)
    assert of(guard.feed(ev.UserAnswered((SESSION, rid), ANSWER)), Submit)
    guard.feed(ev.SubmissionOutcome((SESSION, rid), SubmissionResult(202)))


def test_a_reask_under_a_new_id_resubmits_the_stored_answer(engine: str) -> None:
    guard = make_guard(engine)
    _answered(guard)
    actions = guard.feed(ev.SseEvent(POST, elicit(2), "e2"))
    assert actions == (Submit((SESSION, 2), ANSWER, 1, 0.0),)
    assert guard.state_of((SESSION, 2)) == "submitting"
    guard.feed(ev.SubmissionOutcome((SESSION, 2), SubmissionResult(202)))
    done = guard.feed(ev.SseEvent(POST, {"jsonrpc": "2.0", "id": 7, "result": {}}, "e3"))
    assert of(done, Complete) and not of(done, Fail)


def test_past_max_reasks_the_call_fails_once_naming_the_reask(engine: str) -> None:
    guard = make_guard(engine, max_reasks=1)
    _answered(guard)
    guard.feed(ev.SseEvent(POST, elicit(2), "e2"))
    actions = guard.feed(ev.SseEvent(POST, elicit(3), "e3"))
    assert not of(actions, Present) and not of(actions, Submit)
    (fail,) = of(actions, Fail)
    assert isinstance(fail.error, QuestionReaskedError) and fail.interaction == POST
    assert fail.error.key == (SESSION, 3) and "max_reasks=1" in " ".join(fail.error.evidence)
    assert guard.state_of((SESSION, 3)) == "dead"
    assert not of(guard.feed(ev.SseEvent(POST, elicit(4), "e4")), Fail)  # once


def test_on_reask_fail_fails_at_the_first_reask(engine: str) -> None:
    guard = make_guard(engine, on_reask="fail")
    _answered(guard)
    (fail,) = of(guard.feed(ev.SseEvent(POST, elicit(2), "e2")), Fail)
    assert fail.error.reason == "question-reasked"


def test_questions_off_keys_requests_by_id_alone(engine: str) -> None:
    guard = make_guard(engine, questions=False)
    _answered(guard)
    assert of(guard.feed(ev.SseEvent(POST, elicit(2), "e2")), Present)


@pytest.mark.parametrize(
    ("second", "stream"),
    [
        (elicit(2, "Delete 4 files?"), POST),  # another question
        (elicit(2, meta=None), GET),  # the same question on no call's stream
    ],
    ids=["other-params", "standalone-stream"],
)
def test_what_is_no_reask_is_presented(engine: str, second: dict[str, Any], stream: str) -> None:
    guard = make_guard(engine)
    _answered(guard, stream=stream if stream == GET else POST)
    assert of(guard.feed(ev.SseEvent(stream, second, "e2")), Present)


def test_meta_is_not_part_of_the_question(engine: str) -> None:
    guard = make_guard(engine)
    _answered(guard)
    again = elicit(2, meta={"progressToken": "p2"})
    assert of(guard.feed(ev.SseEvent(POST, again, "e2")), Submit)


def test_a_question_first_asked_and_not_yet_answered_is_presented(engine: str) -> None:
    guard = make_guard(engine)
    assert of(guard.feed(ev.SseEvent(POST, elicit(1), "e1")), Present)
    assert of(guard.feed(ev.SseEvent(POST, elicit(2), "e2")), Present)


def test_the_reask_count_survives_a_snapshot(engine: str) -> None:
    guard = make_guard(engine, max_reasks=1)
    _answered(guard)
    guard.feed(ev.SseEvent(POST, elicit(2), "e2"))
    snap = guard.snapshot()
    again = make_guard(engine, max_reasks=1)
    again.restore(snap)
    assert of(again.feed(ev.SseEvent(POST, elicit(3), "e3")), Fail)


def test_the_observed_guard_keeps_p2_and_p4_on_a_reask(engine: str) -> None:
    observed = ObservedGuard(make_guard(engine))
    observed.questions.open(POST)  # the stream opened before the observer came
    observed.feed(ev.SseEvent(POST, elicit(1), "e1"))
    observed.feed(ev.UserAnswered((SESSION, 1), ANSWER))
    observed.feed(ev.SubmissionOutcome((SESSION, 1), SubmissionResult(202)))
    observed.feed(ev.SseEvent(POST, elicit(2), "e2"))
    assert observed.violations == []
    delivered = [o for o, _ in observed.log if isinstance(o, P.Delivered)]
    assert delivered[-1].question == (SESSION, 1)


def test_the_monitor_finds_a_reask_presented_again() -> None:
    k1, k2 = (SESSION, 1), (SESSION, 2)
    monitor = P.Monitor()
    for obs in (
        P.Delivered(k1, POST, 0.0),
        P.Presented(k1, 0.0),
        P.Answered(k1, ANSWER),
        P.Delivered(k2, POST, 0.0, question=k1),
    ):
        assert monitor.observe(obs) == ()
    assert [v.name for v in monitor.check(P.Presented(k2, 0.0))] == ["P2"]
    assert monitor.check(P.Submitted(k2, ANSWER)) == ()  # the question's answer
    assert [v.name for v in monitor.check(P.Submitted(k2, {"action": "decline"}))] == ["P4"]


def test_a_question_not_yet_answered_links_nothing() -> None:
    k1, k2 = (SESSION, 1), (SESSION, 2)
    monitor = P.Monitor()
    monitor.observe(P.Delivered(k1, POST, 0.0))
    monitor.observe(P.Presented(k1, 0.0))
    monitor.observe(P.Delivered(k2, POST, 0.0, question=k1))
    assert monitor.check(P.Presented(k2, 0.0)) == ()


def test_the_book_names_the_first_asker_of_an_open_call_only() -> None:
    book = QuestionBook(max_scopes=1, max_questions=1)
    params = {"message": "Delete 3 files?"}
    assert book.first(POST, "elicitation/create", params, (SESSION, 1)) is None  # not open
    book.open(POST)
    assert book.first(POST, "elicitation/create", params, (SESSION, 1)) is None
    assert book.first(POST, "elicitation/create", params, (SESSION, 1)) is None  # itself
    assert book.first(POST, "elicitation/create", dict(params), (SESSION, 2)) == (SESSION, 1)
    assert book.first(POST, "elicitation/create", {"m": 2}, (SESSION, 3)) is None  # full
    book.open("post:8")  # one scope at most: the first is forgotten
    assert book.first(POST, "elicitation/create", params, (SESSION, 2)) is None
    assert question_id("elicitation/create", params).startswith("elicitation/create#")


@pytest.mark.parametrize("bad", [{"max_reasks": -1}, {"on_reask": "ask"}, {"max_reasks": True}])
def test_a_bad_reask_policy_is_a_value_error(bad: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        make_guard(**bad)
