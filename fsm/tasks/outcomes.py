"""Classify what a ``tasks/get`` or ``tasks/update`` came back with when it was not a
result: a JSON-RPC error, or no response at all.

The same :class:`~fsm.outcomes.Rule` / :class:`~fsm.outcomes.Classifier` machinery as every
other request of the library, over a :class:`~fsm.outcomes.SubmissionResult` whose body is
the JSON-RPC error response. Table :data:`TASK_RULES`, first match wins:

==========================  =======================================  ==========
rule                        matches                                  class
==========================  =======================================  ==========
``task-gone``               JSON-RPC -32602 (the extension's "Failed  terminal
                            to retrieve task: Task has expired" and
                            "Task not found": the server purged it)
``jsonrpc-error``           any other JSON-RPC error                 terminal
``http-404``, ``http-410``  the endpoint is gone                     terminal
``http-429``                rate limited (honour ``Retry-After``)    retryable
``http-5xx``                server error without a JSON-RPC body     retryable
``transport-error``         no response: connection error, timeout   retryable
``other-4xx``               any other client error                   terminal
==========================  =======================================  ==========

``task-gone`` ends the call with :class:`~fsm.errors.TaskExpiredError`; any other terminal
rule with :class:`~fsm.errors.CallRejectedError` (``reason`` = the rule). Retryable
outcomes are retried within the decider's bounds; unmatched ones are retryable as
``unclassified``, bounded the same way.
"""

from __future__ import annotations

from fsm.errors import CallRejectedError, InteractionFailed, TaskExpiredError
from fsm.outcomes import Classifier, OutcomeClass, Rule, SubmissionResult, one_call_rules

TASK_GONE_CODE = -32602
"""The JSON-RPC code a tasks server answers for a task it no longer has."""

TASK_EXPIRED = SubmissionResult(
    None,
    {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": TASK_GONE_CODE, "message": "Failed to retrieve task: Task has expired"},
    },
)
"""What a server that purged an expired task answers ``tasks/get`` (and ``tasks/update``)
with, as the table sees it."""


TASK_RULES: tuple[Rule, ...] = one_call_rules(
    Rule(
        "task-gone",
        lambda r: (r.jsonrpc_error() or (None,))[0] == TASK_GONE_CODE,
        OutcomeClass.TERMINAL,
        doc="-32602: the task expired or is not found (purged): terminal for every key",
    ),
)
"""How a failed ``tasks/get`` or ``tasks/update`` is judged (the table above)."""

TASK_CLASSIFIER = Classifier(TASK_RULES)
"""The default classifier of failed task requests."""


def error_for(rule: str) -> type[InteractionFailed]:
    """The error class a terminal ``rule`` ends the call with."""
    return TaskExpiredError if rule == "task-gone" else CallRejectedError
