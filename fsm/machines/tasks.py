"""The fourth and fifth machines: a task's lifecycle and the liveness of each of its input
requests (the tasks extension, ``io.modelcontextprotocol/tasks``), and their product.

A ``tools/call`` may answer ``resultType: "task"``; the client then polls ``tasks/get``
(status ``working``, ``input_required``, ``completed``, ``cancelled``, ``failed``, with
``ttlMs``, ``pollIntervalMs``, ``createdAt``), answers the task's ``inputRequests``
(key -> ``{method, params}``) with ``tasks/update`` (``inputResponses`` by key; the
server acknowledges with an empty result, *eventually consistent*) and may be told the
task is gone (JSON-RPC -32602 "Task has expired" / "Task not found").

``TASK`` is the task as the client knows it, one instance per call. ``TASK_INPUT`` is one
instance per ``inputRequests`` key: the spec makes a key unique over the task's life, so
a key is the unit a client presents at most once. It is not the SSE era's liveness
machine: a key may be answered from another key's answer (``reuse``: the server re-asks
an answered question under a new key), and an acknowledged answer counts as consumed
only when a later poll no longer lists its key (``consume``), never on the empty ack.

``TASKS_PRODUCT`` composes them by declared rows: the task's completion completes its
keys; a key whose answer was rejected fails the task once; a task that failed, was
cancelled or expired orphans every outstanding key. Its scope ``origin`` is the task.
"""

from __future__ import annotations

from fsm.machines.spec import MachineSpec, Transition, each, origin_product

_T = Transition

_RUNNING = ("working", "input_required")
TASK_LIVE = frozenset(_RUNNING)
"""The task states of a call that is not over."""

TASK = MachineSpec.documented(
    "task",
    doc="One task of the tasks extension, as its client knows it from tasks/get.",
    states=(
        ("working", "the task runs; the client polls tasks/get"),
        ("input_required", "the last poll listed input requests"),
        ("completed", "the task's result is in: one Complete"),
        ("cancelled", "the task was cancelled: one typed error"),
        ("failed", "the task failed, or the client failed the call: one typed error"),
        ("expired", "purged (-32602) or past createdAt + ttlMs: one typed error"),
    ),
    initial="working",
    terminal=frozenset({"completed", "cancelled", "failed", "expired"}),
    transitions=(
        _T("work", "working", "working", doc="a poll: still working"),
        _T(
            "work",
            "input_required",
            "working",
            doc="a poll: the task moved on (status working)",
        ),
        _T("ask", "working", "input_required", doc="a poll lists input requests"),
        _T(
            "ask",
            "input_required",
            "input_required",
            doc="a poll lists input requests again (new keys, or the same ones)",
        ),
        *each("complete", _RUNNING, "completed", doc="status completed"),
        *each(
            "cancel", _RUNNING, "cancelled", doc="status cancelled, or the application cancelled"
        ),
        *each("fail", _RUNNING, "failed", doc="status failed (the server's error as evidence)"),
        *each(
            "expire",
            _RUNNING,
            "expired",
            guard="-32602 expired/not found, or createdAt + ttlMs passed",
            doc="the task is gone: every outstanding key ends with it",
        ),
        *each(
            "exhaust",
            _RUNNING,
            "failed",
            guard="poll bound, resends, re-asks spent, or a malformed result",
            doc="bounded: fail once instead of looping",
        ),
        *each("abort", _RUNNING, "failed", doc="an answer the task needs was rejected"),
    ),
)
"""A task's lifecycle: working, input required, then completed, cancelled, failed or
expired."""

TASK_INPUT_LIVE = frozenset({"new", "presented", "answered", "submitting", "submitted"})
"""The states of an input request key that may still be answered."""

TASK_INPUT = MachineSpec.documented(
    "task-input",
    doc="One inputRequests key of a task, unique over the task's life.",
    states=(
        ("new", "listed by a poll for the first time (sorted in the same step)"),
        ("presented", "shown to the user, exactly once over the task's life"),
        ("answered", "the answer is stored, not yet sent"),
        ("submitting", "tasks/update carrying the answer is in flight"),
        ("submitted", "acknowledged: an empty ack is not proof of consumption"),
        ("consumed", "a later poll no longer lists the key: the answer was taken"),
        ("withdrawn", "the key left inputRequests before its answer was sent: dead"),
        ("dead", "the task ended first, or the answer was rejected"),
    ),
    initial="new",
    terminal=frozenset({"consumed", "withdrawn", "dead"}),
    transitions=(
        _T(
            "present",
            "new",
            "presented",
            guard="its question not answered before in this task",
            doc="show it once",
        ),
        _T(
            "reuse",
            "new",
            "answered",
            guard="its question answered before, re-asks left",
            doc="a re-ask under a new key: answer it with the stored answer, never prompt",
        ),
        _T("answer", "presented", "answered", doc="the user answered"),
        _T("submit", "answered", "submitting", doc="tasks/update with the stored answer"),
        _T("accept", "submitting", "submitted", doc="the empty acknowledgement"),
        _T(
            "retry",
            "submitting",
            "answered",
            guard="retryable, resends left",
            doc="the update failed: resend while the key is listed, never re-prompt",
        ),
        _T(
            "reject",
            "submitting",
            "dead",
            guard="terminal error",
            doc="the update was rejected: the task fails once",
        ),
        _T(
            "resubmit",
            "submitted",
            "submitting",
            guard="still listed after the ack, resubmits left",
            doc="resend the stored answer (the server ignores a consumed key)",
        ),
        _T(
            "consume",
            "submitted",
            "consumed",
            doc="a later poll no longer lists the key: the task moved on",
        ),
        *each(
            "supersede",
            ("presented", "answered"),
            "withdrawn",
            doc="the key left inputRequests before its answer was sent: withdraw it",
        ),
        *each(
            "complete",
            ("submitting", "submitted"),
            "consumed",
            doc="the task completed after the answer was sent",
        ),
        *each(
            "complete",
            ("presented", "answered"),
            "dead",
            doc="the task completed before the answer was sent",
        ),
        *each(
            "orphan",
            sorted(TASK_INPUT_LIVE),
            "dead",
            doc="the task failed, was cancelled or expired",
        ),
    ),
)
"""The liveness of one ``inputRequests`` key of a task."""

TASKS_PRODUCT = origin_product(
    "tasks-product",
    "A task's lifecycle x the liveness of each input request key, by the rows below.",
    TASK,
    TASK_LIVE,
    frozenset({"cancelled", "failed", "expired"}),
    TASK_INPUT,
    TASK_INPUT_LIVE,
    completes=(
        "task_completed",
        "status completed: the task complete, its keys consumed or dead",
    ),
    aborts=(
        "rejected_answer_fails_task",
        "an answer the task needs was rejected: fail the call with one typed error",
    ),
    orphans=(
        "ended_task_orphans_keys",
        "nobody reads the answers of a task that ended without completing",
    ),
)
"""A task's lifecycle times each input request key's liveness, synchronised by declared
rows."""
