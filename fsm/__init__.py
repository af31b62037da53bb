"""Dead or resumable? Explicit state machines for MCP's resumable SSE streams.

The core is sans-IO and imports only ``transitions``. Its layers, each importing only
those before it: the vocabulary every part speaks (:mod:`fsm.errors`, :mod:`fsm.events`,
:mod:`fsm.actions`, :mod:`fsm.outcomes`, :mod:`fsm.properties`); the machines
(:mod:`fsm.machines`); each era's decider (:mod:`fsm.sse`: the guard clients embed, and
:class:`ObservedGuard`, which checks and logs it; :mod:`fsm.mrtr`); the worlds the checker
explores (:mod:`fsm.worlds`); the model checker (:mod:`fsm.checker`, which imports nothing
else of ``fsm``). The optional extras are :mod:`fsm.render` (diagrams),
:mod:`fsm.adapters` (the official ``mcp`` SDK's clients), :mod:`fsm.gateway`,
:mod:`fsm.wire` (the wire scenarios: a real loopback server and fault proxy, run against
any client and judged by P1-P7) and :mod:`fsm.demo` (what ``fsm demo`` runs; not API);
the conformance kit :mod:`fsm.testing` needs the ``testing`` extra
(``hypothesis``). The layout and its import rules: ``docs/architecture.md``.
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
from fsm.machines.resumption import LIVENESS, PRODUCT, TRANSPORT
from fsm.outcomes import (
    DEFAULT_RULES,
    RESUME_RULES,
    Classifier,
    HttpResult,
    OutcomeClass,
    Rule,
    SubmissionResult,
)
from fsm.sse.guard import LIVE_MARKER, Guard, GuardConfig, LivenessOracle, default_oracle
from fsm.sse.observe import ObservedGuard

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
    "ObservedGuard",
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
