"""What a submission's result says and how its evidence reads (``fsm/outcomes.py``),
pinned where ``make mutate`` found them unpinned: the words of a JSON-RPC error body and
the quoted start of a body that is not JSON-RPC."""

from __future__ import annotations

from fsm.outcomes import SubmissionResult

RPC_ERROR = {"jsonrpc": "2.0", "id": 1, "error": {"code": -32600, "message": "Session not found"}}


def test_a_jsonrpc_error_body_says_its_message() -> None:
    # the error member is an object, not a string: only the JSON-RPC reading finds words
    assert SubmissionResult(404, RPC_ERROR).said() == "Session not found"


def test_the_evidence_quotes_what_a_plain_body_says_cut_to_120_characters() -> None:
    assert SubmissionResult(409, text="stream already attached").describe() == (
        "HTTP 409 'stream already attached'"
    )
    assert SubmissionResult(400, {"error": "bad cursor"}, retry_after=2.5).describe() == (
        "HTTP 400 'bad cursor' Retry-After 2.5 s"
    )
    long = "x" * 200
    assert SubmissionResult(500, text=long).describe() == f"HTTP 500 {'x' * 120!r}"
