"""What a client feeds the guard: one frozen dataclass per kind of event.

Streams are named by the client (``StreamId``, any string unique within the session,
e.g. ``"post:2"`` or ``"get"``). Times come from the clock injected into the guard,
never from these events, so a recorded sequence of events replays identically.

A stream's name is also the name of its interaction, which ends exactly once (P5): a
stream that ended is never opened again under the same name. The standalone GET stream
is the one a client reopens (a fresh GET, without ``Last-Event-ID``, after the previous
one ended): each such connection generation is a stream of its own, named by
:func:`standalone_stream`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fsm.errors import RequestId, RequestKey
from fsm.outcomes import SubmissionResult

StreamId = str

STANDALONE = "get"
"""The name of the standalone GET stream's first connection generation."""


def standalone_stream(generation: int = 1) -> StreamId:
    """The name of connection generation ``generation`` (from 1) of the standalone GET
    stream: ``"get"``, then ``"get/2"``, ``"get/3"``, ...

    A generation starts with a fresh GET (no ``Last-Event-ID``) and lasts while the guard
    resumes it; once it ended (the guard gave up on it, e.g. it was cut before any event
    id, or the session expired), the next fresh GET is the next generation: a new stream
    with its own transport machine and its own single outcome. Raises ``ValueError`` for
    a generation below 1.
    """
    if generation < 1:
        raise ValueError(f"generation must be >= 1, got {generation}")
    return STANDALONE if generation == 1 else f"{STANDALONE}/{generation}"


def standalone_generation(stream: StreamId) -> int | None:
    """The generation of a :func:`standalone_stream` name, ``None`` for any other name."""
    if stream == STANDALONE:
        return 1
    prefix, _, number = stream.partition("/")
    if prefix != STANDALONE or not (number.isascii() and number.isdigit()) or number[0] == "0":
        return None
    generation = int(number)
    return generation if generation > 1 else None


@dataclass(frozen=True, slots=True)
class SessionStarted:
    """The initialize response carried ``Mcp-Session-Id: session`` (use ``""`` if none)."""

    session: str


@dataclass(frozen=True, slots=True)
class StreamOpened:
    """An SSE stream opened: a POST's response stream for request ``origin``, or the
    standalone GET stream (``origin=None``)."""

    stream: StreamId
    origin: RequestId | None = None


@dataclass(frozen=True, slots=True)
class SseEvent:
    """One SSE event on ``stream``.

    ``data`` is the raw ``data:`` field or an already-decoded JSON object; ``event_id``
    the ``id:`` field; ``retry_ms`` the ``retry:`` field. ``replayed`` says whether the
    event is a replay; ``None`` lets the guard infer it (every event on a resumed
    connection counts as replayed, which is the conservative reading).
    """

    stream: StreamId
    data: str | bytes | Mapping[str, Any] | None
    event_id: str | None = None
    retry_ms: int | None = None
    replayed: bool | None = None


@dataclass(frozen=True, slots=True)
class ReplayBatch:
    """Events a resume delivered, decided as a batch: a request cancelled later in the
    same batch is never presented."""

    stream: StreamId
    events: tuple[SseEvent, ...]


@dataclass(frozen=True, slots=True)
class StreamLost:
    """The connection of ``stream`` ended: ``clean`` (stream ended) or abrupt (error)."""

    stream: StreamId
    clean: bool


@dataclass(frozen=True, slots=True)
class TimerFired:
    """The backoff the guard asked for with ``Wait`` has elapsed."""

    stream: StreamId


@dataclass(frozen=True, slots=True)
class StreamResumed:
    """The resume GET (``Last-Event-ID``) was answered 200 with an event stream."""

    stream: StreamId


@dataclass(frozen=True, slots=True)
class ResumeRefused:
    """The resume GET opened no event stream: HTTP ``status`` (with the parsed JSON
    ``body`` if any, ``Retry-After`` in seconds, and the start of a body that is not a
    JSON object as ``text``), or no response (``error`` names the transport exception
    kind). Judged by ``GuardConfig.resume_classifier``."""

    stream: StreamId
    status: int | None = None
    error: str | None = None
    body: Mapping[str, Any] | None = None
    retry_after: float | None = None
    text: str | None = None

    def result(self) -> SubmissionResult:
        """What the GET came back with, as the classifier reads it."""
        return SubmissionResult(self.status, self.body, self.error, self.retry_after, self.text)


@dataclass(frozen=True, slots=True)
class UserAnswered:
    """The user (or handler) answered the request ``key`` with ``answer`` (the JSON-RPC
    result object, e.g. ``{"action": "accept", "content": {...}}``)."""

    key: RequestKey
    answer: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class SubmissionOutcome:
    """What came back for the answer POST of ``key``."""

    key: RequestKey
    result: SubmissionResult


@dataclass(frozen=True, slots=True)
class OriginResponse:
    """The origin's response arrived outside the SSE stream (plain JSON POST response)."""

    stream: StreamId


@dataclass(frozen=True, slots=True)
class SessionExpired:
    """HTTP 404 on any request carrying the session id."""


@dataclass(frozen=True, slots=True)
class StreamAbandoned:
    """The application stopped following ``stream`` and will not resume it: its reader
    went away for good, the stream broke one of the application's own bounds (an
    event larger than it will hold), or the client closed the session
    (:data:`SESSION_CLOSED`). ``reason`` is the stable identifier the ending error
    carries (``"abandoned"``, ``"event-too-large"``, ``"session-closed"``); ``detail``
    says what happened. The stream ends ``dead`` with one
    :class:`~fsm.errors.StreamAbandonedError` (its requests die with it); on a stream
    already ended the event is ignored."""

    stream: StreamId
    reason: str = "abandoned"
    detail: str = ""


SESSION_CLOSED = "session-closed"
"""The :class:`StreamAbandoned` reason of a stream still open when the client closed its
session (it leaves the session, or sends the DELETE that ends it): the stream ended
because the client ended everything, which is a normal end, not a failure. An observer
records such an end with outcome ``closed`` (:func:`fsm.sse.observe.did`), and an adapter
does not count it among its failures."""


@dataclass(frozen=True, slots=True)
class LivenessAsserted:
    """An out-of-band liveness assertion for ``key`` (pluggable, see ``LivenessOracle``)."""

    key: RequestKey


Event = (
    SessionStarted
    | StreamOpened
    | SseEvent
    | ReplayBatch
    | StreamLost
    | TimerFired
    | StreamResumed
    | ResumeRefused
    | UserAnswered
    | SubmissionOutcome
    | OriginResponse
    | SessionExpired
    | LivenessAsserted
    | StreamAbandoned
)
