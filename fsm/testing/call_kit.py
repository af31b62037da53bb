"""What the kits of one call share: the MRTR kit (:mod:`fsm.testing.mrtr_kit`, one call's
input rounds) and the tasks kit (:mod:`fsm.testing.tasks_kit`, one task's polls).

:class:`OneCallMachine` fails a run on a checked property only (the monitor tracks every
one), checks after each step that the client ended its call at most once, and at
teardown drains a run that has not failed: each round the kit's :meth:`~OneCallMachine._drain`
moves the environment one step on, and the call must end within ``drain_rounds`` of them
(P5). :func:`bind` makes a kit's machine for one client factory; :func:`question` is the
question numbered ``q`` both kits' servers ask.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, ClassVar, TypeVar

from hypothesis.stateful import RuleBasedStateMachine, invariant

from fsm import properties as P
from fsm.testing.kit import failure, out_of_range

__all__ = ["OneCallMachine", "bind", "question"]


def question(q: int) -> dict[str, Any]:
    """The kit's question number ``q`` as an ``inputRequests`` entry."""
    return {
        "method": "elicitation/create",
        "params": {"message": f"Question {q}?", "requestedSchema": {"type": "object"}},
    }


class OneCallMachine(RuleBasedStateMachine):
    """The plumbing of a one-call kit (see the module docstring). A kit sets
    :attr:`subject` and :attr:`drain_rounds` and gives :meth:`_drain`; it counts the
    outcomes it sees in :attr:`ended`."""

    subject: ClassVar[str]
    """What the client ends: ``"call"``, ``"task"``."""
    drain_rounds: ClassVar[int]
    """How many rounds of draining the call may take to end at teardown."""
    checked: ClassVar[frozenset[str]] = frozenset(P.PROPERTIES)
    """The property names that fail a run."""

    def __init__(self) -> None:
        super().__init__()
        self.ended = 0
        """How many outcomes (``Complete``, ``Fail``) the client gave."""
        self.violated = False
        self.monitor = P.MonitorState()

    def _violation(self, name: str, why: str) -> None:
        """Fail the run if ``name`` is checked (the monitor tracks every property anyway)."""
        if name in type(self).checked:
            self.violated = True  # teardown must not drain a run that already failed
            raise failure(name, why)

    def _judge(self, obs: P.Observation, budgets: P.Budgets) -> None:
        """Step the monitor over ``obs`` within ``budgets``; fail on a checked violation."""
        self.monitor, bad = P.step(self.monitor, obs, budgets)
        for v in bad:
            self._violation(v.name, v.why)

    def _drain(self, n: int) -> None:
        """Round ``n`` of draining: move the environment one step towards the call's end."""
        raise NotImplementedError

    @invariant()
    def one_outcome(self) -> None:
        if self.ended > 1:
            self._violation("P5", f"the {type(self).subject} ended {self.ended} times")

    def teardown(self) -> None:
        if self.violated:
            return
        rounds = type(self).drain_rounds
        for n in range(rounds):
            if self.ended:
                return
            self._drain(n)
        if not self.ended:
            self._violation(
                "P5", f"the {type(self).subject} did not end within {rounds} rounds of draining"
            )


M = TypeVar("M", bound=OneCallMachine)


def bind(
    base: type[M],
    name: str,
    client_factory: Any,
    check: Iterable[str] | None,
    *,
    questions: int,
    **seconds: float,
) -> type[M]:
    """A subclass ``name`` of ``base`` bound to ``client_factory``, failing runs on the
    ``check`` properties (default all), with the class attributes ``questions`` (how many
    the call asks) and the durations ``seconds``. ``ValueError`` for a bound out of range
    (``questions`` an integer >= 1, not a ``bool`` or 1.5; each duration a number > 0, not
    NaN: :func:`fsm.testing.kit.out_of_range`) or a ``check`` naming no property
    (:func:`fsm.properties.property_names`)."""
    wrong = out_of_range({"questions": 1}, {"questions": questions, **seconds})
    if wrong:
        raise ValueError(f"{name}: out of range: {', '.join(wrong)}")
    checked = frozenset(P.property_names(check))
    body = {
        "client_factory": staticmethod(client_factory),
        "questions": questions,
        **seconds,
        "checked": checked,
    }
    return type(name, (base,), body)
