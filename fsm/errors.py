"""Typed errors: the terminal outcomes a guard reports, and misuse of the guard.

Every terminal outcome carries the request key (or stream) it concerns, a machine-
readable ``reason`` and ``evidence``: the facts that led to the decision, oldest first
(e.g. ``("presented at t=0.0", "deadline t=30.0", "replayed at t=41.5 without liveness
assertion")``). The guard never raises these out of :meth:`fsm.sse.guard.Guard.feed`; it
returns them inside a :class:`fsm.actions.Fail` action, exactly once per interaction.
Adapters raise them to the caller of the tool call.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

RequestId = int | str
"""A JSON-RPC request id. ``1`` and ``"1"`` are distinct ids."""

RequestKey = tuple[str, RequestId]
"""``(session id, request id)``: request ids restart at 1 per session."""


class GuardError(Exception):
    """Base class of every error this library defines."""


class InteractionFailed(GuardError):
    """An interaction ended without completing. Subclasses name why.

    ``key`` is the request key that killed it (``None`` when the stream itself died),
    ``stream`` the stream it ran on, ``reason`` a stable identifier, ``evidence`` the facts.
    """

    reason: str = "failed"

    def __init__(
        self,
        message: str,
        *,
        key: RequestKey | None = None,
        stream: str | None = None,
        reason: str | None = None,
        evidence: Sequence[str] = (),
    ) -> None:
        super().__init__(message)
        self.key = key
        self.stream = stream
        if reason is not None:
            self.reason = reason
        self.evidence: tuple[str, ...] = tuple(evidence)

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready summary (used by event logs and ``--json`` outputs)."""
        return {
            "error": type(self).__name__,
            "reason": self.reason,
            "message": str(self),
            "key": list(self.key) if self.key is not None else None,
            "stream": self.stream,
            "evidence": list(self.evidence),
        }


class StaleRequestError(InteractionFailed):
    """A replayed request had no liveness assertion and was past its recorded deadline."""

    reason = "stale-request"


class UnknownPendingRequestError(InteractionFailed):
    """The server rejected the answer: the request no longer exists (terminal)."""

    reason = "unknown-pending-request"


class SessionExpiredError(InteractionFailed):
    """The session is gone (HTTP 404 on a request carrying its id). Start a new one."""

    reason = "session-expired"


class ResumeBudgetSpentError(InteractionFailed):
    """The stream broke too often without progress, cannot be resumed at all, or its
    server held the old connection longer than the guard's patience (reason
    ``resume-patience-spent``)."""

    reason = "resume-budget-spent"


class SubmissionFailedError(InteractionFailed):
    """Retryable submission failures exhausted the resubmission budget."""

    reason = "submission-failed"


class RequestCancelledError(InteractionFailed):
    """The server cancelled a request that had no origin to report the outcome."""

    reason = "cancelled"


class StreamAbandonedError(InteractionFailed):
    """The application stopped following the stream (its reader went away for good, or
    the stream broke one of the application's bounds); ``reason`` says which."""

    reason = "abandoned"


class EventTooLargeError(StreamAbandonedError):
    """An SSE event on the stream was larger than the application holds."""

    reason = "event-too-large"


class CapacityError(GuardError):
    """More live requests than the configured cap: the new request is refused, not dropped.

    Returned inside :class:`fsm.actions.Refuse`; the client answers the server with a
    JSON-RPC error so nothing is lost silently.
    """


class GuardUsageError(GuardError):
    """The embedding application fed an impossible event (e.g. an answer for a request
    that was never presented). Raised from :meth:`fsm.sse.guard.Guard.feed`; the guard's
    state is unchanged."""


class RequestStateExpiredError(InteractionFailed):
    """An MRTR call's ``requestState`` is dead: the server rejected it (JSON-RPC -32602,
    ``invalid_request_state``: expired, minted before a restart or by another worker), or a
    presented question outlived the client-side age limit before the user answered.
    Restart the call deliberately; the answer given into the expired state is lost."""

    reason = "invalid-request-state"


class QuestionReaskedError(InteractionFailed):
    """The server asked an already-answered question again beyond the re-ask budget (or
    the policy fails on the first re-ask): the user is not asked a second time."""

    reason = "question-reasked"


class InputRoundsExceededError(InteractionFailed):
    """An MRTR call returned ``InputRequiredResult`` for more rounds than allowed."""

    reason = "rounds-exceeded"


class MalformedInputRequiredError(InteractionFailed):
    """A result violates the MRTR shape: unknown ``resultType``, neither ``inputRequests``
    nor ``requestState``, ``inputRequests`` not a map of ``{method, params}``, an input
    method the client does not serve, or a state larger than the configured bound."""

    reason = "malformed-input-required"


class CallRejectedError(InteractionFailed):
    """A (re)sent MRTR request came back with a terminal error other than an invalid
    ``requestState`` (``reason`` is the classification rule that matched)."""

    reason = "call-rejected"


class TaskExpiredError(InteractionFailed):
    """A task of the tasks extension is gone: the server answered JSON-RPC -32602 ("Task
    has expired", "Task not found": it purged the task), or the task's ``createdAt +
    ttlMs`` passed. Every outstanding input request ended with it; an answer not yet
    consumed is lost."""

    reason = "task-expired"


class TaskFailedError(InteractionFailed):
    """A task reported ``status: failed`` (the server's ``error`` and ``statusMessage``
    are the evidence)."""

    reason = "task-failed"


class TaskCancelledError(InteractionFailed):
    """A task reported ``status: cancelled``."""

    reason = "task-cancelled"


class MalformedTaskError(InteractionFailed):
    """A ``tasks/get`` result violates the tasks extension or one of the client's bounds:
    not an object, an unknown ``status``, ``inputRequests`` not a map of ``{method,
    params}``, a key reused with a different question (a protocol violation), a task id
    that changed, more input requests than the configured bounds."""

    reason = "malformed-task"


class TaskPollsExceededError(InteractionFailed):
    """A task was polled more times than the configured bound without ending."""

    reason = "polls-exceeded"


class StoreError(GuardError):
    """A durable store (:mod:`fsm.durable`) cannot be used as it is; ``path`` names the
    file. Nothing was read from it or written to it: start no guard from it."""

    reason = "store-unusable"

    def __init__(self, message: str, *, path: str = "") -> None:
        super().__init__(message)
        self.path = path


class StoreCorruptError(StoreError):
    """The store file is not a store: not a database, truncated, or a record that does
    not read back. Starting fresh instead could ask an answered question again, so the
    library never does it on its own."""

    reason = "store-corrupt"


class StoreLockedError(StoreError):
    """Another process (or another open store) holds the store file: two guards on one
    file could each show the same question."""

    reason = "store-locked"


class StoreVersionError(StoreError):
    """The store file was written by a newer schema than this library reads."""

    reason = "store-newer-schema"
