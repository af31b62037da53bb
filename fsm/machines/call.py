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

A decider names its parts (:meth:`CallDecider._call_instance`,
:meth:`CallDecider._question_instances`, ...) and keeps every decision; like the
runtime, this class assigns no state.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, ClassVar, Generic, TypeVar, cast

from fsm.actions import Complete, Fail, Withdraw
from fsm.errors import InteractionFailed, RequestKey
from fsm.machines.product import Cause, Instance, ProductRun
from fsm.machines.spec import Scope

__all__ = ["CallDecider"]

Q = TypeVar("Q", bound=Instance)
C = TypeVar("C", bound=Instance)


class CallDecider(Generic[Q, C]):
    """The part of a one-call decider the product runtime calls back (see the module
    docstring). ``Q`` is the decider's question instance type, ``C`` its call's.

    A subclass sets :attr:`call_machine` and :attr:`complete_state`, gives ``_run``,
    ``_out`` (the actions of the event being fed) and ``_ended`` (whether the call's
    outcome was emitted), and names its parts by overriding the four methods that raise
    ``NotImplementedError``; it may refine :meth:`_withdraw_reason` and
    :meth:`_call_ended`."""

    call_machine: ClassVar[str]
    """The name of the call's own machine in the product."""
    complete_state: ClassVar[str]
    """The state of the call's machine in which the call ended with its result."""

    _run: ProductRun[Q | C]
    _out: list[Any]
    _ended: bool

    def _call_id(self) -> str:
        """The call's name in the actions (``Complete``, ``Fail``) and errors."""
        raise NotImplementedError

    @property
    def call_id(self) -> str:
        """The call's name (an MRTR call's id, a task's id)."""
        return self._call_id()

    def _call_instance(self) -> C:
        """The call's own instance."""
        raise NotImplementedError

    def _question_instances(self) -> Iterable[Q]:
        """Every question instance of the call, ended ones included."""
        raise NotImplementedError

    def _question_key(self, question: Q) -> RequestKey:
        """The key a question's prompt was presented under."""
        raise NotImplementedError

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
        self._run.kill(self._call_instance(), trigger, cause)

    # -- what the product's rows mean here (fsm.machines.product applies them)

    def _members(self, machine: str, scope: Scope, anchor: Q | C | None) -> list[Q | C]:
        """The instances of ``machine`` in this call (the product's ``origin`` scope is
        the call, and one call has no wider scope)."""
        if machine == self.call_machine:
            return [self._call_instance()]
        return list(self._question_instances())

    def _on_terminal(self, inst: Q | C, old: str, trigger: str) -> None:
        """An instance ended: take a presented question's prompt down; end the call once."""
        call = self._call_instance()
        if inst is not call:
            if old == "presented":
                cause = inst.cause or call.cause
                why = (cause.reason or cause.error.reason) if cause is not None else trigger
                key = self._question_key(cast(Q, inst))
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
