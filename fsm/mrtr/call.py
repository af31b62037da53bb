"""The sans-IO rules for one multi round-trip (MRTR) call of protocol 2026-07-28.

One :class:`MrtrCall` per ``tools/call`` (``prompts/get``, ``resources/read``) whose
result may be an ``InputRequiredResult``. Feed it what came back and what the user did;
do what its actions say, in the guard's vocabulary (:mod:`fsm.actions`) plus
:class:`Retry`:

>>> from fsm.mrtr.call import MrtrCall, RoundResult
>>> call = MrtrCall("call:1", clock=lambda: 0.0)
>>> ask = {"method": "elicitation/create", "params": {"message": "Delete 3 files?"}}
>>> call.feed(RoundResult({"resultType": "input_required",
...     "inputRequests": {"confirm": ask}, "requestState": "s1"}))  # doctest: +ELLIPSIS
(Present(key=('call:1', 'elicitation/create#...'), method='elicitation/create', ...),)

The call decides; :class:`fsm.machines.product.ProductRun` fires the declared transitions and
applies the product's rows, the same runtime as the SSE guard's. Rules (each one a row of
:data:`fsm.machines.rounds.MRTR_PRODUCT` or a guard label on it):

* **At most once per question.** A question's identity is its method plus its canonical
  params (sorted-key JSON, ``_meta`` left out), not the round-local ``inputRequests``
  key: two keys with one question are presented once and both answered with the one
  answer; a question asked again in a later round (a *re-ask*) is never presented again.
  The stored answer is resubmitted, at most ``max_reasks`` times per question, then the
  call fails once with :class:`~fsm.errors.QuestionReaskedError` (with ``on_reask="fail"``,
  on the first re-ask). Idempotent methods (``roots/list``) are exempt: answered anew.
* **Dead state is terminal.** A failed round is judged by :data:`fsm.mrtr.outcomes.MRTR_RULES`;
  ``invalid_request_state`` and the other terminal rows end the call with one typed error
  (:class:`~fsm.errors.RequestStateExpiredError`, :class:`~fsm.errors.CallRejectedError`)
  and evidence; nothing is retried that could prompt again. Retryable rows (no response,
  5xx, 429) resend the same retry, at most ``max_resends`` times in a row.
* **Client-side age.** Each presented question records when it was shown (injected
  clock). Once it is ``question_ttl_s`` old (default 540 s, below the official servers'
  600 s state TTL) without an answer, its state has surely expired: the prompt is
  withdrawn and the call fails with ``RequestStateExpiredError`` (reason ``aged-out``),
  whether the client notices on a :class:`Tick` (schedule one at :meth:`MrtrCall.deadline`)
  or when the late answer arrives. An answer is never sent into a surely dead state.
* **Bounded rounds.** At most ``max_rounds`` ``InputRequiredResult`` rounds (the SDKs'
  10), then :class:`~fsm.errors.InputRoundsExceededError`. State-only rounds are retried
  after a backoff growing from ``backoff_initial_s`` by ``backoff_factor`` to
  ``backoff_max_s``, reset by any round that asks a question.
* **Exactly one outcome.** One ``Complete`` or ``Fail`` per call; everything fed after it
  is ``Ignore("call-ended")``.
* **Bad input** never raises: a result that is not a map, an unknown ``resultType``,
  neither ``inputRequests`` nor ``requestState``, ``inputRequests`` not a map of
  ``{method, params}`` maps, a method outside ``input_methods``, more than
  ``max_input_requests`` questions, or a state longer than ``max_state_chars`` ends the
  call with one :class:`~fsm.errors.MalformedInputRequiredError`. A result fed while no
  request is in flight is ``Ignore("not-awaiting")``. :class:`~fsm.errors.GuardUsageError`
  is raised only for an answer to a key this call never presented.

Contract of :class:`Retry`: when it is emitted the call is already in ``sent``; the
client sleeps ``delay_s``, then re-sends the original method and params with
``inputResponses`` and ``requestState`` exactly as given, under a new JSON-RPC id. Not
thread-safe; one call is driven from one task.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from fsm import events as ev
from fsm.actions import Complete, Fail, Ignore, Present, Withdraw
from fsm.errors import (
    InputRoundsExceededError,
    InteractionFailed,
    MalformedInputRequiredError,
    RequestKey,
    RequestStateExpiredError,
)
from fsm.fields import check_fields
from fsm.machines.call import CallDecider, CallInstance
from fsm.machines.product import Cause, ProductRun
from fsm.machines.resumption import LIVENESS
from fsm.machines.rounds import MRTR_PRODUCT, ROUNDS
from fsm.machines.tables import EngineName
from fsm.mrtr.outcomes import MRTR_CLASSIFIER, REJECTED_BY_THE_CLIENT, error_for, rejection
from fsm.outcomes import Classifier, OutcomeClass, SubmissionResult, backoff_delay, server_wait
from fsm.questions import (
    INPUT_METHODS,
    OnReask,
    canonical_json,
    input_requests_problem,
    question_id,
)


@dataclass(frozen=True, slots=True)
class MrtrConfig:
    """Policy knobs of the MRTR rules; defaults follow the measured SDKs and servers."""

    max_rounds: int = 10
    """``InputRequiredResult`` rounds allowed per call (python- and typescript-sdk: 10)."""
    max_reasks: int = 1
    """Resubmissions of one question's stored answer when the server asks it again."""
    on_reask: OnReask = "resubmit"
    """What a re-ask of an answered question does: resubmit (bounded) or fail at once
    (the rule of :mod:`fsm.questions`, shared with the SSE guard)."""
    question_ttl_s: float = 540.0
    """Client-side age limit of a presented, unanswered question (server TTL: 600 s)."""
    ttl_by_method: Mapping[str, float] = field(default_factory=dict)
    """Per-method overrides of ``question_ttl_s``."""
    max_resends: int = 2
    """Resends of one retry after retryable failures (no response, 5xx, 429) in a row."""
    backoff_initial_s: float = 0.05
    backoff_factor: float = 2.0
    backoff_max_s: float = 0.25
    """State-only rounds and resends back off from initial, times factor, up to max."""
    max_server_wait_s: float = 60.0
    """The longest a resend waits for a server's ``Retry-After`` (a longer one, an
    infinite one, waits this long): no server can hold a call without end."""
    max_state_chars: int = 262_144
    """Longest ``requestState`` accepted (the official seals are a few hundred bytes)."""
    max_input_requests: int = 64
    """Most questions one round may carry."""
    input_methods: frozenset[str] = INPUT_METHODS
    idempotent_methods: frozenset[str] = frozenset({"roots/list"})
    """Answered by a handler, not a person: a re-ask is answered anew, not deduplicated."""
    classifier: Classifier = MRTR_CLASSIFIER

    def __post_init__(self) -> None:
        check_fields(self, ValueError, floats="number")

    def ttl(self, method: str) -> float:
        """The client-side age limit of a question of ``method``."""
        return self.ttl_by_method.get(method, self.question_ttl_s)

    def backoff(self, n: int) -> float:
        """The delay before back-off number ``n + 1``."""
        return backoff_delay(n, self.backoff_initial_s, self.backoff_factor, self.backoff_max_s)


# ------------------------------------------------------------------ events and action


@dataclass(frozen=True, slots=True)
class RoundResult:
    """The JSON-RPC ``result`` of the request in flight (the first one or a retry),
    as decoded JSON: a final result, or an ``InputRequiredResult``."""

    result: Any


@dataclass(frozen=True, slots=True)
class RoundFailed:
    """The request in flight came back with a JSON-RPC error (``outcome.body`` is the
    error response) or with no response at all (``outcome.status`` is ``None``)."""

    outcome: SubmissionResult


@dataclass(frozen=True, slots=True)
class Tick:
    """Time passed: check the age of presented questions (see :meth:`MrtrCall.deadline`)."""


@dataclass(frozen=True, slots=True)
class CallCancelled:
    """The application gave up on the call."""

    reason: str = "cancelled by the application"


MrtrEvent = RoundResult | RoundFailed | ev.UserAnswered | Tick | CallCancelled
"""What a client feeds :meth:`MrtrCall.feed`."""


@dataclass(frozen=True, slots=True)
class Retry:
    """Re-send the call after ``delay_s`` seconds with these inputs, under a new id.

    ``input_responses`` maps each ``inputRequests`` key of the round to its answer
    (``None`` on a state-only round); ``request_state`` is the newest state, byte-exact
    (``None``: send none). ``questions`` maps each key to the question it answers, and
    ``round`` counts ``InputRequiredResult`` rounds from 1.
    """

    call: str
    input_responses: Mapping[str, Mapping[str, Any]] | None
    request_state: str | None
    round: int
    delay_s: float = 0.0
    questions: Mapping[str, RequestKey] = field(default_factory=dict)


MrtrAction = Present | Withdraw | Retry | Fail | Complete | Ignore
"""What :meth:`MrtrCall.feed` tells a client to do."""


# ------------------------------------------------------------------ the call


class QuestionRecord(NamedTuple):
    """One question of a :meth:`MrtrCall.snapshot` (a tuple, and its repr a tuple's).
    ``params`` and ``answer`` are canonical JSON."""

    id: str
    method: str
    params: str | None
    state: str
    shown_at: float | None
    answer: str | None
    reasks: int

    def __repr__(self) -> str:
        return tuple.__repr__(self)


class CallSnapshot(NamedTuple):
    """The whole state of a :class:`MrtrCall` (a tuple, and its repr a tuple's):
    the rounds machine's ``state`` and ``cause``, the questions, the current round's
    ``inputRequests`` keys (key -> question id), and the call's counters."""

    state: str
    cause: Cause | None
    questions: tuple[QuestionRecord, ...]
    round_keys: tuple[tuple[str, str], ...]
    round: int
    request_state: str | None
    polls: int
    resends: int
    ended: bool

    def __repr__(self) -> str:
        return tuple.__repr__(self)


class _Question:
    """One question of the call: a liveness instance."""

    __slots__ = ("answer_text", "cause", "key", "method", "params", "reasks", "shown_at", "state")
    machine = LIVENESS.name

    def __init__(self, key: RequestKey, method: str, params: Mapping[str, Any] | None) -> None:
        self.key, self.method, self.params = key, method, params
        self.state = "new"
        self.shown_at: float | None = None
        self.answer_text: str | None = None
        self.reasks = 0
        self.cause: Cause | None = None


class MrtrCall(CallDecider[_Question, CallInstance]):
    """The rules of one MRTR call. See the module docstring.

    ``clock`` returns seconds (monotonic); ``on_fire(machine, source, trigger, dest)`` is
    told every declared transition fired (coverage, logs).
    """

    call_machine = ROUNDS.name
    complete_state = "complete"
    never_asked = "was never presented by this call"
    ended_reason = "call-ended"
    malformed_error = MalformedInputRequiredError
    result_name = "result"

    def __init__(
        self,
        call: str,
        *,
        clock: Callable[[], float],
        config: MrtrConfig | None = None,
        engine: EngineName = "tables",
        on_fire: Callable[[str, str, str, str], None] | None = None,
    ) -> None:
        self.call = call
        self.config = config or MrtrConfig()
        self._clock = clock
        self._run = ProductRun(MRTR_PRODUCT, engine, self._members, self._on_terminal, on_fire)
        self._own = CallInstance(ROUNDS)
        self._asked: dict[str, _Question] = {}
        self._round_keys: dict[str, str] = {}  # inputRequests key -> question id
        self._round = 0
        self._state: str | None = None
        self._polls = 0
        self._resends = 0
        self._ended = False
        self._out: list[MrtrAction] = []

    # ----------------------------------------------------------------- public API

    def feed(self, event: MrtrEvent) -> tuple[MrtrAction, ...]:
        """Apply ``event``; return the actions to perform, in order."""
        return self._feed(event)

    @property
    def round(self) -> int:
        """``InputRequiredResult`` rounds so far."""
        return self._round

    def deadline(self) -> float | None:
        """When the oldest presented, unanswered question ages out (feed a :class:`Tick`
        then), or ``None``."""
        times = [
            q.shown_at + self.config.ttl(q.method)
            for q in self._asked.values()
            if q.state == "presented" and q.shown_at is not None
        ]
        return min(times) if times else None

    def snapshot(self) -> CallSnapshot:
        """The call's whole state as a hashable value (for model checking)."""
        return CallSnapshot(
            self._own.state,
            self._own.cause,
            tuple(
                QuestionRecord(
                    qid, q.method, _freeze(q.params), q.state, q.shown_at, q.answer_text, q.reasks
                )
                for qid, q in self._asked.items()
            ),
            tuple(self._round_keys.items()),
            self._round,
            self._state,
            self._polls,
            self._resends,
            self._ended,
        )

    def restore(self, snap: CallSnapshot) -> None:
        """Return to a state :meth:`snapshot` took (of a call with the same id), or the
        same value as plain tuples (read back from its repr)."""
        snap = CallSnapshot._make(snap)
        self._own = CallInstance(ROUNDS)
        self._own.state, self._own.cause = snap.state, snap.cause
        self._asked = {}
        for record in snap.questions:
            rec = QuestionRecord._make(record)
            params = None if rec.params is None else json.loads(rec.params)
            q = self._asked[rec.id] = _Question((self.call, rec.id), rec.method, params)
            q.state, q.shown_at = rec.state, rec.shown_at
            q.answer_text, q.reasks = rec.answer, rec.reasks
        self._round_keys = dict(snap.round_keys)
        self._round, self._state = snap.round, snap.request_state
        self._polls, self._resends, self._ended = snap.polls, snap.resends, snap.ended

    # ------------------------------------------------------------------ handlers

    def _decide(self, event: MrtrEvent) -> None:
        if isinstance(event, RoundResult):
            self._on_result(event.result)
        elif isinstance(event, RoundFailed):
            self._on_failed(event.outcome)
        elif isinstance(event, ev.UserAnswered):
            self._on_answer(event)
        elif isinstance(event, Tick):
            self._age_out()
        elif isinstance(event, CallCancelled):
            self._fail("cancel", InteractionFailed, event.reason, (), reason="cancelled")

    def _on_result(self, result: Any) -> None:
        if self._own.state != "sent":
            return self._not_awaiting("request")
        if not isinstance(result, Mapping):
            return self._malformed(f"result is {type(result).__name__}, not an object")
        kind = result.get("resultType", "complete")
        if kind == "complete":
            self._resends = 0
            return self._run.broadcast("call_result", None)
        if kind != "input_required":
            return self._malformed(f"unknown resultType {kind!r}")
        asked, state = result.get("inputRequests"), result.get("requestState")
        problem = self._shape_problem(asked, state)
        if problem is not None:
            return self._malformed(problem)
        self._resends = 0
        self._round += 1
        if self._round > self.config.max_rounds:
            return self._fail(
                "exhaust",
                InputRoundsExceededError,
                f"{self.call}: more than {self.config.max_rounds} input rounds",
                (f"round {self._round}", f"max_rounds={self.config.max_rounds}"),
            )
        for q in self._asked.values():
            if q.state == "submitting":
                self._run.fire(q, "accept")
        self._state = state
        if not asked:
            delay = self.config.backoff(self._polls)
            self._polls += 1
            self._round_keys = {}
            self._run.fire(self._own, "poll")
            return self._send(delay)
        self._polls = 0
        self._on_questions(asked)

    def _on_questions(self, asked: Mapping[str, Mapping[str, Any]]) -> None:
        self._run.fire(self._own, "ask")
        keys: dict[str, str] = {}
        fresh: list[_Question] = []
        for server_key, req in asked.items():
            method, params = req["method"], req.get("params")
            qid = question_id(method, params)
            if method in self.config.idempotent_methods:
                qid += f"@{self._round}"
            keys[server_key] = qid
            q = self._asked.get(qid)
            if q is None:
                q = self._asked[qid] = _Question((self.call, qid), method, params)
                fresh.append(q)
            elif q.state == "submitted" and q not in fresh:
                if self._reask_refused(
                    q.reasks,
                    self.config.max_reasks,
                    self.config.on_reask,
                    f"{method} {qid} again",
                    f"round {self._round}: key {server_key!r} re-asks {qid}",
                    q.key,
                ):
                    return None
                q.reasks += 1
        self._round_keys = keys
        if not fresh:
            self._run.fire(self._own, "reuse")
            return self._send(0.0)
        self._run.fire(self._own, "present")
        now = self._clock()
        for q in fresh:
            q.shown_at = now
            self._run.fire(q, "present")
            self._out.append(Present(q.key, q.method, q.params))

    def _on_answer(self, e: ev.UserAnswered) -> None:
        q = self._awaiting_answer(e.key)
        if q is None or self._age_out():
            return
        q.answer_text = canonical_json(dict(e.answer))
        self._run.fire(q, "answer")
        if all(self._asked[qid].state == "answered" for qid in self._round_keys.values()):
            self._run.fire(self._own, "answered")
            self._send(0.0)

    def _on_failed(self, outcome: SubmissionResult) -> None:
        if self._own.state != "sent":
            return self._not_awaiting("request")
        verdict = self.config.classifier.classify(outcome)
        carried = [q for q in self._asked.values() if q.state == "submitting"]
        what = _describe(outcome)
        if verdict.rule in REJECTED_BY_THE_CLIENT:
            what = f"a result the client's SDK refused ({outcome.error})"
        evidence = (f"round {self._round}", what, f"rule {verdict.rule}")
        if verdict.outcome is not OutcomeClass.RETRYABLE:  # terminal (or a stray 'accepted')
            error = error_for(verdict.rule)
            message = rejection(self.call, self._round, verdict.rule)
            if not carried:
                return self._fail("reject", error, message, evidence, reason=verdict.rule)
            for q in carried:  # the answers die with the state they were sent into
                q.cause = Cause(error, message, q.key, evidence, verdict.rule)
                self._run.fire(q, "reject")
            return self._run.settle()
        if self._retries_exhausted(
            f"round {self._round}", self._resends, "max_resends", self.config.max_resends, evidence
        ):
            return
        delay = verdict.retry_after
        if delay is None:
            delay = self.config.backoff(self._resends)
        else:
            delay = server_wait(delay, self.config.max_server_wait_s)
        self._resends += 1
        for q in carried:
            self._run.fire(q, "retry")
        self._run.fire(self._own, "lose")
        self._send(delay)

    # ------------------------------------------------------------------ helpers

    def _send(self, delay: float) -> None:
        """Every input is ready (the call is in ``retrying``): emit the retry, go ``sent``."""
        responses: dict[str, Mapping[str, Any]] = {}
        questions: dict[str, RequestKey] = {}
        for server_key, qid in self._round_keys.items():
            q = self._asked[qid]
            if q.state in ("answered", "submitted"):
                self._run.fire(q, "submit" if q.state == "answered" else "resubmit")
            if q.answer_text is not None:
                responses[server_key] = json.loads(q.answer_text)
                questions[server_key] = q.key
        self._run.fire(self._own, "send")
        self._out.append(
            Retry(
                self.call,
                responses if self._round_keys else None,
                self._state,
                self._round,
                delay,
                questions,
            )
        )

    def _age_out(self) -> bool:
        """Kill presented questions past their client-side age; True if any died."""
        now = self._clock()
        old = [
            q
            for q in self._asked.values()
            if q.state == "presented"
            and q.shown_at is not None
            and now - q.shown_at >= self.config.ttl(q.method)
        ]
        for q in old:
            assert q.shown_at is not None
            q.cause = Cause(
                RequestStateExpiredError,
                f"{self.call}: {q.key[1]} was shown {now - q.shown_at:.1f}s ago, past the "
                f"client-side age limit; its requestState has surely expired",
                q.key,
                (
                    f"presented at t={q.shown_at:.3f}",
                    f"age limit {self.config.ttl(q.method):g}s",
                    f"checked at t={now:.3f}",
                ),
                "aged-out",
            )
            self._run.fire(q, "stale")
        self._run.settle()
        return bool(old)

    def _shape_problem(self, asked: Any, state: Any) -> str | None:
        if asked is None and state is None:
            return "neither inputRequests nor requestState"
        if state is not None and not isinstance(state, str):
            return f"requestState is {type(state).__name__}, not a string"
        if isinstance(state, str) and len(state) > self.config.max_state_chars:
            limit = self.config.max_state_chars
            return f"requestState of {len(state)} chars (max_state_chars={limit})"
        if asked is None:
            return None
        cfg = self.config
        return input_requests_problem(asked, cfg.max_input_requests, cfg.input_methods)

    # -- the call's parts, as the product runtime's callbacks name them (fsm.machines.call)

    def _call_id(self) -> str:
        return self.call

    def _result_at(self) -> str:
        return f"round {self._round + 1}"  # a result counts as a round once found well formed


def _describe(outcome: SubmissionResult) -> str:
    """Evidence of a failed round: the JSON-RPC error (with ``data.reason`` when given),
    after the HTTP status when one was observed."""
    rpc = outcome.jsonrpc_error()
    if rpc is None:
        return outcome.describe()
    err = outcome.body.get("error") if outcome.body is not None else None
    data = err.get("data") if isinstance(err, Mapping) else None
    reason = data.get("reason") if isinstance(data, Mapping) else None
    text = f"JSON-RPC {rpc[0]} {rpc[1]!r}" + (f" reason={reason}" if reason else "")
    return text if outcome.status is None else f"HTTP {outcome.status} {text}"


def _freeze(params: Mapping[str, Any] | None) -> str | None:
    return None if params is None else canonical_json(params)
