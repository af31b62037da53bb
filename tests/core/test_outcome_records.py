"""The records the outcome classifier reads and returns: a JSON-RPC error body as read
from an HTTP result, and the verdict for an outcome no row matches."""

from __future__ import annotations

from typing import Any

import pytest

from fsm.outcomes import Classification, Classifier, OutcomeClass, SubmissionResult


@pytest.mark.parametrize(
    ("body", "read"),
    [
        (
            {"error": {"code": -32602, "message": "Request not found"}},
            (-32602, "Request not found"),
        ),
        ({"error": {"code": "-32602", "message": 7}}, (None, "")),
        ({"error": {"message": "late"}}, (None, "late")),
        ({"error": "gone"}, None),
        ({"result": {}}, None),
        (None, None),
    ],
    ids=["well-formed", "wrong-types", "no-code", "error-not-object", "no-error", "no-body"],
)
def test_a_jsonrpc_error_is_read_with_its_types_checked(body: Any, read: Any) -> None:
    assert SubmissionResult(500, body).jsonrpc_error() == read


@pytest.mark.parametrize(
    "classifier", [Classifier(), Classifier.for_resumes()], ids=["post", "get"]
)
def test_an_outcome_no_row_matches_is_retryable_for_this_request_only(
    classifier: Classifier,
) -> None:
    assert classifier.classify(SubmissionResult(302, retry_after=7.0)) == Classification(
        "unclassified", OutcomeClass.RETRYABLE, "request", 7.0
    )
