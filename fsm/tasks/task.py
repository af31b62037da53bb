"""The sans-IO rules for one task of the tasks extension (``io.modelcontextprotocol/tasks``).

One :class:`TaskCall` per ``tools/call`` that answered ``resultType: "task"``. Feed it what
the task's requests came back with and what the user did; do what its actions say, in the
guard's vocabulary (:mod:`fsm.actions`) plus :class:`Poll` and :class:`Update`:

>>> from fsm.tasks.task import TaskCall, TaskCreated, Polled
>>> task = TaskCall("t1", clock=lambda: 0.0)
>>> task.feed(TaskCreated({"taskId": "t1", "status": "working", "pollIntervalMs": 500}))
(Poll(task='t1', delay_s=0.5),)
>>> ask = {"method": "elicitation/create", "params": {"message": "Delete 3 files?"}}
>>> task.feed(Polled({"taskId": "t1", "status": "input_required",
...     "inputRequests": {"confirm": ask}}))  # doctest: +ELLIPSIS
(Present(key=('t1', 'confirm'), method='elicitation/create', ...), Poll(task='t1', delay_s=0.5))

The task decides; :class:`fsm.machines.product.ProductRun` fires the declared transitions of
:data:`fsm.machines.tasks.TASKS_PRODUCT` and applies its rows, the runtime every era
shares. Rules (each a row of the product or a guard label on one):

* **Each key at most once.** A key of ``inputRequests`` is presented at most once over the
  task's life, across polls, whatever the server lists again. A key is unique over the
  task's life (the spec), so a key that ended and is listed again stays ended (a lagging
  replica's snapshot: documented ``Ignore``, never a prompt); a key listed again with a
  *different* question is a protocol violation (:class:`~fsm.errors.MalformedTaskError`).
* **One prompt per question.** A new key whose question (method + canonical params,
  :func:`fsm.questions.question_id`) the user answered is answered from the stored answer,
  at most ``max_reasks`` times per question, then the call fails once with
  :class:`~fsm.errors.QuestionReaskedError` (``on_reask="fail"``: at the first re-ask).
  A question not yet answered is not deduplicated: a supersession lists it under a new
  key, a new request whose prompt replaces the withdrawn one. Idempotent methods
  (``roots/list``) are answered anew.
* **A key that vanishes is dead.** A key no longer listed before its answer was sent is
  withdrawn (its prompt taken down) and never presented again; its answer, if the user
  gives one later, is never sent.
* **The empty ack is not proof.** An acknowledged answer counts as consumed only when a
  later poll no longer lists its key; a key still listed after the ack gets the stored
  answer again at most ``max_resubmits`` times. An update that failed retryably is resent
  (never re-prompted) only while its key is still listed, at most ``max_resends`` failures
  in a row (:class:`~fsm.errors.SubmissionFailedError`).
* **The task's end ends every key.** ``failed`` (:class:`~fsm.errors.TaskFailedError`),
  ``cancelled`` (:class:`~fsm.errors.TaskCancelledError`), JSON-RPC -32602 on either
  request, or ``createdAt + ttlMs`` passed (:class:`~fsm.errors.TaskExpiredError`) end
  every outstanding key and the call with one typed error; prompts are withdrawn first.
  ``completed`` consumes the keys whose answers were sent and ends the others. A final
  status a poll reports past the TTL still counts (the TTL is a backstop, not a verdict).
* **Polling is paced and bounded.** Each :class:`Poll` waits the task's ``pollIntervalMs``
  (absent: the last one stated, else ``default_poll_interval_s``; at least
  ``min_poll_interval_s``, so 0 cannot make a hot loop, and at most
  ``max_poll_interval_s``, so an absurd value cannot stall the call), a failed poll backs
  off; a call polls at most ``max_polls``
  times (default 3600: an hour at the default 1 s interval), then fails once with
  :class:`~fsm.errors.TaskPollsExceededError`. The TTL is the other backstop: schedule a
  :class:`Tick` at :meth:`TaskCall.deadline`.
* **Exactly one outcome.** One ``Complete`` or ``Fail`` per call, after any ``Withdraw``;
  everything fed after it is ``Ignore("task-ended")``; a second :class:`TaskCreated` or
  :class:`TaskResumed` is ``Ignore("started")``.
* **Bad input never raises**: a result that is not an object, an unknown ``status``,
  ``inputRequests`` not a map of ``{method, params}`` maps, a method outside
  ``input_methods``, a key longer than ``max_key_chars``, a ``taskId`` other than the
  call's, ``ttlMs``/``pollIntervalMs`` not numbers from 0 to the largest finite float (NaN,
  infinities, an integer of 400 digits), more than ``max_input_requests`` keys in one poll
  or ``max_keys`` over the task's life: one :class:`~fsm.errors.MalformedTaskError`.
  ``inputRequests`` on a status other than ``input_required`` is ignored. Memory per task
  is bounded by ``max_keys`` keys (a key, a question digest, a state, the user's answer
  each), one stored answer per answered question and the last poll's requests.
  :class:`~fsm.errors.GuardUsageError` is raised only for an
  answer to a key this task never listed.

Contract of the requests: at most one ``tasks/get`` and one ``tasks/update`` are
outstanding at a time. On :class:`Poll` the client sleeps ``delay_s``, sends ``tasks/get``
and feeds :class:`Polled` or :class:`PollFailed`; on :class:`Update` it sends
``tasks/update`` at once and feeds :class:`UpdateAcked` or :class:`UpdateFailed`. After a
restart with the persisted task id, feed :class:`TaskResumed` to a fresh ``TaskCall``:
on its own it keeps nothing across the restart (a key answered before the crash and
still listed is presented again); wrapped in :class:`fsm.durable.calls.DurableCall`
with a store, it is restarted from its record and never asks an answered key again
(docs/durability.md). ``clock`` returns wall-clock seconds since the epoch (``createdAt`` is
an absolute time). Not thread-safe; one task is driven from one task.
"""

from __future__ import annotations

import datetime
import json
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from fsm import events as ev
from fsm.actions import Complete, Fail, Ignore, Present, Withdraw
from fsm.errors import (
    MalformedTaskError,
    RequestKey,
    TaskCancelledError,
    TaskExpiredError,
    TaskFailedError,
    TaskPollsExceededError,
)
from fsm.fields import check_fields
from fsm.machines.call import CallDecider, CallInstance
from fsm.machines.product import Cause, ProductRun
from fsm.machines.tables import EngineName
from fsm.machines.tasks import TASK, TASK_INPUT, TASK_INPUT_LIVE, TASKS_PRODUCT
from fsm.outcomes import Classifier, OutcomeClass, SubmissionResult, backoff_delay
from fsm.questions import (
    INPUT_METHODS,
    OnReask,
    canonical_json,
    input_requests_problem,
    question_id,
)
from fsm.tasks.outcomes import TASK_CLASSIFIER, error_for

STATUSES = frozenset({"working", "input_required", "completed", "cancelled", "failed"})
"""The task statuses of the extension."""


@dataclass(frozen=True, slots=True)
class TaskConfig:
    """Policy knobs of the task rules and their bounds."""

    max_polls: int = 3600
    """``tasks/get`` requests per call (an hour at the default 1 s interval)."""
    default_poll_interval_s: float = 1.0
    """The wait between polls when the task names no ``pollIntervalMs``."""
    min_poll_interval_s: float = 0.1
    """The shortest wait: a smaller ``pollIntervalMs`` (0) is raised to it."""
    max_poll_interval_s: float = 60.0
    """The longest wait honoured: a larger ``pollIntervalMs`` is clamped to it."""
    max_poll_errors: int = 3
    """Retryable ``tasks/get`` failures in a row before the call fails."""
    max_resends: int = 2
    """Retryable ``tasks/update`` failures in a row before the call fails."""
    max_resubmits: int = 1
    """Resends of an acknowledged answer whose key a later poll still lists."""
    max_reasks: int = 1
    """Answers from the store per question when the server asks it under a new key."""
    on_reask: OnReask = "resubmit"
    """A re-ask of an answered question: answer it from the store (bounded) or fail."""
    backoff_initial_s: float = 0.5
    backoff_factor: float = 2.0
    backoff_max_s: float = 8.0
    """A failed poll or update waits initial, times factor, up to max (and at least the
    poll interval)."""
    max_input_requests: int = 64
    """Most keys one poll may list."""
    max_keys: int = 1024
    """Most keys over the task's life: what bounds the memory of one task."""
    max_key_chars: int = 256
    """Longest ``inputRequests`` key accepted."""
    input_methods: frozenset[str] = INPUT_METHODS
    idempotent_methods: frozenset[str] = frozenset({"roots/list"})
    """Answered by a handler, not a person: a re-ask is presented anew."""
    classifier: Classifier = TASK_CLASSIFIER

    def __post_init__(self) -> None:
        check_fields(self, ValueError, floats="number")

    def interval(self, poll_interval_ms: float | None) -> float:
        """The wait before the next poll for the task's ``pollIntervalMs``."""
        if poll_interval_ms is None:
            return self.default_poll_interval_s
        wait = max(poll_interval_ms / 1000.0, self.min_poll_interval_s)
        return min(wait, self.max_poll_interval_s)


# ------------------------------------------------------------------ events and actions


@dataclass(frozen=True, slots=True)
class TaskCreated:
    """The ``tools/call`` answered ``resultType: "task"``: its task object (``taskId``,
    ``status``, ``ttlMs``, ``pollIntervalMs``, ``createdAt``)."""

    task: Any


@dataclass(frozen=True, slots=True)
class TaskResumed:
    """The client restarted and resumes polling the task by its persisted id."""


@dataclass(frozen=True, slots=True)
class Polled:
    """The ``tasks/get`` result (decoded JSON)."""

    result: Any


@dataclass(frozen=True, slots=True)
class PollFailed:
    """The ``tasks/get`` came back with a JSON-RPC error (``outcome.body``) or none."""

    outcome: SubmissionResult


@dataclass(frozen=True, slots=True)
class UpdateAcked:
    """The ``tasks/update`` came back with its (empty) result."""


@dataclass(frozen=True, slots=True)
class UpdateFailed:
    """The ``tasks/update`` came back with a JSON-RPC error (``outcome.body``) or none."""

    outcome: SubmissionResult


@dataclass(frozen=True, slots=True)
class Tick:
    """Time passed: check the task's ``createdAt + ttlMs`` (see :meth:`TaskCall.deadline`)."""


@dataclass(frozen=True, slots=True)
class TaskCancelled:
    """The application gave up on the call (it sends ``tasks/cancel`` itself)."""

    reason: str = "cancelled by the application"


TaskEvent = (
    TaskCreated
    | TaskResumed
    | Polled
    | PollFailed
    | UpdateAcked
    | UpdateFailed
    | ev.UserAnswered
    | Tick
    | TaskCancelled
)
"""What a client feeds :meth:`TaskCall.feed`."""


@dataclass(frozen=True, slots=True)
class Poll:
    """Send ``tasks/get`` for ``task`` after ``delay_s`` seconds, then feed its outcome."""

    task: str
    delay_s: float


@dataclass(frozen=True, slots=True)
class Update:
    """Send ``tasks/update`` for ``task`` now with ``input_responses`` (key -> answer),
    then feed its outcome. ``questions`` maps each key to the request key of the prompt
    whose answer it carries (itself, or the key that first asked its question)."""

    task: str
    input_responses: Mapping[str, Mapping[str, Any]]
    questions: Mapping[str, RequestKey] = field(default_factory=dict)


TaskAction = Present | Withdraw | Poll | Update | Fail | Complete | Ignore
"""What :meth:`TaskCall.feed` tells a client to do."""


# ------------------------------------------------------------------ the snapshot


@dataclass(frozen=True, slots=True)
class KeyRecord:
    """One ``inputRequests`` key of a :class:`TaskSnapshot`."""

    key: str
    question: str
    """:func:`fsm.questions.question_id` of what it asks."""
    method: str
    state: str
    """Its state in :data:`fsm.machines.tasks.TASK_INPUT`."""
    listed: bool
    """Listed by the last poll."""
    resubmits: int
    answer: str | None = None
    """The user's answer to its prompt (canonical JSON), if it was presented and answered."""
    cause: Cause | None = None


@dataclass(frozen=True, slots=True)
class QuestionRecord:
    """One question of a :class:`TaskSnapshot`: the first answer the user gave to it
    (canonical JSON), the key whose prompt got that answer, and how often the store
    answered a re-ask under a new key."""

    question: str
    answer: str | None
    prompt: str | None
    reuses: int


@dataclass(frozen=True, slots=True)
class TaskSnapshot:
    """The whole state of a :class:`TaskCall`, as a typed, hashable value: the task
    machine's ``state`` and ``cause``, the last ``status``, every key and question, the
    request in flight, the counters, the pacing and the TTL deadline."""

    task: str
    state: str
    cause: Cause | None
    status: str
    keys: tuple[KeyRecord, ...]
    questions: tuple[QuestionRecord, ...]
    get_pending: bool
    update: tuple[str, ...] | None
    """The keys of the ``tasks/update`` in flight (``None``: none)."""
    polls: int
    poll_errors: int
    resends: int
    interval_s: float
    created: float | None
    """The task's ``createdAt`` in seconds (or when the client first saw it)."""
    deadline: float | None
    ended: bool


# ------------------------------------------------------------------ the instances


class _Key:
    """One key of the task: a :data:`~fsm.machines.tasks.TASK_INPUT` instance."""

    __slots__ = (
        "answer",
        "cause",
        "key",
        "listed",
        "method",
        "name",
        "qid",
        "resubmits",
        "state",
    )
    machine = TASK_INPUT.name

    def __init__(self, task: str, key: str, qid: str, method: str) -> None:
        self.name, self.qid, self.method = key, qid, method
        self.key: RequestKey = (task, key)
        self.state = "new"
        self.listed = True
        self.resubmits = 0
        self.answer: str | None = None
        self.cause: Cause | None = None


class _Question:
    __slots__ = ("answer", "prompt", "reuses")

    def __init__(self) -> None:
        self.answer: str | None = None
        self.prompt: str | None = None
        self.reuses = 0


_ENDED_STATUS = {"completed": "complete", "cancelled": "cancel", "failed": "fail"}


class TaskCall(CallDecider[_Key, CallInstance]):
    """The rules of one task. See the module docstring.

    ``clock`` returns wall-clock seconds since the epoch; ``on_fire(machine, source,
    trigger, dest)`` is told every declared transition fired (coverage, logs).
    """

    call_machine = TASK.name
    complete_state = "completed"
    never_asked = "was never listed by this task"
    ended_reason = "task-ended"
    malformed_error = MalformedTaskError
    result_name = "tasks/get result"

    def __init__(
        self,
        task: str,
        *,
        clock: Callable[[], float],
        config: TaskConfig | None = None,
        engine: EngineName = "tables",
        on_fire: Callable[[str, str, str, str], None] | None = None,
    ) -> None:
        self.task = task
        self.config = config or TaskConfig()
        self._clock = clock
        self._run = ProductRun(TASKS_PRODUCT, engine, self._members, self._on_terminal, on_fire)
        self._reset()

    def _reset(self) -> None:
        self._own = CallInstance(TASK)
        self._status = "working"
        self._asked: dict[str, _Key] = {}
        self._listed: dict[str, Any] = {}  # the keys the last poll listed, and their requests
        self._unsettled: set[str] = set()  # unlisted while their update was in flight
        self._questions: dict[str, _Question] = {}
        self._get_pending = False
        self._update: tuple[str, ...] | None = None
        self._polls = 0
        self._poll_errors = 0
        self._resends = 0
        self._interval = self.config.default_poll_interval_s
        self._deadline: float | None = None
        self._created: float | None = None
        self._ended = False
        self._out: list[TaskAction] = []

    # ----------------------------------------------------------------- public API

    def feed(self, event: TaskEvent) -> tuple[TaskAction, ...]:
        """Apply ``event``; return the actions to perform, in order (the outcome last)."""
        return self._feed(event)

    def deadline(self) -> float | None:
        """When ``createdAt + ttlMs`` passes (feed a :class:`Tick` then), or ``None``."""
        return self._deadline

    def snapshot(self) -> TaskSnapshot:
        """The task's whole state as a typed, hashable value."""
        return TaskSnapshot(
            self.task,
            self._own.state,
            self._own.cause,
            self._status,
            tuple(
                KeyRecord(
                    k.name, k.qid, k.method, k.state, k.listed, k.resubmits, k.answer, k.cause
                )
                for k in self._asked.values()
            ),
            tuple(
                QuestionRecord(qid, q.answer, q.prompt, q.reuses)
                for qid, q in self._questions.items()
            ),
            self._get_pending,
            self._update,
            self._polls,
            self._poll_errors,
            self._resends,
            self._interval,
            self._created,
            self._deadline,
            self._ended,
        )

    def restore(self, snap: TaskSnapshot) -> None:
        """Return to a state :meth:`snapshot` took of a task with the same id."""
        self._reset()
        self._own.state, self._own.cause = snap.state, snap.cause
        self._status = snap.status
        for r in snap.keys:
            k = self._asked[r.key] = _Key(self.task, r.key, r.question, r.method)
            k.state, k.listed, k.resubmits = r.state, r.listed, r.resubmits
            if r.listed:
                self._listed[r.key] = None
            elif r.state in TASK_INPUT_LIVE:  # unlisted, not judged yet
                self._unsettled.add(r.key)
            k.answer, k.cause = r.answer, r.cause
        for rq in snap.questions:
            q = self._questions[rq.question] = _Question()
            q.answer, q.prompt, q.reuses = rq.answer, rq.prompt, rq.reuses
        self._get_pending, self._update = snap.get_pending, snap.update
        self._polls, self._poll_errors, self._resends = snap.polls, snap.poll_errors, snap.resends
        self._interval, self._created = snap.interval_s, snap.created
        self._deadline, self._ended = snap.deadline, snap.ended

    # ------------------------------------------------------------------ handlers

    def _decide(self, event: TaskEvent) -> None:
        if isinstance(event, ev.UserAnswered):
            self._on_answer(event)
        elif isinstance(event, Polled | TaskCreated):  # a final status counts past the TTL
            self._on_result(event.result if isinstance(event, Polled) else event.task, event)
        elif not self._expired():
            if isinstance(event, TaskResumed):
                if self._polls:
                    self._out.append(
                        Ignore("started", "the task is polled already", stream=self.task)
                    )
                else:
                    self._poll(0.0)
            elif isinstance(event, PollFailed):
                self._on_poll_failed(event.outcome)
            elif isinstance(event, UpdateAcked):
                self._on_update(None)
            elif isinstance(event, UpdateFailed):
                self._on_update(event.outcome)
            elif isinstance(event, TaskCancelled):
                self._fail("cancel", TaskCancelledError, event.reason, (), reason="cancelled")

    def _on_result(self, result: Any, event: Polled | TaskCreated) -> None:
        if isinstance(event, Polled):
            if not self._get_pending:
                return self._not_awaiting("tasks/get")
            self._get_pending = False
            self._poll_errors = 0
        elif self._polls:
            self._out.append(Ignore("started", "the task is polled already", stream=self.task))
            return
        problem = self._shape_problem(result)
        if problem is not None:
            return self._malformed(problem)
        self._pace(result)
        status = result["status"]
        self._status = status
        if status in _ENDED_STATUS:  # the product's rows end every key
            return self._on_end(status, result)
        if self._expired():
            return
        asked: Mapping[str, Mapping[str, Any]] = (
            result.get("inputRequests") or {} if status == "input_required" else {}
        )
        if not self._on_listing(asked):
            return
        self._run.fire(self._own, "ask" if status == "input_required" else "work")
        self._send(resubmit=True)
        if self._update is None:
            self._poll(self._interval)

    def _on_listing(self, asked: Mapping[str, Mapping[str, Any]]) -> bool:
        """Sort the keys of one poll; False if the call ended."""
        cfg = self.config
        fresh: list[tuple[_Key, Mapping[str, Any] | None]] = []
        before = self._listed
        for server_key, req in asked.items():
            k = self._asked.get(server_key)
            if k is not None and before.get(server_key) == req:
                continue  # listed last time with the same request: nothing to check again
            method, params = req["method"], req.get("params")
            qid = question_id(method, params)
            if k is not None:
                if k.qid.partition("@")[0] != qid:
                    self._malformed(
                        f"key {server_key!r} reused with a different question "
                        f"({k.qid} before, {qid} now)"
                    )
                    return False
                k.listed = True
                if k.state in TASK_INPUT.terminal:  # unique keys: an ended key stays ended
                    self._out.append(
                        Ignore("key-ended", f"{server_key!r} is {k.state}", k.key, self.task)
                    )
                continue
            if len(self._asked) >= cfg.max_keys:
                self._malformed(f"more than max_keys={cfg.max_keys} keys over the task's life")
                return False
            if method in cfg.idempotent_methods:
                qid += f"@{server_key}"
            k = self._asked[server_key] = _Key(self.task, server_key, qid, method)
            fresh.append((k, params))
        self._listed = dict(asked)
        unsettled, self._unsettled = self._unsettled, set()
        for server_key in (*before, *unsettled):
            if server_key in asked:
                continue
            k = self._asked[server_key]
            k.listed = False
            if k.state in ("presented", "answered", "submitted"):
                self._run.fire(k, "consume" if k.state == "submitted" else "supersede")
            elif k.state == "submitting":  # gone while its update is in flight: judged later
                self._unsettled.add(server_key)
        for k, params in fresh:
            q = self._questions.setdefault(k.qid, _Question())
            if q.answer is not None:
                if self._reask_refused(
                    q.reuses,
                    cfg.max_reasks,
                    cfg.on_reask,
                    f"{k.method} {k.qid} again under key {k.name!r}",
                    f"key {k.name!r} re-asks {k.qid}",
                    k.key,
                ):
                    return False
                q.reuses += 1
                self._run.fire(k, "reuse")
            else:
                self._run.fire(k, "present")
                self._out.append(Present(k.key, k.method, params))
        self._run.settle()
        return not self._ended

    def _on_end(self, status: str, result: Mapping[str, Any]) -> None:
        if status == "completed":
            self._run.broadcast("task_completed", None)
            return
        error = result.get("error")
        said = result.get("statusMessage")
        evidence = tuple(
            f"{name} {json.dumps(value, default=repr)[:200]}"
            for name, value in (("error", error), ("statusMessage", said))
            if value is not None
        )
        kind = TaskFailedError if status == "failed" else TaskCancelledError
        self._fail(
            _ENDED_STATUS[status],
            kind,
            f"{self.task}: the task reported status {status}",
            (f"status {status}", *evidence),
        )

    def _on_answer(self, e: ev.UserAnswered) -> None:
        k = self._awaiting_answer(e.key)
        if k is None or self._expired():
            return
        k.answer = canonical_json(dict(e.answer))
        q = self._questions[k.qid]
        if q.answer is None:  # the question's answer, for a re-ask under a new key
            q.answer, q.prompt = k.answer, k.name
        self._run.fire(k, "answer")
        self._send(resubmit=False)

    def _on_poll_failed(self, outcome: SubmissionResult) -> None:
        if not self._get_pending:
            return self._not_awaiting("tasks/get")
        self._get_pending = False
        verdict = self.config.classifier.classify(outcome)
        evidence = (f"tasks/get {outcome.describe()}", f"rule {verdict.rule}")
        if verdict.outcome is not OutcomeClass.RETRYABLE:
            return self._gone(verdict.rule, "tasks/get", evidence)
        if self._retries_exhausted(
            "tasks/get", self._poll_errors, "max_poll_errors", self.config.max_poll_errors, evidence
        ):
            return
        self._poll_errors += 1
        self._poll(max(self._interval, self._backoff(self._poll_errors - 1, verdict.retry_after)))

    def _on_update(self, outcome: SubmissionResult | None) -> None:
        if self._update is None:
            return self._not_awaiting("tasks/update")
        carried = [self._asked[key] for key in self._update if key in self._asked]
        carried = [k for k in carried if k.state == "submitting"]
        self._update = None
        if outcome is None:
            self._resends = 0
            for k in carried:
                self._run.fire(k, "accept")
            self._send(resubmit=False)  # answers given while the update was in flight
        else:
            verdict = self.config.classifier.classify(outcome)
            evidence = (f"tasks/update {outcome.describe()}", f"rule {verdict.rule}")
            if verdict.outcome is not OutcomeClass.RETRYABLE:
                if verdict.rule == "task-gone" or not carried:
                    return self._gone(verdict.rule, "tasks/update", evidence)
                for k in carried:  # the task cannot take these answers: it fails once
                    k.cause = Cause(
                        error_for(verdict.rule),
                        f"{self.task}: the server rejected the answer to {k.name!r}",
                        k.key,
                        evidence,
                        verdict.rule,
                    )
                    self._run.fire(k, "reject")
                return self._run.settle()
            if self._retries_exhausted(
                "tasks/update", self._resends, "max_resends", self.config.max_resends, evidence
            ):
                return
            self._resends += 1
            for k in carried:  # kept, resent only while a poll still lists the key
                self._run.fire(k, "retry")
        if not self._get_pending and self._update is None:
            delay = self._interval
            if outcome is not None:
                delay = max(delay, self._backoff(self._resends - 1, None))
            self._poll(delay)

    # ------------------------------------------------------------------ helpers

    def _send(self, *, resubmit: bool) -> None:
        """Send every stored answer whose key is listed and not yet sent, and (``resubmit``:
        right after a poll) the stored answer again for acknowledged keys that poll still
        lists (bounded), in one update; nothing while an update is in flight."""
        if self._update is not None or self._ended:
            return
        responses: dict[str, Mapping[str, Any]] = {}
        questions: dict[str, RequestKey] = {}
        for server_key in self._listed:
            k = self._asked[server_key]
            if k.state not in ("answered", "submitted"):
                continue
            if k.state == "submitted":
                if not resubmit or k.resubmits >= self.config.max_resubmits:
                    continue
                k.resubmits += 1
                self._run.fire(k, "resubmit")
            else:
                self._run.fire(k, "submit")
            q = self._questions[k.qid]
            if k.answer is not None:  # the user's answer to this key's prompt
                responses[k.name], questions[k.name] = json.loads(k.answer), k.key
            else:  # a re-ask, answered from the store
                assert q.answer is not None and q.prompt is not None
                responses[k.name] = json.loads(q.answer)
                questions[k.name] = (self.task, q.prompt)
        if responses:
            self._update = tuple(responses)
            self._out.append(Update(self.task, responses, questions))

    def _poll(self, delay: float) -> None:
        if self._polls >= self.config.max_polls:
            return self._fail(
                "exhaust",
                TaskPollsExceededError,
                f"{self.task}: polled {self._polls} times without the task ending",
                (f"max_polls={self.config.max_polls}", f"last status {self._status}"),
            )
        self._polls += 1
        self._get_pending = True
        self._out.append(Poll(self.task, delay))

    def _backoff(self, n: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(retry_after, self.config.max_poll_interval_s)
        cfg = self.config
        initial, factor, most = cfg.backoff_initial_s, cfg.backoff_factor, cfg.backoff_max_s
        return backoff_delay(max(n, 0), initial, factor, most)

    def _pace(self, result: Mapping[str, Any]) -> None:
        """The poll interval and TTL deadline the task states (checked numbers)."""
        interval = result.get("pollIntervalMs")
        if interval is not None:  # absent: the last interval the task stated stands
            self._interval = self.config.interval(interval)
        ttl = result.get("ttlMs")
        if ttl is None:
            return
        at = _epoch(result.get("createdAt"))
        if at is None:  # no usable createdAt: the TTL runs from when the client first saw it
            at = self._created if self._created is not None else self._clock()
        self._created = at
        self._deadline = at + ttl / 1000.0

    def _expired(self) -> bool:
        """End the call if the task's TTL passed; True if it did (or had)."""
        if self._ended:
            return True
        if self._deadline is None:
            return False
        now = self._clock()
        if now < self._deadline:
            return False
        self._fail(
            "expire",
            TaskExpiredError,
            f"{self.task}: the task's createdAt + ttlMs passed",
            (f"deadline t={self._deadline:.3f}", f"checked at t={now:.3f}"),
            reason="ttl-passed",
        )
        return True

    def _gone(self, rule: str, request: str, evidence: tuple[str, ...]) -> None:
        error = error_for(rule)
        trigger = "expire" if error is TaskExpiredError else "exhaust"
        message = (
            f"{self.task}: the task is gone ({request} answered -32602)"
            if error is TaskExpiredError
            else f"{self.task}: the server rejected {request} ({rule})"
        )
        self._fail(trigger, error, message, evidence, reason=None if rule == "task-gone" else rule)

    def _shape_problem(self, result: Any) -> str | None:
        cfg = self.config
        if not isinstance(result, Mapping):
            return f"result is {type(result).__name__}, not an object"
        task_id = result.get("taskId")
        if task_id is not None and task_id != self.task:
            return f"taskId {str(task_id)[:80]!r} is not this call's task {self.task!r}"
        status = result.get("status")
        if status not in STATUSES:
            return f"unknown status {str(status)[:80]!r}"
        for name in ("ttlMs", "pollIntervalMs"):
            value = result.get(name)
            if value is not None and not _number(value):
                return f"{name} is {str(value)[:40]!r}, not a number >= 0"
        asked = result.get("inputRequests")
        if status != "input_required":
            return None
        return input_requests_problem(
            asked, cfg.max_input_requests, cfg.input_methods, cfg.max_key_chars
        )

    # -- the task's parts, as the product runtime's callbacks name them (fsm.machines.call)

    def _call_id(self) -> str:
        return self.task

    def _result_at(self) -> str:
        return f"poll {self._polls}"

    def _withdraw_reason(self, why: str, trigger: str) -> str:
        return "superseded" if trigger == "supersede" else why

    def _call_ended(self) -> None:
        self._get_pending, self._update = False, None


_LARGEST = sys.float_info.max
"""The largest finite float: the most a ``ttlMs`` or ``pollIntervalMs`` may be."""


def _number(value: Any) -> bool:
    """Whether ``value`` is a JSON number from 0 to :data:`_LARGEST`: not a boolean, NaN,
    an infinity, nor an integer beyond what a float holds (a 400-digit ``ttlMs``). It is
    compared exactly, never converted, so no value raises; one that passes converts to a
    finite float (milliseconds to seconds, a deadline) without raising."""
    return isinstance(value, int | float) and not isinstance(value, bool) and 0 <= value <= _LARGEST


def _epoch(created: Any) -> float | None:
    """``createdAt`` (ISO 8601) as seconds since the epoch; ``None`` if it is not one."""
    if not isinstance(created, str) or len(created) > 64:
        return None
    try:
        at = datetime.datetime.fromisoformat(created)
    except ValueError:
        return None
    if at.tzinfo is None:
        at = at.replace(tzinfo=datetime.UTC)
    return at.timestamp()
