"""Dead or resumable? Explicit state machines for MCP's resumable SSE streams.

The core is sans-IO and imports only ``transitions``: declarations (:mod:`fsm.spec`,
:mod:`fsm.machines`), their two runtimes (:mod:`fsm.runtime`, :mod:`fsm.tables`), the
guard that clients embed (:mod:`fsm.guard`) with its events, actions, outcome table
and errors. The model checker is :mod:`fsm.checker`; the optional extras are
:mod:`fsm.render` (diagrams), :mod:`fsm.adapters` (the official ``mcp`` SDK's clients)
and :mod:`fsm.harness` (a real loopback server, proxy and scenarios).
"""

from fsm import actions, events
from fsm.errors import (
    CapacityError,
    GuardError,
    GuardUsageError,
    InteractionFailed,
    RequestCancelledError,
    RequestId,
    RequestKey,
    ResumeBudgetSpentError,
    SessionExpiredError,
    StaleRequestError,
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

__all__ = [
    "DEFAULT_RULES",
    "LIVENESS",
    "LIVE_MARKER",
    "PRODUCT",
    "RESUME_RULES",
    "TRANSPORT",
    "CapacityError",
    "Classifier",
    "Guard",
    "GuardConfig",
    "GuardError",
    "GuardUsageError",
    "HttpResult",
    "InteractionFailed",
    "LivenessOracle",
    "OutcomeClass",
    "RequestCancelledError",
    "RequestId",
    "RequestKey",
    "ResumeBudgetSpentError",
    "Rule",
    "SessionExpiredError",
    "StaleRequestError",
    "SubmissionFailedError",
    "SubmissionResult",
    "UnknownPendingRequestError",
    "actions",
    "default_oracle",
    "events",
]
