"""Classify what an MRTR retry (or the first request of the call) came back with, when it
was not a result: a JSON-RPC error or no response at all.

The same :class:`~fsm.outcomes.Rule` / :class:`~fsm.outcomes.Classifier` machinery as
answer POSTs, over a :class:`~fsm.outcomes.SubmissionResult` whose body is the JSON-RPC
error response. Table :data:`MRTR_RULES`, first match wins:

==========================  =======================================  ==========
rule                        matches                                  class
==========================  =======================================  ==========
``invalid-request-state``   JSON-RPC error whose ``data.reason`` is  terminal
                            ``invalid_request_state`` (python-sdk and
                            typescript-sdk servers: -32602 "Invalid or
                            expired requestState"), or any error whose
                            message names ``requestState``
``header-mismatch``         -32020: the request's headers and body   terminal
                            disagree (the SDK re-lists tools first)
``missing-capability``      -32021: the client lacks a capability    terminal
``unsupported-version``     -32022: the protocol version is refused  terminal
``jsonrpc-error``           any other JSON-RPC error: the server     terminal
                            answered, a resend cannot change it
``http-404``, ``http-410``  the endpoint is gone                     terminal
``unparseable-result``      no response the client's SDK could       terminal
                            parse (``error="ValidationError"``)
``http-429``                rate limited (honour ``Retry-After``)    retryable
``http-5xx``                server error without a JSON-RPC body     retryable
``transport-error``         no response: connection error, timeout   retryable
``other-4xx``               any other client error                   terminal
==========================  =======================================  ==========

A retryable outcome resends *the same* retry (same answers, same state) after a backoff,
bounded by ``MrtrConfig.max_resends``: it never asks the user again. A terminal outcome
ends the call with one typed error: :class:`~fsm.errors.RequestStateExpiredError` for
``invalid-request-state``, :class:`~fsm.errors.MalformedInputRequiredError` for
``unparseable-result``, :class:`~fsm.errors.CallRejectedError` (``reason`` = the rule)
for the others. Unmatched outcomes are retryable as ``unclassified``, bounded the same way.
The error's message says who rejected what (:func:`rejection`): the server rejected the
round, or, for ``unparseable-result``, the client's own SDK rejected the server's result.
"""

from __future__ import annotations

from collections.abc import Mapping

from fsm.errors import (
    CallRejectedError,
    InteractionFailed,
    MalformedInputRequiredError,
    RequestStateExpiredError,
)
from fsm.outcomes import Classifier, OutcomeClass, Rule, SubmissionResult, one_call_rules

INVALID_REQUEST_STATE = "invalid_request_state"
"""``data.reason`` of the official servers' rejection of an echoed ``requestState``."""

STATE_REJECTED = SubmissionResult(
    None,
    {
        "jsonrpc": "2.0",
        "id": None,
        "error": {
            "code": -32602,
            "message": "Invalid or expired requestState",
            "data": {"reason": INVALID_REQUEST_STATE},
        },
    },
)
"""The round outcome the python and typescript SDK servers send for any state they cannot
verify (one frozen message and reason whatever the cause), as the MRTR table sees it."""


def _rpc_error(result: SubmissionResult) -> Mapping[str, object] | None:
    body = result.body
    err = body.get("error") if isinstance(body, Mapping) else None
    return err if isinstance(err, Mapping) else None


def _invalid_state(result: SubmissionResult) -> bool:
    err = _rpc_error(result)
    if err is None:
        return False
    data = err.get("data")
    if isinstance(data, Mapping) and data.get("reason") == INVALID_REQUEST_STATE:
        return True
    message = err.get("message")
    return isinstance(message, str) and "requeststate" in message.lower()


def _code(code: int) -> Rule:
    names = {-32020: "header-mismatch", -32021: "missing-capability", -32022: "unsupported-version"}
    return Rule(
        names[code],
        lambda r: (err := _rpc_error(r)) is not None and err.get("code") == code,
        OutcomeClass.TERMINAL,
        doc=f"JSON-RPC {code}",
    )


MRTR_RULES: tuple[Rule, ...] = one_call_rules(
    Rule(
        "invalid-request-state",
        _invalid_state,
        OutcomeClass.TERMINAL,
        doc="the echoed requestState is expired or unverifiable: terminal for the call",
    ),
    _code(-32020),
    _code(-32021),
    _code(-32022),
    before_transport=(
        Rule(
            "unparseable-result",
            lambda r: r.status is None and r.error == "ValidationError",
            OutcomeClass.TERMINAL,
            doc="the client's SDK refused the result's shape: a resend gets the same",
        ),
    ),
)
"""How a failed MRTR round is judged (the table in the module docstring)."""

MRTR_CLASSIFIER = Classifier(MRTR_RULES)
"""The default classifier of failed MRTR rounds."""

ERRORS: Mapping[str, type[InteractionFailed]] = {
    "invalid-request-state": RequestStateExpiredError,
    "unparseable-result": MalformedInputRequiredError,
}
"""The typed error of a terminal rule; any other terminal rule gives ``CallRejectedError``."""


def error_for(rule: str) -> type[InteractionFailed]:
    """The error class a terminal ``rule`` ends the call with."""
    return ERRORS.get(rule, CallRejectedError)


REJECTED_BY_THE_CLIENT: frozenset[str] = frozenset({"unparseable-result"})
"""Terminal rules that match what the client's own SDK refused: the server answered, and
its result did not parse (e.g. mcp 2.3.0 refuses an input-required result without
``resultType``). A call such a rule ends says the client's SDK rejected the round's
result; any other terminal rule, that the server rejected the round."""


def rejection(call: str, round_no: int, rule: str) -> str:
    """The message of a call ended by terminal ``rule`` in round ``round_no``: who
    rejected what (:data:`REJECTED_BY_THE_CLIENT`), then the rule, e.g. ``"call:1: the
    server rejected round 1 (jsonrpc-error)"`` or ``"call:1: the client's SDK rejected
    the server's result of round 0 (unparseable-result)"``."""
    if rule in REJECTED_BY_THE_CLIENT:
        return f"{call}: the client's SDK rejected the server's result of round {round_no} ({rule})"
    return f"{call}: the server rejected round {round_no} ({rule})"
