"""Classify what an HTTP request of the client came back with: accepted, retryable or terminal.

Two requests of the client are judged by a table: the answer POST (did the server take
the answer?) and the resume GET (may the stream be resumed again?). A table is a tuple of
:class:`Rule` rows over an :class:`HttpResult`, first match wins, held by a
:class:`Classifier` that users extend with their own rows.

Answer submissions: :data:`DEFAULT_RULES`

============================  =======================================  ==========  ========
rule                          matches                                  class       scope
============================  =======================================  ==========  ========
``jsonrpc-session-gone``      JSON-RPC error "session not found /      terminal    session
                              terminated" (any HTTP status)
``jsonrpc-no-such-request``   JSON-RPC error meaning "no such pending  terminal    request
                              request" (any status: some servers wrap
                              it in a 500)
``http-404``                  HTTP 404 (session gone)                  terminal    session
``http-400``, ``http-410``    the server refuses this answer           terminal    request
``accepted``                  HTTP 200 or 202 (202 is *not* proof of   accepted    request
                              liveness: official servers answer 202
                              for late answers they drop)
``http-429``                  rate limited (honour ``Retry-After``)    retryable   request
``http-5xx``                  other server errors                      retryable   request
``transport-error``           no HTTP status: connection error,        retryable   request
                              timeout, reset
``other-4xx``                 any other 4xx                            terminal    request
============================  =======================================  ==========  ========

An outcome no row matches (1xx, 3xx, other 2xx) is *retryable* with rule name
``unclassified``: a retry is bounded, a silent acceptance could lose the answer.
Extend the table with :meth:`Classifier.with_rules` (your rows go first).

Resume GETs that did not open a stream: :data:`RESUME_RULES` (``scope="request"`` means
this stream). Terminal rows end the stream with one ``ResumeBudgetSpentError`` (reason
``not-resumable``); retryable ones count as a resume without progress and are retried
within the stream's budgets, after ``Retry-After`` when the server sent one. *Patient*
rows are retryable rows for a server that still holds the old connection (or says when to
come back): they spend no budget of resumes without progress, and are retried with backoff
and jitter within ``GuardConfig.resume_patience_s`` instead (see the guard).

============================  =======================================  ==========  ========
rule                          matches                                  class       scope
============================  =======================================  ==========  ========
``jsonrpc-session-gone``      JSON-RPC error "session not found"       terminal    session
``http-404``                  HTTP 404: the session is gone (Python,   terminal    session
                              TypeScript and Go servers alike)
``still-attached``            a 4xx whose words (``said()``: a         patient     request
                              JSON-RPC message, an ``error`` or
                              ``message`` string, or text) say the
                              old connection is still there
                              ("session already exists", "already
                              has an active connection", "already
                              attached", "conflicts with ongoing
                              stream", "only one SSE stream")
``http-400``                  missing or bad session header, or a      terminal    request
                              ``Last-Event-ID`` the server rejects
``http-405``                  the server offers no GET stream          terminal    request
                              (resumability unsupported)
``http-406``, ``http-410``    the server will never serve this GET     terminal    request
``http-409``                  conflict: the server still holds the     patient     request
                              old connection (or another GET)
``http-429-retry-after``      rate limited, ``Retry-After`` sent       patient     request
``http-503-retry-after``      unavailable, ``Retry-After`` sent        patient     request
``http-429``                  rate limited, no ``Retry-After``         retryable   request
``http-5xx``                  server errors, including an event        retryable   request
                              store that failed to replay
``transport-error``           no HTTP status: connection refused,      retryable   request
                              reset, timeout
``other-4xx``                 any other 4xx (401, 403, ...)            terminal    request
============================  =======================================  ==========  ========

Anything else (1xx, 3xx, a 2xx that opened no event stream) is *retryable* as
``unclassified``: the stream's budgets bound it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any, Literal


class OutcomeClass(Enum):
    """What an answer submission's outcome means for the request."""

    ACCEPTED = "accepted"
    RETRYABLE = "retryable"
    TERMINAL = "terminal"


@dataclass(frozen=True, slots=True)
class SubmissionResult:
    """What the client observed of one HTTP request (an answer POST, a resume GET).

    ``status`` is the HTTP status (``None`` when no response arrived), ``body`` the parsed
    JSON body if any, ``error`` the transport exception kind (e.g. ``"ConnectError"``,
    ``"ReadTimeout"``) when no response arrived, ``retry_after`` the parsed
    ``Retry-After`` header in seconds, ``text`` the start of a body that is not a JSON
    object, as text (some servers answer in plain text: "session already exists").
    """

    status: int | None
    body: Mapping[str, Any] | None = None
    error: str | None = None
    retry_after: float | None = None
    text: str | None = None

    def jsonrpc_error(self) -> tuple[int | None, str] | None:
        """``(code, message)`` of a JSON-RPC error body, or ``None``."""
        if not isinstance(self.body, Mapping):
            return None
        err = self.body.get("error")
        if not isinstance(err, Mapping):
            return None
        code = err.get("code")
        message = err.get("message")
        return (
            code if isinstance(code, int) else None,
            message if isinstance(message, str) else "",
        )

    def describe(self) -> str:
        """One line of evidence, e.g. ``"HTTP 500 JSON-RPC -32602 'Request not found'"``."""
        parts = [
            f"HTTP {self.status}" if self.status is not None else f"no response ({self.error})"
        ]
        rpc = self.jsonrpc_error()
        if rpc is not None:
            parts.append(f"JSON-RPC {rpc[0]} {rpc[1]!r}")
        elif said := self.said():
            parts.append(repr(said[:_DESCRIBED_TEXT]))
        if self.retry_after is not None:
            parts.append(f"Retry-After {self.retry_after:g} s")
        return " ".join(parts)

    def said(self) -> str | None:
        """What the body says in words: the JSON-RPC error's message, else the string
        ``error`` or ``message`` of a JSON object that is not JSON-RPC (the shape of many
        HTTP frameworks' errors: ``{"error": "stream already attached"}``), else the text
        of a body that is not JSON."""
        rpc = self.jsonrpc_error()
        if rpc is not None:
            return rpc[1]
        if isinstance(self.body, Mapping):
            for field in ("error", "message"):
                value = self.body.get(field)
                if isinstance(value, str):
                    return value
            return None
        return self.text

    def says(self, pattern: re.Pattern[str]) -> bool:
        """Whether what the body says (:meth:`said`) matches ``pattern``."""
        said = self.said()
        return bool(said) and pattern.search(said or "") is not None


_DESCRIBED_TEXT = 120
"""Characters of a plain-text body an error's evidence quotes."""


HttpResult = SubmissionResult
"""The same record under the name that fits a resume GET's result."""

Scope = Literal["request", "session"]


@dataclass(frozen=True, slots=True)
class Rule:
    """One row of the classification table.

    ``scope="session"`` means the outcome proves the whole session gone: every request
    and stream of it becomes terminal, not just this request. ``patient`` (retryable rows
    of a resume table only): the server still holds the old connection, or says when to
    come back; the guard retries within ``GuardConfig.resume_patience_s`` rather than its
    budget of resumes without progress.
    """

    name: str
    matches: Callable[[SubmissionResult], bool]
    outcome: OutcomeClass
    scope: Scope = "request"
    doc: str = ""
    patient: bool = False


@dataclass(frozen=True, slots=True)
class Classification:
    """The verdict for one :class:`SubmissionResult`: the rule that matched and its class."""

    rule: str
    outcome: OutcomeClass
    scope: Scope
    retry_after: float | None
    patient: bool = False
    """A patient retry (see :class:`Rule`)."""


_SESSION_GONE = re.compile(r"session.*(not found|terminated|expired|unknown)", re.I)
_NO_SUCH_REQUEST = re.compile(
    r"(unknown|no such|no pending|not pending|expired|stale|late)\b.*\b(request|id)\b"
    r"|\brequest\b.*\b(not found|unknown|expired|no longer)",
    re.I,
)


def _rpc_matches(pattern: re.Pattern[str]) -> Callable[[SubmissionResult], bool]:
    def matches(result: SubmissionResult) -> bool:
        rpc = result.jsonrpc_error()
        return rpc is not None and bool(pattern.search(rpc[1]))

    return matches


def _status_in(*statuses: int) -> Callable[[SubmissionResult], bool]:
    wanted = frozenset(statuses)
    return lambda r: r.status in wanted


def _status_range(low: int, high: int) -> Callable[[SubmissionResult], bool]:
    return lambda r: r.status is not None and low <= r.status <= high


_SESSION_GONE_RULE = Rule(
    "jsonrpc-session-gone",
    _rpc_matches(_SESSION_GONE),
    OutcomeClass.TERMINAL,
    "session",
    "JSON-RPC error saying the session is gone, whatever the HTTP status",
)
_HTTP_404 = Rule(
    "http-404",
    _status_in(404),
    OutcomeClass.TERMINAL,
    "session",
    "404 on a request carrying the session id: the session is gone",
)
_HTTP_410 = Rule("http-410", _status_in(410), OutcomeClass.TERMINAL, doc="gone for good")
_JSONRPC_ANSWERED = Rule(
    "jsonrpc-error",
    lambda r: r.jsonrpc_error() is not None,
    OutcomeClass.TERMINAL,
    doc="any other JSON-RPC error: the server answered, a resend cannot change it",
)
"""A one-call era's catch-all for JSON-RPC errors its own rules did not match
(:func:`one_call_rules` places it after the era's specific codes)."""
_RETRYABLE_TAIL = (
    Rule("http-429", _status_in(429), OutcomeClass.RETRYABLE, doc="rate limited"),
    Rule("http-5xx", _status_range(500, 599), OutcomeClass.RETRYABLE, doc="server error"),
    Rule(
        "transport-error",
        lambda r: r.status is None,
        OutcomeClass.RETRYABLE,
        doc="connection error, timeout or reset: no response arrived",
    ),
    Rule(
        "other-4xx",
        _status_range(401, 499),
        OutcomeClass.TERMINAL,
        doc="any other client error: retrying cannot help",
    ),
)


def one_call_rules(*own: Rule, before_transport: tuple[Rule, ...] = ()) -> tuple[Rule, ...]:
    """A one-call era's table (MRTR rounds, task requests): its ``own`` rules first, then
    every other JSON-RPC error terminal (the server answered: a resend cannot change it),
    404 and 410 terminal, the ``before_transport`` rules (e.g. a response the client's
    SDK could not parse), and the transport tail every table shares (429 and 5xx
    retryable, no response retryable, any other 4xx terminal). First match wins."""
    return (*own, _JSONRPC_ANSWERED, _HTTP_404, _HTTP_410, *before_transport, *_RETRYABLE_TAIL)


DEFAULT_RULES: tuple[Rule, ...] = (
    _SESSION_GONE_RULE,
    Rule(
        "jsonrpc-no-such-request",
        _rpc_matches(_NO_SUCH_REQUEST),
        OutcomeClass.TERMINAL,
        doc="JSON-RPC error meaning no such pending request, whatever the HTTP status",
    ),
    _HTTP_404,
    Rule("http-400", _status_in(400), OutcomeClass.TERMINAL, doc="the server refuses the answer"),
    _HTTP_410,
    Rule(
        "accepted",
        _status_in(200, 202),
        OutcomeClass.ACCEPTED,
        doc="accepted by the transport; 202 is not proof of liveness",
    ),
    *_RETRYABLE_TAIL,
)
"""How an answer POST's outcome is judged (the table in the module docstring)."""

_STILL_ATTACHED = re.compile(
    r"already (exists|attached|has an active connection|connected)"
    r"|conflicts with (an )?ongoing stream|only one sse stream",
    re.I,
)
"""What servers say when they refuse a resume because they still hold the old connection:
the TypeScript SDK ("Conflict: Stream already has an active connection"), the Go SDK
("stream ID conflicts with ongoing stream"), the Python and TypeScript SDKs for a second
GET ("Conflict: Only one SSE stream is allowed per session"), Render's hosted server
(400, plain text: "Session registration failed: session already exists")."""


def _with_retry_after(status: int) -> Callable[[SubmissionResult], bool]:
    return lambda r: r.status == status and r.retry_after is not None


RESUME_RULES: tuple[Rule, ...] = (
    _SESSION_GONE_RULE,
    _HTTP_404,
    Rule(
        "still-attached",
        lambda r: r.status is not None and 400 <= r.status <= 499 and r.says(_STILL_ATTACHED),
        OutcomeClass.RETRYABLE,
        doc="the server says it still holds the old connection (whatever the 4xx status)",
        patient=True,
    ),
    Rule(
        "http-400",
        _status_in(400),
        OutcomeClass.TERMINAL,
        doc="missing or bad session header, or a Last-Event-ID the server rejects",
    ),
    Rule(
        "http-405",
        _status_in(405),
        OutcomeClass.TERMINAL,
        doc="the server offers no GET stream: resumability unsupported",
    ),
    Rule("http-406", _status_in(406), OutcomeClass.TERMINAL, doc="the server refuses the Accept"),
    _HTTP_410,
    Rule(
        "http-409",
        _status_in(409),
        OutcomeClass.RETRYABLE,
        doc="conflict: the server still holds the old connection",
        patient=True,
    ),
    Rule(
        "http-429-retry-after",
        _with_retry_after(429),
        OutcomeClass.RETRYABLE,
        doc="rate limited, and the server said when to come back",
        patient=True,
    ),
    Rule(
        "http-503-retry-after",
        _with_retry_after(503),
        OutcomeClass.RETRYABLE,
        doc="unavailable for now, and the server said when to come back",
        patient=True,
    ),
    *_RETRYABLE_TAIL,
)
"""How a failed resume GET is judged (the second table in the module docstring)."""


@dataclass(frozen=True, slots=True)
class Classifier:
    """An ordered table of :class:`Rule` rows; the first match wins."""

    rules: tuple[Rule, ...] = DEFAULT_RULES
    """The rows, first match wins (answer POSTs by default; :data:`RESUME_RULES` for
    resume GETs)."""

    @classmethod
    def for_resumes(cls) -> Classifier:
        """The default classifier of resume GET results (:data:`RESUME_RULES`)."""
        return cls(RESUME_RULES)

    def with_rules(self, *rules: Rule) -> Classifier:
        """A classifier that tries ``rules`` first, then this one's."""
        return Classifier(tuple(rules) + self.rules)

    def classify(self, result: SubmissionResult) -> Classification:
        """Classify ``result``. Never raises: a rule that raises is skipped."""
        for rule in self.rules:
            try:
                hit = rule.matches(result)
            except Exception:  # a user rule must not crash the guard
                hit = False
            if hit:
                patient = rule.patient and rule.outcome is OutcomeClass.RETRYABLE
                return Classification(
                    rule.name, rule.outcome, rule.scope, result.retry_after, patient
                )
        return Classification("unclassified", OutcomeClass.RETRYABLE, "request", result.retry_after)

    def table(self) -> Sequence[tuple[str, str, str, str]]:
        """``(name, class, scope, doc)`` rows, for documentation and diagrams."""
        return [(r.name, r.outcome.value, r.scope, r.doc) for r in self.rules]


def server_wait(seconds: float, cap_s: float) -> float:
    """A wait a server asked for (its ``Retry-After`` or ``retry:``, in seconds), at most
    ``cap_s``: what an infinite or not-a-number value asks for too. No server can make a
    client wait without end (the guard's resumes and resubmissions, the MRTR rounds'
    resends alike)."""
    return seconds if seconds <= cap_s else cap_s


def backoff_delay(attempt: int, initial_s: float, factor: float, max_s: float) -> float:
    """The delay before retry number ``attempt + 1``: ``initial_s * factor**attempt``,
    at most ``max_s`` (the guard's resumes and the MRTR rounds' resends alike)."""
    return min(initial_s * factor**attempt, max_s)
