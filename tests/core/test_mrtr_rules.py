"""The MRTR rules (fsm.mrtr.call) in detail: what each action and typed error carries (the
question, its key, the evidence and message a client logs or shows), the edge of every
bound, the age limit on a clock that does not start at zero, and what a snapshot keeps."""

from __future__ import annotations

from typing import Any

import pytest
from mrtr_support import ASK, YES, ir, make, only, present

from fsm import actions as act
from fsm import events as ev
from fsm.errors import (
    CallRejectedError,
    GuardUsageError,
    InteractionFailed,
    MalformedInputRequiredError,
    QuestionReaskedError,
    RequestStateExpiredError,
    SubmissionFailedError,
)
from fsm.mrtr.call import (
    CallCancelled,
    MrtrCall,
    Retry,
    RoundFailed,
    RoundResult,
    Tick,
    question_id,
)
from fsm.mrtr.outcomes import STATE_REJECTED
from fsm.outcomes import SubmissionResult

QID = question_id(str(ASK["method"]), ASK["params"])  # type: ignore[arg-type]
KEY = ("c", QID)
OTHER = {"method": "elicitation/create", "params": {"message": "Really?"}}
LOST = RoundFailed(SubmissionResult(None, error="ConnectError"))


def fail_of(actions: tuple[Any, ...]) -> InteractionFailed:
    """The error of the one ``Fail`` in ``actions`` (the last action), for call ``c``."""
    fail = actions[-1]
    assert isinstance(fail, act.Fail) and fail.interaction == "c", actions
    assert fail.error.stream == "c"
    return fail.error


# ------------------------------------------------------------------ what is presented


def test_a_question_is_presented_as_asked_under_its_identity() -> None:
    call, _ = make()
    shown = present(call, {"k1": ASK})
    assert shown == act.Present(KEY, "elicitation/create", {"message": "Delete 3 files?"})


def test_an_idempotent_question_is_keyed_by_its_identity_and_round() -> None:
    call, _ = make()
    roots = {"method": "roots/list", "params": None}
    first = present(call, {"r": roots})
    assert first == act.Present(("c", question_id("roots/list", None) + "@1"), "roots/list", None)
    call.feed(ev.UserAnswered(first.key, {"roots": []}))
    second = present(call, {"r": roots}, "s2")
    assert second.key == ("c", question_id("roots/list", None) + "@2")


def test_on_fire_is_told_every_transition_in_order() -> None:
    fired: list[tuple[str, str, str, str]] = []
    call = MrtrCall("c", clock=lambda: 0.0, on_fire=lambda *t: fired.append(t))
    shown = only(call.feed(RoundResult(ir({"k": ASK}))), act.Present)
    call.feed(ev.UserAnswered(shown.key, YES))
    call.feed(RoundResult({"content": []}))
    assert fired == [
        ("rounds", "sent", "ask", "input_required"),
        ("rounds", "input_required", "present", "answering"),
        ("liveness", "new", "present", "presented"),
        ("liveness", "presented", "answer", "answered"),
        ("rounds", "answering", "answered", "retrying"),
        ("liveness", "answered", "submit", "submitting"),
        ("rounds", "retrying", "send", "sent"),
        ("rounds", "sent", "complete", "complete"),
        ("liveness", "submitting", "complete", "resolved"),
    ]


# ------------------------------------------------------------------ answers


def test_an_answer_to_a_question_already_answered_is_ignored_with_its_state() -> None:
    call, _ = make()
    assert len(call.feed(RoundResult(ir({"a": ASK, "b": OTHER})))) == 2
    assert call.feed(ev.UserAnswered(KEY, YES)) == ()  # the other question is still open
    assert call.feed(ev.UserAnswered(KEY, YES)) == (
        act.Ignore("not-presented", f"{KEY!r} is answered", key=KEY, stream="c"),
    )


def test_an_answer_under_another_calls_id_is_a_usage_error_naming_the_key() -> None:
    call, _ = make()
    shown = present(call, {"k": ASK})
    foreign = ("other-call", shown.key[1])
    with pytest.raises(
        GuardUsageError, match=repr(foreign).replace("(", r"\(").replace(")", r"\)")
    ):
        call.feed(ev.UserAnswered(foreign, YES))
    assert call.state_of(shown.key) == "presented"


def test_after_the_outcome_answers_are_ignored_but_unknown_keys_still_raise() -> None:
    call, _ = make()
    shown = present(call, {"k": ASK})
    call.feed(CallCancelled())
    assert call.feed(ev.UserAnswered(shown.key, YES)) == (
        act.Ignore("call-ended", "c already ended", stream="c"),
    )
    with pytest.raises(GuardUsageError, match="'nope'"):
        call.feed(ev.UserAnswered(("c", "nope"), YES))
    with pytest.raises(
        GuardUsageError, match=r"^c: .+'other-call'.+ was never presented by this call$"
    ):
        call.feed(ev.UserAnswered(("other-call", shown.key[1]), YES))  # another call's key


def test_state_of_knows_only_this_calls_questions() -> None:
    call, _ = make()
    shown = present(call, {"k": ASK})
    assert call.state_of(shown.key) == "presented"
    assert call.state_of(("other-call", shown.key[1])) is None
    assert call.state_of(("c", "never-asked")) is None


def test_cancel_fails_with_the_applications_reason_as_message() -> None:
    call, _ = make()
    present(call, {"k": ASK})
    error = fail_of(call.feed(CallCancelled("the user closed the dialog")))
    assert type(error) is InteractionFailed and str(error) == "the user closed the dialog"


# ------------------------------------------------------------------ re-asks


def test_reasks_resubmit_at_once_up_to_max_reasks_then_fail_naming_the_question() -> None:
    call, _ = make(max_reasks=3, max_rounds=10)
    shown = present(call, {"k1": ASK})
    call.feed(ev.UserAnswered(shown.key, YES))
    for n in range(2, 5):
        retry = only(call.feed(RoundResult(ir({"k1": ASK}, f"s{n}"))), Retry)
        assert retry == Retry("c", {"k1": YES}, f"s{n}", n, 0.0, {"k1": KEY})
    error = fail_of(call.feed(RoundResult(ir({"k1": ASK}, "s5"))))
    assert isinstance(error, QuestionReaskedError) and error.key == KEY
    assert str(error) == (
        f"c: the server asked elicitation/create {QID} again after it was answered; "
        "the user is not asked twice"
    )
    assert error.evidence == (
        f"round 5: key 'k1' re-asks {QID}",
        "resubmitted 3 time(s), max_reasks=3, on_reask=resubmit",
    )


def test_a_rejected_resubmission_fails_naming_the_question_it_carried() -> None:
    call, _ = make()
    shown = present(call, {"k1": ASK})
    call.feed(ev.UserAnswered(shown.key, YES))
    only(call.feed(RoundResult(ir({"k1": ASK}, "s2"))), Retry)
    assert call.state_of(shown.key) == "submitting"  # the stored answer is in flight again
    error = fail_of(call.feed(RoundFailed(STATE_REJECTED)))
    assert isinstance(error, RequestStateExpiredError) and error.key == KEY
    assert call.state_of(shown.key) == "dead"


# ------------------------------------------------------------------ failed rounds

REJECTIONS = [
    (
        STATE_REJECTED,
        "invalid-request-state",
        "JSON-RPC -32602 'Invalid or expired requestState' reason=invalid_request_state",
    ),
    (
        SubmissionResult(400, STATE_REJECTED.body),
        "invalid-request-state",
        "HTTP 400 JSON-RPC -32602 'Invalid or expired requestState' reason=invalid_request_state",
    ),
    (
        SubmissionResult(
            None, {"jsonrpc": "2.0", "id": 1, "error": {"code": -32603, "message": "boom"}}
        ),
        "jsonrpc-error",
        "JSON-RPC -32603 'boom'",
    ),
    (
        SubmissionResult(200, {"error": {"code": -32603, "message": "boom", "data": "text"}}),
        "jsonrpc-error",
        "HTTP 200 JSON-RPC -32603 'boom'",
    ),
    (
        SubmissionResult(None, {"error": {"code": -32603, "message": "boom", "data": {}}}),
        "jsonrpc-error",
        "JSON-RPC -32603 'boom'",
    ),
    (SubmissionResult(404), "http-404", "HTTP 404"),
]


@pytest.mark.parametrize(("outcome", "rule", "described"), REJECTIONS)
def test_a_rejected_state_only_round_fails_the_call_with_its_evidence(
    outcome: SubmissionResult, rule: str, described: str
) -> None:
    call, _ = make()
    only(call.feed(RoundResult(ir(None, "s1"))), Retry)
    error = fail_of(call.feed(RoundFailed(outcome)))
    assert error.key is None and error.reason == rule
    assert str(error) == f"c: the server rejected round 1 ({rule})"
    assert error.evidence == ("round 1", described, f"rule {rule}")


def test_a_result_the_clients_sdk_refused_is_not_blamed_on_the_server() -> None:
    """The server answered; the client's own SDK could not parse the result (mcp 2.3.0
    refuses an input-required result without ``resultType``): the message says so."""
    call, _ = make()
    only(call.feed(RoundResult(ir(None, "s1"))), Retry)
    refused = SubmissionResult(None, error="ValidationError")
    error = fail_of(call.feed(RoundFailed(refused)))
    assert isinstance(error, MalformedInputRequiredError)
    assert error.reason == "unparseable-result"
    assert str(error) == "c: the client's SDK rejected the server's result of round 1 " + (
        "(unparseable-result)"
    )
    assert "server rejected" not in str(error)
    assert error.evidence == (
        "round 1",
        "a result the client's SDK refused (ValidationError)",
        "rule unparseable-result",
    )


def test_a_rejected_answer_fails_the_call_naming_its_question_and_rule() -> None:
    call, _ = make()
    shown = present(call, {"k1": ASK})
    call.feed(ev.UserAnswered(shown.key, YES))
    body = {"jsonrpc": "2.0", "id": 2, "error": {"code": -32603, "message": "boom"}}
    error = fail_of(call.feed(RoundFailed(SubmissionResult(None, body))))
    assert isinstance(error, CallRejectedError) and error.key == KEY
    assert error.reason == "jsonrpc-error"
    assert str(error) == "c: the server rejected round 1 (jsonrpc-error)"


def test_a_lost_first_request_is_resent_without_state_then_fails_counting_attempts() -> None:
    call, _ = make(max_resends=2)
    assert call.feed(LOST) == (Retry("c", None, None, 0, 0.05),)
    assert call.feed(LOST) == (Retry("c", None, None, 0, 0.1),)
    error = fail_of(call.feed(LOST))
    assert isinstance(error, SubmissionFailedError)
    assert str(error) == "c: round 0 failed 3 times in a row"
    assert error.evidence[-1] == "max_resends=2"


def test_a_result_or_failure_while_no_request_is_in_flight_is_ignored() -> None:
    call, _ = make()
    present(call, {"k": ASK})
    ignored = act.Ignore("not-awaiting", "no request in flight", stream="c")
    assert call.feed(RoundResult({"content": []})) == (ignored,)
    assert call.feed(RoundFailed(STATE_REJECTED)) == (ignored,)


# ------------------------------------------------------------------ bounds


def test_the_round_cap_names_the_round_and_the_cap() -> None:
    call, _ = make(max_rounds=1)
    only(call.feed(RoundResult(ir(None, "s1"))), Retry)
    error = fail_of(call.feed(RoundResult(ir(None, "s2"))))
    assert str(error) == "c: more than 1 input rounds"
    assert error.evidence == ("round 2", "max_rounds=1")


def test_a_state_of_exactly_max_state_chars_is_accepted() -> None:
    call, _ = make(max_state_chars=8)
    assert only(call.feed(RoundResult(ir(None, "x" * 8))), Retry).request_state == "x" * 8
    error = fail_of(call.feed(RoundResult(ir(None, "x" * 9))))
    assert error.evidence == ("round 2", "requestState of 9 chars (max_state_chars=8)")


def test_exactly_max_input_requests_questions_are_accepted() -> None:
    call, _ = make(max_input_requests=2)
    assert len(call.feed(RoundResult(ir({"a": ASK, "b": OTHER})))) == 2
    call, _ = make(max_input_requests=2)
    error = fail_of(call.feed(RoundResult(ir({"a": ASK, "b": OTHER, "c": ASK}))))
    assert error.evidence == ("round 1", "3 inputRequests (max_input_requests=2)")


MALFORMED = [
    (["not", "a", "map"], "result is list, not an object"),
    ({"resultType": "partial"}, "unknown resultType 'partial'"),
    ({"resultType": "input_required"}, "neither inputRequests nor requestState"),
    (ir(["a"], "s"), "inputRequests is list, not a map"),  # type: ignore[arg-type]
    (ir({"k": "ask"}, "s"), "inputRequests['k'] is not a {method, params} object"),
    (ir({"k": {"method": "tools/call"}}, "s"), "inputRequests['k'] asks 'tools/call'"),
    (ir({"k": {**ASK, "params": [1]}}, "s"), "inputRequests['k'].params is not an object"),
    (ir(None, 42), "requestState is int, not a string"),  # type: ignore[arg-type]
]


@pytest.mark.parametrize(("result", "problem"), MALFORMED, ids=range(len(MALFORMED)))
def test_a_malformed_result_says_what_is_wrong_and_in_which_round(
    result: Any, problem: str
) -> None:
    call, _ = make()
    only(call.feed(RoundResult(ir(None, "s1"))), Retry)
    error = fail_of(call.feed(RoundResult(result)))
    assert isinstance(error, MalformedInputRequiredError)
    assert str(error) == f"c: malformed result: {problem}"
    assert error.evidence == ("round 2", problem)


# ------------------------------------------------------------------ client-side age


def test_the_age_limit_runs_from_when_the_question_was_shown() -> None:
    call, clock = make(now=1000.0, question_ttl_s=60.0, ttl_by_method={ASK["method"]: 5.0})
    shown = present(call, {"k": ASK})
    assert call.deadline() == 1005.0
    clock.now = 1004.9
    assert call.feed(Tick()) == ()
    clock.now = 1005.0
    actions = call.feed(Tick())
    assert actions[0] == act.Withdraw(shown.key, "aged-out")
    error = fail_of(actions)
    assert isinstance(error, RequestStateExpiredError) and error.key == KEY
    assert str(error) == (
        f"c: {QID} was shown 5.0s ago, past the client-side age limit; "
        "its requestState has surely expired"
    )
    assert error.evidence == ("presented at t=1000.000", "age limit 5s", "checked at t=1005.000")


# ------------------------------------------------------------------ snapshots


def test_a_restored_call_goes_on_as_the_original() -> None:
    original, _ = make()
    assert len(original.feed(RoundResult(ir({"k": ASK, "r": {"method": "roots/list"}})))) == 2
    restored = MrtrCall("c", clock=lambda: 0.0)
    restored.restore(original.snapshot())
    assert restored.snapshot() == original.snapshot()
    for call in (original, restored):
        assert call.feed(ev.UserAnswered(KEY, YES)) == ()
    roots = ("c", question_id("roots/list", None) + "@1")
    retries = [call.feed(ev.UserAnswered(roots, {"roots": []})) for call in (original, restored)]
    assert retries[0] == retries[1]
    assert retries[0] == (
        Retry("c", {"k": YES, "r": {"roots": []}}, "s", 1, 0.0, {"k": KEY, "r": roots}),
    )


def test_the_same_question_and_answer_in_another_key_order_give_one_snapshot() -> None:
    snaps = []
    for params, answer in (
        ({"message": "m", "level": 1}, {"action": "accept", "content": {"a": 1}}),
        ({"level": 1, "message": "m"}, {"content": {"a": 1}, "action": "accept"}),
    ):
        call, _ = make()
        shown = present(call, {"k": {"method": "elicitation/create", "params": params}})
        call.feed(ev.UserAnswered(shown.key, answer))
        snaps.append(call.snapshot())
    assert snaps[0] == snaps[1]


def test_values_json_cannot_carry_travel_as_their_repr_without_a_crash() -> None:
    call, _ = make()
    shown = present(call, {"k": {"method": "elicitation/create", "params": {"blob": b"\x00"}}})
    assert call.snapshot()
    retry = only(call.feed(ev.UserAnswered(shown.key, {"action": "accept", "at": b"\x01"})), Retry)
    assert retry.input_responses == {"k": {"action": "accept", "at": repr(b"\x01")}}
    assert call.snapshot()
