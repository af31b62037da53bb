"""What the product's rows mean to a decider of one call, written once for every era.

A decider of one call (an MRTR call's input rounds, :mod:`fsm.mrtr.call`; one task's
polls, :mod:`fsm.tasks.task`) runs two kinds of instances on one
:class:`~fsm.machines.product.ProductRun`: the call's own, one, and one per question
(an input request, or a task's ``inputRequests`` key). The runtime asks the decider two
things, and the answers are the same in every era:

* the members of a scope (:meth:`CallDecider._members`): a call has no wider scope than
  itself, so the call's machine has the one instance, the question machine all of them;
* what an instance's end means (:meth:`CallDecider._on_terminal`): a question that ends
  while presented has its prompt withdrawn (``Withdraw``, with the reason that killed
  it); the call's own instance ending ends the call, once, with ``Complete`` when it
  ended in :attr:`CallDecider.complete_state` and ``Fail`` with its cause otherwise.

Both eras also feed and end a call alike, and take these from here: what an event
does once the call has ended, and the actions of one fed before, with the outcome last
(:meth:`CallDecider._feed`), an answer to a question not showing ignored
(:meth:`CallDecider._awaiting_answer`), an event that answers no request in flight
ignored (:meth:`CallDecider._not_awaiting`), a malformed result
(:meth:`CallDecider._malformed`), a request that failed once more than its bound allows
in a row (:meth:`CallDecider._retries_exhausted`), a re-ask past its budget
(:meth:`CallDecider._reask_refused`), and the call's own instance
(:class:`CallInstance`).

A decider holds its parts (the call's own instance, its questions by id: each
question an :class:`AskedQuestion`) and keeps every decision; like the runtime, this
class assigns no state.
"""

from __future__ import annotations

from typing import Any, ClassVar, Generic, Protocol, TypeVar, cast

from fsm import events as ev
from fsm.actions import Complete, Fail, Ignore, Withdraw
from fsm.errors import (
    GuardUsageError,
    InteractionFailed,
    QuestionReaskedError,
    RequestKey,
    SubmissionFailedError,
)
from fsm.machines.product import Cause, Instance, ProductRun
from fsm.machines.spec import MachineSpec, Scope
from fsm.questions import OnReask, reask_refusal

__all__ = ["AskedQuestion", "CallDecider", "CallInstance"]


class CallInstance:
    """The call's own instance of ``spec`` (an MRTR call's rounds, a task): its state,
    from ``spec.initial``, and the cause it died of."""

    __slots__ = ("cause", "machine", "state")

    def __init__(self, spec: MachineSpec) -> None:
        self.machine = spec.name
        self.state = spec.initial
        self.cause: Cause | None = None


class AskedQuestion(Instance, Protocol):
    """A question instance as :class:`CallDecider` sees it: an :class:`Instance` with
    the key its prompt is presented under."""

    key: RequestKey


Q = TypeVar("Q", bound=AskedQuestion)
C = TypeVar("C", bound=Instance)


class CallDecider(Generic[Q, C]):
    """The part of a one-call decider the product runtime calls back (see the module
    docstring). ``Q`` is the decider's question instance type, ``C`` its call's.

    A subclass sets :attr:`call_machine`, :attr:`complete_state`, :attr:`never_asked`,
    :attr:`ended_reason`, :attr:`malformed_error` and :attr:`result_name`, gives ``_own``
    (the call's own instance), ``_asked`` (its questions by id), ``_run``, ``_out`` (the
    actions of the event being fed) and ``_ended`` (whether the call's outcome was
    emitted), names the call by overriding :meth:`_call_id`, decides a live call's events
    in :meth:`_decide` and says where a result came in :meth:`_result_at`; its ``feed``
    returns :meth:`_feed`. It may refine :meth:`_withdraw_reason` and :meth:`_call_ended`."""

    call_machine: ClassVar[str]
    """The name of the call's own machine in the product."""
    complete_state: ClassVar[str]
    """The state of the call's machine in which the call ended with its result."""
    never_asked: ClassVar[str]
    """How the call's error for an answer to a key it never asked ends, e.g. ``"was never
    presented by this call"``."""
    ended_reason: ClassVar[str]
    """The reason of the ``Ignore`` every event fed after the call's outcome gets, e.g.
    ``"call-ended"``."""
    malformed_error: ClassVar[type[InteractionFailed]]
    """The error a malformed result ends the call with."""
    result_name: ClassVar[str]
    """What the error of a malformed result calls the result, e.g. ``"result"``."""

    _own: C
    """The call's own instance (an MRTR call's rounds, a task)."""
    _asked: dict[str, Q]
    """Every question instance of the call by its id, ended ones included."""
    _run: ProductRun[Q | C]
    _out: list[Any]
    _ended: bool

    def _call_id(self) -> str:
        """The call's name in the actions (``Complete``, ``Fail``) and errors."""
        raise NotImplementedError

    def _decide(self, event: Any) -> None:
        """Decide ``event``, fed while the call is live: append its actions to ``_out``."""
        raise NotImplementedError

    def _result_at(self) -> str:
        """Where in the call the result being judged came, for the evidence of a
        malformed one (e.g. ``"round 2"``)."""
        raise NotImplementedError

    @property
    def call_id(self) -> str:
        """The call's name (an MRTR call's id, a task's id)."""
        return self._call_id()

    @property
    def state(self) -> str:
        """The state of the call's own machine (an MRTR call's rounds, a task)."""
        return self._own.state

    def state_of(self, key: RequestKey) -> str | None:
        """The liveness state of question ``key`` (``None`` if this call never asked it)."""
        question = self._asked.get(str(key[1])) if key[0] == self._call_id() else None
        return question.state if question is not None else None

    def _known(self, key: RequestKey) -> Q:
        """The question asked under ``key``; :class:`~fsm.errors.GuardUsageError` if
        this call never asked it (an answer to it is the application's mistake)."""
        question = self._asked.get(str(key[1])) if key[0] == self._call_id() else None
        if question is None:
            raise GuardUsageError(f"{self._call_id()}: {key!r} {self.never_asked}")
        return question

    def _withdraw_reason(self, why: str, trigger: str) -> str:
        """The reason a presented question's prompt is withdrawn with: ``why`` (its
        cause's reason), unless the era names the ``trigger`` otherwise."""
        return why

    def _call_ended(self) -> None:
        """Called once, as the call ends, before its outcome is emitted: drop what the
        decider was waiting for."""

    def _fail(
        self,
        trigger: str,
        error: type[InteractionFailed],
        message: str,
        evidence: tuple[str, ...],
        *,
        key: RequestKey | None = None,
        reason: str | None = None,
    ) -> None:
        """Kill the call's own instance by ``trigger`` with this cause (the product's
        rows take its questions down with it)."""
        cause = Cause(error, message, key, evidence, reason)
        self._run.kill(self._own, trigger, cause)

    def _feed(self, event: Any) -> tuple[Any, ...]:
        """The actions of ``event``, what ``feed`` returns. Once the call has ended, the
        event is ignored (:attr:`ended_reason`), but an answer must still name a question
        this call asked (:class:`~fsm.errors.GuardUsageError` if not); before, :meth:`_decide`
        decides it, and its actions come out of :meth:`_flush`."""
        if self._ended:
            if isinstance(event, ev.UserAnswered):
                self._known(event.key)
            name = self._call_id()
            return (Ignore(self.ended_reason, f"{name} already ended", stream=name),)
        self._out = []
        self._decide(event)
        return self._flush()

    def _flush(self) -> tuple[Any, ...]:
        """The actions of the event just fed, the call's outcome (``Complete``, ``Fail``)
        last, so prompts are taken down before the caller hears of it; ``_out`` is
        emptied."""
        out = sorted(self._out, key=lambda a: isinstance(a, Complete | Fail))
        self._out = []
        return tuple(out)

    def _awaiting_answer(self, key: RequestKey) -> Q | None:
        """The question asked under ``key`` if it awaits the user's answer (it is
        ``presented``); if not, ``None``: the answer to ``key`` is ignored
        (``not-presented``) and the call goes on. An answer to a key this call never
        asked raises (:meth:`_known`)."""
        question = self._known(key)
        if question.state == "presented":
            return question
        name = self._call_id()
        self._out.append(
            Ignore("not-presented", f"{key!r} is {question.state}", key=key, stream=name)
        )
        return None

    def _not_awaiting(self, request: str) -> None:
        """Ignore an outcome of ``request`` (e.g. ``"tasks/get"``) fed while none is in
        flight (``not-awaiting``): the call goes on."""
        name = self._call_id()
        self._out.append(Ignore("not-awaiting", f"no {request} in flight", stream=name))

    def _malformed(self, problem: str) -> None:
        """End the call (``exhaust``, :attr:`malformed_error`): the result that came
        :meth:`_result_at` has ``problem``."""
        self._fail(
            "exhaust",
            self.malformed_error,
            f"{self._call_id()}: malformed {self.result_name}: {problem}",
            (self._result_at(), problem),
        )

    def _retries_exhausted(
        self, what: str, failures: int, bound: str, limit: int, evidence: tuple[str, ...]
    ) -> bool:
        """Whether ``what``, which failed retryably after ``failures`` retried failures in
        a row, is past the ``limit`` retries its ``bound`` (a config field's name) allows;
        if so the call ends (``exhaust``, :class:`~fsm.errors.SubmissionFailedError`, with
        ``evidence`` and ``bound=limit``), else the caller retries it."""
        if failures < limit:
            return False
        self._fail(
            "exhaust",
            SubmissionFailedError,
            f"{self._call_id()}: {what} failed {failures + 1} times in a row",
            (*evidence, f"{bound}={limit}"),
        )
        return True

    def _reask_refused(
        self,
        reasks: int,
        max_reasks: int,
        on_reask: OnReask,
        asked: str,
        evidence: str,
        key: RequestKey,
    ) -> bool:
        """Whether the call's re-ask budget (:func:`fsm.questions.reask_refusal`) refuses
        one more re-ask of an answered question, after ``reasks``; if so the call ends
        (``exhaust``, :class:`~fsm.errors.QuestionReaskedError` naming ``asked``, with
        ``evidence`` and the refusal), and the user is never asked again."""
        refusal = reask_refusal(reasks, max_reasks, on_reask)
        if refusal is None:
            return False
        self._fail(
            "exhaust",
            QuestionReaskedError,
            f"{self._call_id()}: the server asked {asked} after it was answered; "
            "the user is not asked twice",
            (evidence, refusal),
            key=key,
        )
        return True

    # -- what the product's rows mean here (fsm.machines.product applies them)

    def _members(self, machine: str, scope: Scope, anchor: Q | C | None) -> list[Q | C]:
        """The instances of ``machine`` in this call (the product's ``origin`` scope is
        the call, and one call has no wider scope)."""
        if machine == self.call_machine:
            return [self._own]
        return list(self._asked.values())

    def _on_terminal(self, inst: Q | C, old: str, trigger: str) -> None:
        """An instance ended: take a presented question's prompt down; end the call once."""
        call = self._own
        if inst is not call:
            if old == "presented":
                cause = inst.cause or call.cause
                why = (cause.reason or cause.error.reason) if cause is not None else trigger
                key = cast(Q, inst).key
                self._out.append(Withdraw(key, self._withdraw_reason(why, trigger)))
        elif not self._ended:
            self._ended = True
            self._call_ended()
            name = self._call_id()
            if inst.state == self.complete_state:
                self._out.append(Complete(name))
            else:
                cause = inst.cause or Cause(InteractionFailed, f"{name} {trigger}", None, ())
                self._out.append(Fail(name, cause.build(name)))
