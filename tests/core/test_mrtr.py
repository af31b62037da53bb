"""The MRTR rules (fsm.mrtr.call): one call's rounds, event by event, and their invariants
under arbitrary server behaviour (hypothesis)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mrtr_support import ASK, YES, ir, make, only, present

from fsm import actions as act
from fsm import events as ev
from fsm.errors import (
    CallRejectedError,
    GuardUsageError,
    InputRoundsExceededError,
    MalformedInputRequiredError,
    QuestionReaskedError,
    RequestStateExpiredError,
    SubmissionFailedError,
)
from fsm.mrtr.call import CallCancelled, MrtrCall, Retry, RoundFailed, RoundResult, Tick
from fsm.mrtr.outcomes import STATE_REJECTED
from fsm.outcomes import SubmissionResult


def test_a_complete_first_result_completes_the_call() -> None:
    call, _ = make()
    assert call.feed(RoundResult({"content": []})) == (act.Complete("c"),)
    assert call.state == "complete"
    assert call.feed(RoundResult({"content": []}))[0] == act.Ignore(
        "call-ended", "c already ended", stream="c"
    )


def test_one_round_presents_once_retries_with_the_echoed_state_and_completes() -> None:
    call, _ = make()
    shown = present(call, {"k1": ASK}, state="opaque-1")
    assert shown.key[0] == "c" and str(shown.key[1]).startswith("elicitation/create#")
    retry = only(call.feed(ev.UserAnswered(shown.key, YES)), Retry)
    assert retry == Retry("c", {"k1": YES}, "opaque-1", 1, 0.0, {"k1": shown.key})
    assert call.state_of(shown.key) == "submitting" and call.state == "sent"
    assert call.feed(RoundResult({"content": []})) == (act.Complete("c"),)
    assert call.state_of(shown.key) == "resolved"


def test_one_question_under_two_keys_is_presented_once_and_answered_for_both() -> None:
    call, _ = make()
    shown = present(call, {"a": ASK, "b": dict(ASK)})
    retry = only(call.feed(ev.UserAnswered(shown.key, YES)), Retry)
    assert retry.input_responses == {"a": YES, "b": YES}


def test_identity_ignores_key_and_meta_but_not_params() -> None:
    call, _ = make(max_reasks=5)
    shown = present(call, {"k1": ASK})
    call.feed(ev.UserAnswered(shown.key, YES))
    meta = {"method": ASK["method"], "params": {**ASK["params"], "_meta": {"x": 1}}}
    retry = only(call.feed(RoundResult(ir({"other-key": meta}, "s2"))), Retry)
    assert retry.input_responses == {"other-key": YES} and retry.request_state == "s2"
    other = {"method": ASK["method"], "params": {"message": "Delete 4 files?"}}
    assert isinstance(present(call, {"k": other}, "s3"), act.Present)


def test_a_reask_resubmits_the_stored_answer_once_then_fails_naming_it() -> None:
    call, _ = make()
    shown = present(call, {"k1": ASK})
    call.feed(ev.UserAnswered(shown.key, YES))
    retry = only(call.feed(RoundResult(ir({"k1": ASK}, "s2"))), Retry)
    assert retry.input_responses == {"k1": YES} and retry.round == 2
    fail = only(call.feed(RoundResult(ir({"k1": ASK}, "s3"))), act.Fail)
    assert isinstance(fail.error, QuestionReaskedError) and fail.error.key == shown.key
    assert "re-asks" in fail.error.evidence[0]


def test_on_reask_fail_fails_at_the_first_reask() -> None:
    call, _ = make(on_reask="fail")
    shown = present(call, {"k1": ASK})
    call.feed(ev.UserAnswered(shown.key, YES))
    fail = only(call.feed(RoundResult(ir({"k1": ASK}, "s2"))), act.Fail)
    assert fail.error.reason == "question-reasked"


def test_invalid_request_state_is_terminal_with_evidence_and_no_retry() -> None:
    call, _ = make()
    shown = present(call, {"k1": ASK})
    call.feed(ev.UserAnswered(shown.key, YES))
    fail = only(call.feed(RoundFailed(STATE_REJECTED)), act.Fail)
    assert isinstance(fail.error, RequestStateExpiredError)
    assert fail.error.key == shown.key and fail.error.reason == "invalid-request-state"
    assert "rule invalid-request-state" in fail.error.evidence
    assert call.state_of(shown.key) == "dead"
    assert isinstance(only(call.feed(RoundFailed(STATE_REJECTED)), act.Ignore), act.Ignore)


def test_invalid_state_on_a_state_only_round_fails_the_call_itself() -> None:
    call, _ = make()
    only(call.feed(RoundResult(ir(None, "s1"))), Retry)
    fail = only(call.feed(RoundFailed(STATE_REJECTED)), act.Fail)
    assert isinstance(fail.error, RequestStateExpiredError) and fail.error.key is None


def test_other_jsonrpc_errors_are_terminal_as_call_rejected() -> None:
    call, _ = make()
    body = {"jsonrpc": "2.0", "id": 1, "error": {"code": -32603, "message": "boom"}}
    fail = only(call.feed(RoundFailed(SubmissionResult(200, body))), act.Fail)
    assert isinstance(fail.error, CallRejectedError) and fail.error.reason == "jsonrpc-error"


def test_transport_errors_resend_the_same_retry_bounded() -> None:
    call, _ = make(max_resends=2)
    shown = present(call, {"k1": ASK})
    first = only(call.feed(ev.UserAnswered(shown.key, YES)), Retry)
    lost = RoundFailed(SubmissionResult(None, error="ConnectError"))
    again = only(call.feed(lost), Retry)
    assert (again.input_responses, again.request_state, again.delay_s) == (
        first.input_responses,
        first.request_state,
        0.05,
    )
    assert only(call.feed(lost), Retry).delay_s == 0.1
    fail = only(call.feed(lost), act.Fail)
    assert isinstance(fail.error, SubmissionFailedError)


def test_retry_after_is_honoured() -> None:
    call, _ = make()
    shown = present(call, {"k1": ASK})
    call.feed(ev.UserAnswered(shown.key, YES))
    retry = only(call.feed(RoundFailed(SubmissionResult(429, retry_after=3.0))), Retry)
    assert retry.delay_s == 3.0


@pytest.mark.parametrize("seconds", [1e9, float("inf")])
def test_a_retry_after_past_max_server_wait_waits_the_cap(seconds: float) -> None:
    call, _ = make(max_server_wait_s=60.0)
    shown = present(call, {"k1": ASK})
    call.feed(ev.UserAnswered(shown.key, YES))
    retry = only(call.feed(RoundFailed(SubmissionResult(429, retry_after=seconds))), Retry)
    assert retry.delay_s == 60.0


def test_a_question_that_ages_out_is_withdrawn_and_fails_the_call_once() -> None:
    call, clock = make(question_ttl_s=10.0)
    shown = present(call, {"k1": ASK})
    assert call.deadline() == 10.0
    clock.now = 9.9
    assert call.feed(Tick()) == ()
    clock.now = 10.0
    withdraw, fail = call.feed(Tick())
    assert withdraw == act.Withdraw(shown.key, "aged-out")
    assert isinstance(fail, act.Fail) and isinstance(fail.error, RequestStateExpiredError)
    assert fail.error.reason == "aged-out" and "age limit 10s" in fail.error.evidence
    assert call.deadline() is None


def test_a_late_answer_is_not_sent_into_a_dead_state() -> None:
    call, clock = make(question_ttl_s=10.0, ttl_by_method={"elicitation/create": 5.0})
    shown = present(call, {"k1": ASK})
    clock.now = 6.0
    actions = call.feed(ev.UserAnswered(shown.key, YES))
    assert [type(a) for a in actions] == [act.Withdraw, act.Fail]
    assert not any(isinstance(a, Retry) for a in actions)


def test_state_only_rounds_back_off_and_reset_after_a_question() -> None:
    call, _ = make(max_rounds=20)
    delays = [only(call.feed(RoundResult(ir(None, f"s{i}"))), Retry).delay_s for i in range(5)]
    assert delays == [0.05, 0.1, 0.2, 0.25, 0.25]
    shown = present(call, {"k": ASK})
    call.feed(ev.UserAnswered(shown.key, YES))
    assert only(call.feed(RoundResult(ir(None, "z"))), Retry).delay_s == 0.05


def test_rounds_are_capped() -> None:
    call, _ = make(max_rounds=3)
    for i in range(3):
        assert only(call.feed(RoundResult(ir(None, f"s{i}"))), Retry).round == i + 1
    fail = only(call.feed(RoundResult(ir(None, "s9"))), act.Fail)
    assert isinstance(fail.error, InputRoundsExceededError)


BAD_RESULTS = [
    ["not", "a", "map"],
    {"resultType": "partial"},
    {"resultType": "input_required"},
    {"resultType": "input_required", "inputRequests": ["a"]},
    {"resultType": "input_required", "inputRequests": {"k": "ask"}},
    {"resultType": "input_required", "inputRequests": {"k": {"params": {}}}},
    {"resultType": "input_required", "inputRequests": {"k": {"method": "tools/call"}}},
    {"resultType": "input_required", "inputRequests": {"k": {**ASK, "params": [1]}}},
    {"resultType": "input_required", "requestState": 42},
    {"resultType": "input_required", "requestState": "x" * 300_000},
    {"resultType": "input_required", "inputRequests": {str(i): ASK for i in range(65)}},
]


@pytest.mark.parametrize("result", BAD_RESULTS, ids=range(len(BAD_RESULTS)))
def test_malformed_results_fail_the_call_once_with_a_typed_error(result: Any) -> None:
    call, _ = make()
    fail = only(call.feed(RoundResult(result)), act.Fail)
    assert isinstance(fail.error, MalformedInputRequiredError)
    assert fail.error.evidence[1]


def test_a_result_while_answering_is_ignored() -> None:
    call, _ = make()
    present(call, {"k": ASK})
    assert only(call.feed(RoundResult({"content": []})), act.Ignore).reason == "not-awaiting"
    assert only(call.feed(RoundFailed(STATE_REJECTED)), act.Ignore).reason == "not-awaiting"


def test_an_answer_for_a_key_never_presented_is_a_usage_error() -> None:
    call, _ = make()
    present(call, {"k": ASK})
    with pytest.raises(GuardUsageError):
        call.feed(ev.UserAnswered(("c", "nope"), YES))
    with pytest.raises(GuardUsageError):
        call.feed(ev.UserAnswered(("other-call", "nope"), YES))


def test_idempotent_questions_are_answered_anew() -> None:
    call, _ = make()
    roots = {"method": "roots/list", "params": None}
    first = present(call, {"r": roots})
    call.feed(ev.UserAnswered(first.key, {"roots": []}))
    second = present(call, {"r": roots}, "s2")
    assert second.key != first.key


def test_cancel_withdraws_and_fails_once() -> None:
    call, _ = make()
    shown = present(call, {"k": ASK})
    withdraw, fail = call.feed(CallCancelled())
    assert withdraw == act.Withdraw(shown.key, "cancelled")
    assert isinstance(fail, act.Fail) and fail.error.reason == "cancelled"


def test_snapshot_restores_and_both_engines_agree() -> None:
    fired: dict[str, list[str]] = {"tables": [], "transitions": []}
    calls = {
        name: MrtrCall(
            "c",
            clock=lambda: 0.0,
            engine=name,  # type: ignore[arg-type]
            on_fire=lambda *t, n=name: fired[n].append("/".join(t)),  # type: ignore[misc]
        )
        for name in fired
    }
    script: list[Any] = [RoundResult(ir({"k": ASK}, "s1"))]
    outs: dict[str, list[Any]] = {name: [] for name in calls}
    for name, call in calls.items():
        outs[name] += call.feed(script[0])
        key = outs[name][0].key
        snap = call.snapshot()
        outs[name] += call.feed(ev.UserAnswered(key, YES))
        call.restore(snap)
        assert call.snapshot() == snap
        outs[name] += call.feed(ev.UserAnswered(key, YES))
        outs[name] += call.feed(RoundResult({"content": []}))
    assert outs["tables"] == outs["transitions"] and fired["tables"] == fired["transitions"]


# ------------------------------------------------------------------ hypothesis

QUESTIONS = [ASK, {"method": "elicitation/create", "params": {"message": "Really?"}}]
SERVER_MOVES = st.one_of(
    st.just(("complete",)),
    st.tuples(st.just("ask"), st.lists(st.sampled_from([0, 1]), min_size=1, max_size=3)),
    st.just(("poll",)),
    st.just(("expired",)),
    st.just(("lost",)),
    st.just(("garbage",)),
    st.tuples(st.just("user"), st.booleans()),
    st.tuples(st.just("tick"), st.floats(0, 20)),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(SERVER_MOVES, max_size=30))
def test_invariants_hold_against_any_server(moves: list[tuple[Any, ...]]) -> None:
    call, clock = make(question_ttl_s=10.0, max_rounds=6)
    presented: set[Any] = set()
    answers: dict[Any, Any] = {}
    outcomes = 0
    for n, move in enumerate(moves):
        kind = move[0]
        if kind == "complete":
            actions = call.feed(RoundResult({"content": []}))
        elif kind == "ask":
            asks = {f"k{i}": QUESTIONS[q] for i, q in enumerate(move[1])}
            actions = call.feed(RoundResult(ir(asks, f"s{n}")))
        elif kind == "poll":
            actions = call.feed(RoundResult(ir(None, f"s{n}")))
        elif kind == "expired":
            actions = call.feed(RoundFailed(STATE_REJECTED))
        elif kind == "lost":
            actions = call.feed(RoundFailed(SubmissionResult(None, error="ReadTimeout")))
        elif kind == "garbage":
            actions = call.feed(RoundResult({"resultType": 7}))
        elif kind == "user":
            waiting = sorted(k for k in presented if call.state_of(k) == "presented")
            if not waiting:
                continue
            answer = {"action": "accept" if move[1] else "decline"}
            answers[waiting[0]] = answer
            actions = call.feed(ev.UserAnswered(waiting[0], answer))
        else:
            clock.now += move[1]
            actions = call.feed(Tick())
        for a in actions:
            if isinstance(a, act.Present):
                assert a.key not in presented, "a question presented twice"
                presented.add(a.key)
            elif isinstance(a, Retry):
                for server_key, answer in (a.input_responses or {}).items():
                    assert answers[a.questions[server_key]] == answer, "fabricated answer"
            elif isinstance(a, act.Complete | act.Fail):
                outcomes += 1
            if outcomes and not isinstance(a, act.Complete | act.Fail | act.Withdraw):
                assert isinstance(a, act.Ignore), "an action after the outcome"
        assert outcomes <= 1
        assert (outcomes == 1) == (call.state in ("complete", "failed"))


def test_a_result_the_sdk_could_not_parse_is_malformed_not_resent() -> None:
    call, _ = make()
    fail = only(call.feed(RoundFailed(SubmissionResult(None, error="ValidationError"))), act.Fail)
    assert isinstance(fail.error, MalformedInputRequiredError)
    assert fail.error.reason == "unparseable-result"
