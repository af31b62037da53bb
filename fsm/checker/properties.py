"""Named properties (what to check) and verdicts (what the checker concluded).

Semantics follow TLC, with Stateright's constructors:

* ``always(name, pred)``: an invariant, checked on every discovered state (including states
  outside the boundary). A violation comes with a shortest counterexample (BFS order).
* ``sometimes(name, pred)``: reachability. It holds when some reachable state satisfies
  ``pred`` (that example path is reported); if none does the verdict is ``vacuous``, a failure:
  it usually means the model cannot reach the situation a property was written for.
* ``deadlock()``: a reachable, expanded, non-terminal state with no successor is a violation.
  Only states inside the boundary are judged; mark intended end states with ``is_terminal``.
* ``terminates(name="L1")``: termination *without fairness*: any reachable cycle, self-loops
  included, is a violation, reported as a lasso. Models must bound their environment (resume
  budgets, retry counts, ...) for this to hold; stuttering is not modelled.

There is no ``eventually``: a liveness property of the form "every behaviour reaches X" is
expressed as termination plus an invariant on terminal states.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from fsm.checker.model import Model, resolve_hooks

S = TypeVar("S", bound=Hashable)
T = TypeVar("T", bound=Hashable)


class Kind(enum.Enum):
    """What a property asks of the state space."""

    ALWAYS = "always"
    SOMETIMES = "sometimes"
    DEADLOCK = "deadlock"
    TERMINATES = "terminates"


class Verdict(enum.Enum):
    """The checker's conclusion about one property."""

    HOLDS = "holds"
    VIOLATED = "violated"
    VACUOUS = "vacuous"  # a `sometimes` property that no reachable state satisfies
    UNKNOWN = "unknown"  # the exploration hit a bound before deciding

    @property
    def ok(self) -> bool:
        """True only for HOLDS."""
        return self is Verdict.HOLDS


@dataclass(frozen=True)
class Property(Generic[S]):
    """A named property of a model; build it with the static constructors."""

    name: str
    kind: Kind
    description: str = ""
    predicate: Callable[[S], bool] | None = field(default=None, compare=False, repr=False)

    @staticmethod
    def always(name: str, predicate: Callable[[T], bool], description: str = "") -> Property[T]:
        """Invariant: ``predicate`` is true in every reachable state."""
        return Property(name, Kind.ALWAYS, description, predicate)

    @staticmethod
    def sometimes(name: str, predicate: Callable[[T], bool], description: str = "") -> Property[T]:
        """Reachability: some reachable state satisfies ``predicate`` (else ``vacuous``)."""
        return Property(name, Kind.SOMETIMES, description, predicate)

    @staticmethod
    def deadlock(
        name: str = "deadlock", description: str = "no reachable non-terminal state is stuck"
    ) -> Property[Any]:
        """No reachable non-terminal state inside the boundary lacks a successor."""
        return Property(name, Kind.DEADLOCK, description)

    @staticmethod
    def terminates(
        name: str = "L1", description: str = "no behaviour runs forever (no reachable cycle)"
    ) -> Property[Any]:
        """Termination without fairness: no cycle (self-loops included) is reachable."""
        return Property(name, Kind.TERMINATES, description)


def find_property(model: Model[Any, Any], name: str) -> Property[Any]:
    """The property of ``model`` called ``name``; KeyError listing the known names if none."""
    props = list(model.properties())
    for prop in props:
        if prop.name == name:
            return prop
    known = ", ".join(p.name for p in props) or "none"
    raise KeyError(f"model has no property {name!r} (known: {known})")


def violated_at(
    model: Model[Any, Any], name: str, states: Sequence[Any], loop_start: int | None = None
) -> bool:
    """Whether the replayed ``states`` (init state first) witness a violation of ``name``.

    ``always``: the last state breaks the predicate. ``deadlock``: the last state is stuck and
    not terminal. ``terminates``: the states from ``loop_start`` on form a cycle back to the
    state at ``loop_start`` (to its system state, for a model with ``system_state``: see
    :class:`~fsm.checker.Model`). A ``sometimes`` property has no finite witness of
    violation.
    """
    prop = find_property(model, name)
    last = states[-1]
    if prop.kind is Kind.ALWAYS:
        assert prop.predicate is not None
        return not prop.predicate(last)
    if prop.kind is Kind.DEADLOCK:
        hooks = resolve_hooks(model)
        stuck = all(model.next_state(last, a) is None for a in model.actions(last))
        return stuck and not hooks.is_terminal(last)
    if prop.kind is Kind.TERMINATES:
        system = resolve_hooks(model).system_state or (lambda s: s)
        return (
            loop_start is not None
            and loop_start < len(states) - 1
            and system(states[loop_start]) == system(last)
        )
    return False
