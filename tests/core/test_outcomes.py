"""The submission outcome table: one test per row of DEFAULT_RULES, and the guard's
reaction to each class (accepted, terminal per request or session, retryable)."""

from __future__ import annotations

from typing import Any

import pytest
from core_support import ENGINES, GET, POST, SESSION, elicit, make_guard, of, progress

from fsm import Guard, GuardConfig, SubmissionResult
from fsm import events as ev
from fsm.actions import Complete, Fail, Ignore, Present, Resume, Submit, Wait, Withdraw
from fsm.errors import SessionExpiredError, SubmissionFailedError, UnknownPendingRequestError
from fsm.outcomes import DEFAULT_RULES, RESUME_RULES, Classifier, OutcomeClass, Rule

KEY = (SESSION, 1)
ANSWER = {"action": "accept", "content": {"n": 1}}


def rpc_error(message: str, code: int = -32602) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 1, "error": {"code": code, "message": message}}


# One example per row, chosen so that no earlier row matches it.
ROW_EXAMPLES: dict[str, tuple[SubmissionResult, OutcomeClass, str]] = {
    "jsonrpc-session-gone": (
        SubmissionResult(400, rpc_error("Session not found")),
        OutcomeClass.TERMINAL,
        "session",
    ),
    "jsonrpc-no-such-request": (
        SubmissionResult(500, rpc_error("Request not found")),
        OutcomeClass.TERMINAL,
        "request",
    ),
    "http-404": (SubmissionResult(404), OutcomeClass.TERMINAL, "session"),
    "http-400": (SubmissionResult(400), OutcomeClass.TERMINAL, "request"),
    "http-410": (SubmissionResult(410), OutcomeClass.TERMINAL, "request"),
    "accepted": (SubmissionResult(202), OutcomeClass.ACCEPTED, "request"),
    "http-429": (SubmissionResult(429, retry_after=7.0), OutcomeClass.RETRYABLE, "request"),
    "http-5xx": (SubmissionResult(503), OutcomeClass.RETRYABLE, "request"),
    "transport-error": (
        SubmissionResult(None, error="ReadTimeout"),
        OutcomeClass.RETRYABLE,
        "request",
    ),
    "other-4xx": (SubmissionResult(403), OutcomeClass.TERMINAL, "request"),
}


def test_every_default_row_has_an_example() -> None:
    assert [r.name for r in DEFAULT_RULES] == list(ROW_EXAMPLES)


@pytest.mark.parametrize("name", list(ROW_EXAMPLES))
def test_default_row_classifies_its_example(name: str) -> None:
    result, outcome, scope = ROW_EXAMPLES[name]
    verdict = Classifier().classify(result)
    assert (verdict.rule, verdict.outcome, verdict.scope) == (name, outcome, scope)
    assert verdict.retry_after == result.retry_after
    row = next(r for r in DEFAULT_RULES if r.name == name)
    assert row.matches(result)
    # no earlier row matches: the example really exercises this row
    for earlier in DEFAULT_RULES[: DEFAULT_RULES.index(row)]:
        assert not earlier.matches(result), earlier.name


@pytest.mark.parametrize(
    ("result", "rule"),
    [
        (SubmissionResult(200), "accepted"),
        (SubmissionResult(401), "other-4xx"),
        (SubmissionResult(499), "other-4xx"),
        (SubmissionResult(500), "http-5xx"),
        (SubmissionResult(599), "http-5xx"),
        (SubmissionResult(None, error="ConnectError"), "transport-error"),
        (SubmissionResult(500, rpc_error("unknown request id 7")), "jsonrpc-no-such-request"),
        (
            SubmissionResult(200, rpc_error("No pending request with id 3")),
            "jsonrpc-no-such-request",
        ),
        (SubmissionResult(502, rpc_error("Session terminated")), "jsonrpc-session-gone"),
        (SubmissionResult(500, rpc_error("Internal error")), "http-5xx"),
        (SubmissionResult(500, {"error": "Request not found"}), "http-5xx"),  # not JSON-RPC shape
        (SubmissionResult(500, {"error": {"code": 1, "message": 5}}), "http-5xx"),
    ],
)
def test_boundary_examples(result: SubmissionResult, rule: str) -> None:
    assert Classifier().classify(result).rule == rule


@pytest.mark.parametrize("status", [100, 204, 302, 304, 600])
def test_unclassified_outcomes_are_retryable(status: int) -> None:
    verdict = Classifier().classify(SubmissionResult(status))
    assert (verdict.rule, verdict.outcome) == ("unclassified", OutcomeClass.RETRYABLE)


def test_with_rules_puts_user_rows_first() -> None:
    mine = Rule("proxy-502-gone", lambda r: r.status == 502, OutcomeClass.TERMINAL)
    classifier = Classifier().with_rules(mine)
    assert classifier.rules[0] is mine
    assert classifier.rules[1:] == DEFAULT_RULES
    assert classifier.classify(SubmissionResult(502)).rule == "proxy-502-gone"
    assert classifier.classify(SubmissionResult(503)).rule == "http-5xx"
    # a user row can override a default one because it comes first
    lenient = Classifier().with_rules(
        Rule("ok-404", lambda r: r.status == 404, OutcomeClass.ACCEPTED)
    )
    assert lenient.classify(SubmissionResult(404)).outcome is OutcomeClass.ACCEPTED
    assert [row[0] for row in classifier.table()][:2] == ["proxy-502-gone", "jsonrpc-session-gone"]


def test_a_user_rule_that_raises_is_skipped() -> None:
    def boom(result: SubmissionResult) -> bool:
        raise RuntimeError("buggy rule")

    classifier = Classifier().with_rules(Rule("buggy", boom, OutcomeClass.ACCEPTED))
    assert classifier.classify(SubmissionResult(410)).rule == "http-410"
    assert classifier.classify(SubmissionResult(202)).rule == "accepted"


def test_describe_carries_the_evidence() -> None:
    assert (
        SubmissionResult(500, rpc_error("Request not found")).describe()
        == "HTTP 500 JSON-RPC -32602 'Request not found'"
    )
    assert SubmissionResult(None, error="ReadTimeout").describe() == "no response (ReadTimeout)"


# ------------------------------------------------------------ the guard's reaction


def answered(engine: str, stream: str = POST, **config: Any) -> Guard:
    guard = make_guard(engine, **config)
    guard.feed(ev.SseEvent(stream, progress(), "c1"))
    assert of(guard.feed(ev.SseEvent(stream, elicit(1), "c2")), Present)
    assert guard.feed(ev.UserAnswered(KEY, ANSWER)) == (Submit(KEY, ANSWER, 1, 0.0),)
    return guard


@pytest.mark.parametrize("status", [200, 202])
def test_accepted_moves_to_submitted(engine: str, status: int) -> None:
    guard = answered(engine)
    assert guard.feed(ev.SubmissionOutcome(KEY, SubmissionResult(status))) == ()
    assert guard.state_of(KEY) == "submitted"
    assert guard.stream_state(POST) == "open"


def test_202_for_a_late_answer_is_still_just_accepted(engine: str) -> None:
    """202 proves no liveness: the request is submitted, not resolved, and the stream
    still owns the outcome."""
    guard = answered(engine)
    guard.feed(ev.SubmissionOutcome(KEY, SubmissionResult(202)))
    assert guard.state_of(KEY) == "submitted"
    assert guard.feed(ev.OriginResponse(POST)) == (Complete(POST),)
    assert guard.state_of(KEY) == "resolved"


def test_accepted_answer_completes_a_request_without_origin(engine: str) -> None:
    guard = answered(engine, stream=GET)
    assert guard.feed(ev.SubmissionOutcome(KEY, SubmissionResult(200))) == (Complete(f"{GET}#1"),)
    assert not of(guard.feed(ev.SessionExpired()), Complete)


TERMINAL_REQUEST = ["jsonrpc-no-such-request", "http-400", "http-410", "other-4xx"]


@pytest.mark.parametrize("rule", TERMINAL_REQUEST)
def test_terminal_rejection_fails_once_and_never_resumes(engine: str, rule: str) -> None:
    guard = answered(engine)
    result = ROW_EXAMPLES[rule][0]
    acts = guard.feed(ev.SubmissionOutcome(KEY, result))
    assert [type(a) for a in acts] == [Fail]
    fail = acts[0]
    assert isinstance(fail, Fail) and isinstance(fail.error, UnknownPendingRequestError)
    assert fail.interaction == POST and fail.error.key == KEY
    assert fail.error.evidence[-1].endswith(f"-> {rule} (terminal)")
    assert guard.state_of(KEY) == "dead"
    assert guard.stream_state(POST) == "dead"
    later = [
        *guard.feed(ev.StreamLost(POST, clean=False)),
        *guard.feed(ev.TimerFired(POST)),
        *guard.feed(ev.SubmissionOutcome(KEY, SubmissionResult(500))),
        *guard.feed(ev.SseEvent(POST, elicit(1), "c2", replayed=True)),
    ]
    assert not of(later, Resume) and not of(later, Fail) and not of(later, Submit)
    assert not of(later, Present)


def test_500_with_no_such_request_body_is_terminal_not_retried(engine: str) -> None:
    guard = answered(engine)
    body = {"jsonrpc": "2.0", "id": 1, "error": {"code": -32603, "message": "unknown request id"}}
    acts = guard.feed(ev.SubmissionOutcome(KEY, SubmissionResult(500, body)))
    assert not of(acts, Submit)
    assert [type(a) for a in acts] == [Fail]
    assert "jsonrpc-no-such-request" in acts[0].error.evidence[-1]  # type: ignore[union-attr]


@pytest.mark.parametrize("rule", ["jsonrpc-session-gone", "http-404"])
def test_session_scope_rejection_expires_the_session(engine: str, rule: str) -> None:
    guard = answered(engine)
    acts = guard.feed(ev.SubmissionOutcome(KEY, ROW_EXAMPLES[rule][0]))
    fails = of(acts, Fail)
    assert sorted(f.interaction for f in fails) == [GET, POST]
    assert all(isinstance(f.error, SessionExpiredError) for f in fails)
    assert guard.stream_state(GET) == "dead"


@pytest.mark.parametrize(
    ("result", "first_delay"),
    [
        (SubmissionResult(429, retry_after=7.0), 7.0),
        (SubmissionResult(503), 0.25),
        (SubmissionResult(None, error="ConnectError"), 0.25),
        (SubmissionResult(302), 0.25),
    ],
    ids=["http-429", "http-5xx", "transport-error", "unclassified"],
)
def test_retryable_resubmits_same_answer_bounded_never_presents(
    engine: str, result: SubmissionResult, first_delay: float
) -> None:
    guard = answered(engine, max_submit_attempts=3, backoff_initial_s=0.25, backoff_factor=2.0)
    all_acts: list[object] = []
    acts = guard.feed(ev.SubmissionOutcome(KEY, result))
    assert acts == (Submit(KEY, ANSWER, 2, first_delay),)
    all_acts += acts
    acts = guard.feed(ev.SubmissionOutcome(KEY, result))
    expected_second = 7.0 if result.status == 429 else 0.5
    assert acts == (Submit(KEY, ANSWER, 3, expected_second),)
    all_acts += acts
    acts = guard.feed(ev.SubmissionOutcome(KEY, result))
    all_acts += acts
    assert [type(a) for a in acts] == [Fail]
    assert isinstance(acts[0].error, SubmissionFailedError)  # type: ignore[union-attr]
    assert "3 times" in str(acts[0].error)  # type: ignore[union-attr]
    assert not of(all_acts, Present) and not of(all_acts, Resume)
    assert all(s.answer == ANSWER for s in of(all_acts, Submit))
    assert guard.state_of(KEY) == "dead"


def test_retry_then_accepted(engine: str) -> None:
    guard = answered(engine)
    assert of(guard.feed(ev.SubmissionOutcome(KEY, SubmissionResult(503))), Submit)
    assert guard.feed(ev.SubmissionOutcome(KEY, SubmissionResult(202))) == ()
    assert guard.state_of(KEY) == "submitted"


def test_outcome_without_pending_submission_is_ignored(engine: str) -> None:
    guard = answered(engine)
    guard.feed(ev.SubmissionOutcome(KEY, SubmissionResult(202)))
    acts = guard.feed(ev.SubmissionOutcome(KEY, SubmissionResult(202)))
    assert [a.reason for a in of(acts, Ignore)] == ["no-submission-pending"]
    acts = guard.feed(ev.SubmissionOutcome((SESSION, 42), SubmissionResult(202)))
    assert [a.reason for a in of(acts, Ignore)] == ["no-submission-pending"]


def test_user_rule_reaches_the_guard(engine: str) -> None:
    gone = Rule("proxy-502-gone", lambda r: r.status == 502, OutcomeClass.TERMINAL)
    guard = answered(engine, classifier=Classifier().with_rules(gone))
    acts = guard.feed(ev.SubmissionOutcome(KEY, SubmissionResult(502)))
    assert [type(a) for a in acts] == [Fail]
    assert "proxy-502-gone" in acts[0].error.evidence[-1]  # type: ignore[union-attr]
    assert not of(acts, Withdraw)


# Resume GETs: one example per row of RESUME_RULES, taken from what the official SDK
# servers answer on a resume (docs/resumption.md has the full table with sources).
RESUME_ROW_EXAMPLES: dict[str, tuple[SubmissionResult, OutcomeClass, str]] = {
    "jsonrpc-session-gone": (  # python mcp 2.3.0's session manager (error body, no id)
        SubmissionResult(400, rpc_error("Session not found", -32600)),
        OutcomeClass.TERMINAL,
        "session",
    ),
    "http-404": (SubmissionResult(404), OutcomeClass.TERMINAL, "session"),  # go: plain text
    "still-attached": (  # render's hosted server, for about 120 s after a disconnect
        SubmissionResult(400, text="Session registration failed: session already exists"),
        OutcomeClass.RETRYABLE,
        "request",
    ),
    "http-400": (  # typescript: a Last-Event-ID its event store does not know
        SubmissionResult(400, rpc_error("Invalid event ID format", -32000)),
        OutcomeClass.TERMINAL,
        "request",
    ),
    "http-405": (SubmissionResult(405), OutcomeClass.TERMINAL, "request"),  # go: stateless
    "http-406": (SubmissionResult(406), OutcomeClass.TERMINAL, "request"),  # python: Accept
    "http-410": (SubmissionResult(410), OutcomeClass.TERMINAL, "request"),
    "http-409": (  # a conflict in other words than still-attached's (ibm contextforge)
        SubmissionResult(409, {"detail": "listener claimed"}),
        OutcomeClass.RETRYABLE,
        "request",
    ),
    "http-429-retry-after": (
        SubmissionResult(429, retry_after=3.0),
        OutcomeClass.RETRYABLE,
        "request",
    ),
    "http-503-retry-after": (  # ibm contextforge, its redis down
        SubmissionResult(503, retry_after=5.0),
        OutcomeClass.RETRYABLE,
        "request",
    ),
    "http-429": (SubmissionResult(429), OutcomeClass.RETRYABLE, "request"),
    "http-5xx": (  # python: "Error replaying events"
        SubmissionResult(500, rpc_error("Error replaying events", -32603)),
        OutcomeClass.RETRYABLE,
        "request",
    ),
    "transport-error": (
        SubmissionResult(None, error="ConnectError"),
        OutcomeClass.RETRYABLE,
        "request",
    ),
    "other-4xx": (SubmissionResult(403), OutcomeClass.TERMINAL, "request"),  # go: Host check
}


@pytest.mark.parametrize(
    "result",
    [
        SubmissionResult(409, {"error": "stream already attached"}),
        SubmissionResult(409, {"message": "session already has an active connection"}),
    ],
)
def test_a_plain_json_error_saying_still_attached_is_patient(result: SubmissionResult) -> None:
    # not JSON-RPC: the words are in the object's own "error" or "message" string
    row = next(r for r in RESUME_RULES if r.matches(result))
    assert row.name == "still-attached"


def test_every_resume_row_has_an_example() -> None:
    assert [r.name for r in RESUME_RULES] == list(RESUME_ROW_EXAMPLES)


@pytest.mark.parametrize("name", list(RESUME_ROW_EXAMPLES))
def test_resume_row_classifies_its_example(name: str) -> None:
    result, outcome, scope = RESUME_ROW_EXAMPLES[name]
    verdict = Classifier.for_resumes().classify(result)
    assert (verdict.rule, verdict.outcome, verdict.scope) == (name, outcome, scope)
    row = next(r for r in RESUME_RULES if r.name == name)
    for earlier in RESUME_RULES[: RESUME_RULES.index(row)]:
        assert not earlier.matches(result), earlier.name


@pytest.mark.parametrize("name", list(RESUME_ROW_EXAMPLES))
@pytest.mark.parametrize("engine", ENGINES)
def test_the_guard_acts_on_each_resume_row(engine: str, name: str) -> None:
    """Session rows expire the session, request rows end the stream once, retryable rows
    wait (after Retry-After when sent) and resume from the same cursor."""
    result, outcome, scope = RESUME_ROW_EXAMPLES[name]
    guard = make_guard(engine)
    guard.feed(ev.SseEvent(POST, progress(), "e1"))
    guard.feed(ev.StreamLost(POST, clean=False))
    guard.feed(ev.TimerFired(POST))
    acts = guard.feed(
        ev.ResumeRefused(
            POST, result.status, result.error, result.body, result.retry_after, result.text
        )
    )
    if scope == "session":
        fails = of(acts, Fail)
        assert fails and all(isinstance(f.error, SessionExpiredError) for f in fails)
        assert guard.expired
    elif outcome is OutcomeClass.TERMINAL:
        [fail] = of(acts, Fail)
        assert fail.error.reason == "not-resumable" and f"({name}: terminal)" in str(fail.error)
        assert guard.stream_state(POST) == "dead"
    else:
        [wait] = of(acts, Wait)
        if result.retry_after is not None:
            assert wait.delay_s == result.retry_after
        assert of(guard.feed(ev.TimerFired(POST)), Resume) == [Resume(POST, "e1")]


@pytest.mark.parametrize("engine", ENGINES)
def test_resume_rules_extend_like_answer_rules(engine: str) -> None:
    """A deployment whose gateway answers 503 "draining" for good can say so."""
    draining = Rule(
        "draining",
        lambda r: r.status == 503,
        OutcomeClass.TERMINAL,
        doc="this replica will not serve the stream again",
    )
    guard = make_guard(engine, resume_classifier=Classifier.for_resumes().with_rules(draining))
    guard.feed(ev.SseEvent(POST, progress(), "e1"))
    guard.feed(ev.StreamLost(POST, clean=False))
    guard.feed(ev.TimerFired(POST))
    [fail] = of(guard.feed(ev.ResumeRefused(POST, 503)), Fail)
    assert "draining" in str(fail.error)
    assert GuardConfig().resume_classifier.rules == RESUME_RULES
