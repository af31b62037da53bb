"""Dead or resumable? Explicit state machines for MCP's resumable SSE streams.

The core is sans-IO and imports only ``transitions``: declarations (:mod:`fsm.spec`,
:mod:`fsm.machines`), their two runtimes (:mod:`fsm.runtime`, :mod:`fsm.tables`), the
guard that clients embed (:mod:`fsm.guard`) with its events, actions, outcome table
and errors. The model checker is :mod:`fsm.checker`; the optional extras are
:mod:`fsm.render` (diagrams), :mod:`fsm.adapters` (the official ``mcp`` SDK's clients)
and :mod:`fsm.demo` (what ``fsm demo`` runs: a real loopback server, proxy and the seed
incident; not API); the conformance kit :mod:`fsm.testing` needs the ``testing`` extra
(``hypothesis``).
"""

from fsm import actions, events
from fsm.errors import (
    CallRejectedError,
    CapacityError,
    EventTooLargeError,
    GuardError,
    GuardUsageError,
    InputRoundsExceededError,
    InteractionFailed,
    MalformedInputRequiredError,
    QuestionReaskedError,
    RequestCancelledError,
    RequestId,
    RequestKey,
    RequestStateExpiredError,
    ResumeBudgetSpentError,
    SessionExpiredError,
    StaleRequestError,
    StreamAbandonedError,
    SubmissionFailedError,
    UnknownPendingRequestError,
)
from fsm.guard import LIVE_MARKER, Guard, GuardConfig, LivenessOracle, default_oracle
from fsm.machines import LIVENESS, PRODUCT, TRANSPORT
from fsm.outcomes import (
    DEFAULT_RULES,
    RESUME_RULES,
    Classifier,
    HttpResult,
    OutcomeClass,
    Rule,
    SubmissionResult,
)

__version__ = "0.1.0"
"""The distribution's version (``dead-or-resumable``; the wheel reads it from here)."""

__all__ = [
    "DEFAULT_RULES",
    "LIVENESS",
    "LIVE_MARKER",
    "PRODUCT",
    "RESUME_RULES",
    "TRANSPORT",
    "CallRejectedError",
    "CapacityError",
    "Classifier",
    "EventTooLargeError",
    "Guard",
    "GuardConfig",
    "GuardError",
    "GuardUsageError",
    "HttpResult",
    "InputRoundsExceededError",
    "InteractionFailed",
    "LivenessOracle",
    "MalformedInputRequiredError",
    "OutcomeClass",
    "QuestionReaskedError",
    "RequestCancelledError",
    "RequestId",
    "RequestKey",
    "RequestStateExpiredError",
    "ResumeBudgetSpentError",
    "Rule",
    "SessionExpiredError",
    "StaleRequestError",
    "StreamAbandonedError",
    "SubmissionFailedError",
    "SubmissionResult",
    "UnknownPendingRequestError",
    "__version__",
    "actions",
    "default_oracle",
    "events",
]
