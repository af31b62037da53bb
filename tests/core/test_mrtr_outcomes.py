"""The MRTR round outcome table: one example per row of MRTR_RULES (chosen so that no
earlier row matches it), the shapes of an expired-state rejection the table must and must
not recognise, and the typed error each terminal row ends a call with."""

from __future__ import annotations

from typing import Any

import pytest

from fsm.errors import CallRejectedError, MalformedInputRequiredError, RequestStateExpiredError
from fsm.mrtr.outcomes import (
    INVALID_REQUEST_STATE,
    MRTR_CLASSIFIER,
    MRTR_RULES,
    STATE_REJECTED,
    error_for,
)
from fsm.outcomes import OutcomeClass, SubmissionResult


def rpc(code: int, message: str, data: Any = None) -> SubmissionResult:
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return SubmissionResult(None, {"jsonrpc": "2.0", "id": 3, "error": error})


ROW_EXAMPLES: dict[str, tuple[SubmissionResult, OutcomeClass]] = {
    "invalid-request-state": (STATE_REJECTED, OutcomeClass.TERMINAL),
    "header-mismatch": (rpc(-32020, "headers and body disagree"), OutcomeClass.TERMINAL),
    "missing-capability": (rpc(-32021, "client lacks elicitation"), OutcomeClass.TERMINAL),
    "unsupported-version": (rpc(-32022, "version refused"), OutcomeClass.TERMINAL),
    "jsonrpc-error": (rpc(-32603, "internal error"), OutcomeClass.TERMINAL),
    "http-404": (SubmissionResult(404), OutcomeClass.TERMINAL),
    "http-410": (SubmissionResult(410), OutcomeClass.TERMINAL),
    "unparseable-result": (SubmissionResult(None, error="ValidationError"), OutcomeClass.TERMINAL),
    "http-429": (SubmissionResult(429, retry_after=2.0), OutcomeClass.RETRYABLE),
    "http-5xx": (SubmissionResult(502), OutcomeClass.RETRYABLE),
    "transport-error": (SubmissionResult(None, error="ReadTimeout"), OutcomeClass.RETRYABLE),
    "other-4xx": (SubmissionResult(403), OutcomeClass.TERMINAL),
}


def test_every_row_has_an_example() -> None:
    assert [r.name for r in MRTR_RULES] == list(ROW_EXAMPLES)


@pytest.mark.parametrize("name", list(ROW_EXAMPLES))
def test_each_row_classifies_its_example(name: str) -> None:
    result, outcome = ROW_EXAMPLES[name]
    verdict = MRTR_CLASSIFIER.classify(result)
    assert (verdict.rule, verdict.outcome) == (name, outcome)
    row = next(r for r in MRTR_RULES if r.name == name)
    for earlier in MRTR_RULES[: MRTR_RULES.index(row)]:
        assert not earlier.matches(result), earlier.name


@pytest.mark.parametrize(
    "result",
    [
        rpc(-32602, "Invalid or expired requestState", {"reason": INVALID_REQUEST_STATE}),
        rpc(-32602, "state rejected", {"reason": INVALID_REQUEST_STATE}),  # reason alone
        rpc(-32000, "the REQUESTSTATE could not be verified"),  # message alone, any case
        rpc(-32602, "bad requestState", "not a mapping"),  # data of another type
    ],
)
def test_an_expired_state_is_recognised_by_its_reason_or_its_message(
    result: SubmissionResult,
) -> None:
    assert MRTR_CLASSIFIER.classify(result).rule == "invalid-request-state"


@pytest.mark.parametrize(
    "result",
    [
        rpc(-32602, "invalid params", {"reason": "something_else"}),
        rpc(-32602, "invalid params", {"why": INVALID_REQUEST_STATE}),
        SubmissionResult(None, {"jsonrpc": "2.0", "id": 3, "error": {"code": -32602}}),
        SubmissionResult(None, {"jsonrpc": "2.0", "id": 3, "error": {"message": 7}}),
    ],
)
def test_other_errors_are_not_taken_for_an_expired_state(result: SubmissionResult) -> None:
    verdict = MRTR_CLASSIFIER.classify(result)
    assert verdict.rule == "jsonrpc-error" and verdict.outcome is OutcomeClass.TERMINAL


@pytest.mark.parametrize(
    "body",
    [
        None,
        ["not", "a", "mapping"],
        {"jsonrpc": "2.0", "id": 3, "result": {}},  # no error member
        {"jsonrpc": "2.0", "id": 3, "error": "a string, not an object"},
    ],
)
def test_a_body_without_an_error_object_is_judged_by_its_status(body: Any) -> None:
    assert MRTR_CLASSIFIER.classify(SubmissionResult(503, body)).rule == "http-5xx"
    assert MRTR_CLASSIFIER.classify(SubmissionResult(None, body, "ConnectError")).rule == (
        "transport-error"
    )


@pytest.mark.parametrize(
    ("rule", "error"),
    [
        ("invalid-request-state", RequestStateExpiredError),
        ("unparseable-result", MalformedInputRequiredError),
        ("header-mismatch", CallRejectedError),
        ("jsonrpc-error", CallRejectedError),
        ("other-4xx", CallRejectedError),
    ],
)
def test_each_terminal_rule_names_its_typed_error(rule: str, error: type[Exception]) -> None:
    assert error_for(rule) is error
