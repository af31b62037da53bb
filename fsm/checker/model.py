"""The :class:`Model` protocol the checker explores, and :class:`BaseModel` with its defaults.

A model is a *closed* system: everything that may happen (client policy and environment alike)
is an enabled action of some state. The checker only ever calls the methods below, so a model is
any object that has the four required ones; the optional hooks are looked up by name and fall
back to the defaults of :class:`BaseModel` when absent.

Contracts every model must keep (the checker cannot detect their violation):

* states are hashable, immutable values; two states that compare equal are the same state;
* every method is a pure, deterministic function of its arguments: same state, same actions
  in the same order, same successors. Determinism of counts and counterexamples rests on it;
* ``str(action)`` names an action; names are unique among the enabled actions of one state,
  because counterexamples are recorded and replayed by name (see :func:`fsm.checker.replay`).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar, cast, runtime_checkable

if TYPE_CHECKING:
    from fsm.checker.properties import Property

S = TypeVar("S", bound=Hashable)
A = TypeVar("A")

REQUIRED_METHODS = ("init_states", "actions", "next_state", "properties")


@runtime_checkable
class Model(Protocol[S, A]):
    """What the checker needs from a model (in the spirit of Stateright's ``Model`` trait).

    Optional hooks, with their defaults from :class:`BaseModel`:

    * ``name: str``: shown in reports (default: the class name);
    * ``within_boundary(state) -> bool``: states outside the boundary are discovered and checked
      against invariants but never expanded (TLC's state constraint). Default: always inside;
    * ``is_terminal(state) -> bool``: a terminal state with no successor is not a deadlock;
    * ``declared_transitions() -> Iterable[str]``: labels of the declared machine transitions,
      for coverage; ``fired_transitions(state, action, next_state) -> Iterable[str]``: which of
      those labels an explored edge fired;
    * ``format_state(state) -> str``: how counterexamples print a state (default: ``repr``);
    * ``symmetry() -> Symmetry | None``: the model's declared symmetry (default: none), with
      which the checker explores one representative state per orbit (see :class:`Symmetry`);
    * ``system_state(state) -> Hashable``: the state without what only records (a property
      monitor's state). Termination is judged on it: a lasso is shortest over system
      states, so a monitor that records the first lap does not start the loop a lap late.
      Contract: states of one system state have the same actions enabled and successors
      of the same system states (what is projected out never steers). Default: the state;
    * ``why(name, states, loop_start) -> str | None``: the values that make the
      counterexample ``states`` (init first; a lasso's loop from ``loop_start``) violate
      property ``name``, in words, for reports and diagrams (default: None);
    * ``describe_step(state, action, next_state) -> str``: what a step does besides its
      name and the state it leads to (a world: the client's outputs), shown in traces
      (default: nothing).
    """

    def init_states(self) -> Sequence[S]:
        """The initial states (duplicates are ignored)."""
        ...

    def actions(self, state: S) -> Iterable[A]:
        """The actions enabled in ``state``, in a deterministic order."""
        ...

    def next_state(self, state: S, action: A) -> S | None:
        """The successor of ``state`` under ``action``, or None if the action does not apply."""
        ...

    def properties(self) -> Sequence[Property[S]]:
        """The named properties to check (see :class:`fsm.checker.Property`)."""
        ...


class BaseModel(Generic[S, A]):
    """Convenience base class: the four required methods plus the optional hooks' defaults.

    Subclass it, implement ``init_states``, ``actions``, ``next_state`` and ``properties``, and
    override only the hooks you need. Leaving ``within_boundary`` and ``fired_transitions``
    alone lets the checker skip calling them at all.
    """

    @property
    def name(self) -> str:
        """The model's name in reports; the class name unless overridden."""
        return type(self).__name__

    def init_states(self) -> Sequence[S]:
        raise NotImplementedError

    def actions(self, state: S) -> Iterable[A]:
        raise NotImplementedError

    def next_state(self, state: S, action: A) -> S | None:
        raise NotImplementedError

    def properties(self) -> Sequence[Property[S]]:
        raise NotImplementedError

    def within_boundary(self, state: S) -> bool:
        """Whether ``state`` is expanded; states outside are still checked, never expanded."""
        return True

    def is_terminal(self, state: S) -> bool:
        """Whether ``state`` is an intended end state (so having no successor is fine)."""
        return False

    def declared_transitions(self) -> Iterable[str]:
        """Labels of the declared machine transitions, for coverage (default: none)."""
        return ()

    def fired_transitions(self, state: S, action: A, next_state: S) -> Iterable[str]:
        """Which declared transition labels the edge ``state --action--> next_state`` fired."""
        return ()

    def format_state(self, state: S) -> str:
        """One-line rendering of ``state`` for counterexamples."""
        return repr(state)

    def symmetry(self) -> Symmetry[S] | None:
        """The model's declared symmetry, or None (the default: every state is explored)."""
        return None

    def system_state(self, state: S) -> Hashable:
        """``state`` without what only records (a property monitor): what cycles are
        judged on. Default: the state itself."""
        return state

    def why(self, name: str, states: Sequence[S], loop_start: int | None) -> str | None:
        """Why the path through ``states`` violates property ``name``, or None."""
        return None

    def describe_step(self, state: S, action: A, next_state: S) -> str:
        """What the step ``state --action--> next_state`` does besides its name ("")."""
        return ""


@dataclass(frozen=True)
class Symmetry(Generic[S]):
    """A symmetry the model declares (Stateright's ``Representative``, TLC's symmetry sets).

    ``representative(state)`` maps every state to one canonical member of its orbit: the
    states that differ from it only by a renaming of interchangeable ids (two requests
    swapped, say). ``orbit_size(state)``, optional, counts the states of that orbit, so a
    report can say how many states of the full space the canonical ones stand for.

    Contract (the checker cannot verify it while it explores; :func:`~fsm.checker.
    symmetry.verify_symmetry` does, on the full space): states of one orbit get the same
    representative; a state and its representative satisfy the same properties, are both
    terminal or both not, and their successors have the same representatives. With that,
    every verdict (invariants, reachability, deadlock, termination) is the full space's,
    and every counterexample found among representatives has a concrete counterpart the
    checker rebuilds (:class:`~fsm.checker.Checker` reports paths in the model's own ids).
    """

    representative: Callable[[S], S]
    orbit_size: Callable[[S], int] | None = None


@dataclass(frozen=True)
class Hooks:
    """A model's optional hooks, resolved once; None means "default, do not call"."""

    name: str
    within_boundary: Callable[[Any], bool] | None
    is_terminal: Callable[[Any], bool]
    declared: tuple[str, ...]
    fired: Callable[[Any, Any, Any], Iterable[str]] | None
    format_state: Callable[[Any], str]
    symmetry: Symmetry[Any] | None = None
    system_state: Callable[[Any], Hashable] | None = None
    why: Callable[[str, Sequence[Any], int | None], str | None] | None = None
    describe_step: Callable[[Any, Any, Any], str] | None = None


def _overridden(model: object, attr: str) -> Callable[..., Any] | None:
    """The bound hook ``attr`` of ``model`` unless absent or inherited from BaseModel."""
    fn = getattr(model, attr, None)
    if fn is None or getattr(type(model), attr, None) is getattr(BaseModel, attr):
        return None
    if not callable(fn):
        raise TypeError(f"model attribute {attr!r} must be callable")
    return cast("Callable[..., Any]", fn)


def model_name(model: object) -> str:
    """``model.name`` if it is a non-empty string, else the class name."""
    name = getattr(model, "name", None)
    return name if isinstance(name, str) and name else type(model).__name__


def require_model(model: object) -> None:
    """Raise TypeError naming the missing methods unless ``model`` has the required ones."""
    missing = [m for m in REQUIRED_METHODS if not callable(getattr(model, m, None))]
    if missing:
        raise TypeError(f"{type(model).__name__} is not a model: missing {', '.join(missing)}")


def resolve_hooks(model: object) -> Hooks:
    """Look up the optional hooks of ``model`` (any object with the required methods)."""
    require_model(model)
    declared_fn = _overridden(model, "declared_transitions")
    declared = tuple(str(label) for label in declared_fn()) if declared_fn else ()
    return Hooks(
        name=model_name(model),
        within_boundary=_overridden(model, "within_boundary"),
        is_terminal=_overridden(model, "is_terminal") or (lambda _s: False),
        declared=tuple(dict.fromkeys(declared)),
        fired=_overridden(model, "fired_transitions") if declared else None,
        format_state=_overridden(model, "format_state") or repr,
        symmetry=_declared_symmetry(model),
        system_state=_overridden(model, "system_state"),
        why=_overridden(model, "why"),
        describe_step=_overridden(model, "describe_step"),
    )


def _declared_symmetry(model: object) -> Symmetry[Any] | None:
    """What ``model.symmetry()`` declares (None without the hook); TypeError if not a
    :class:`Symmetry`."""
    declare = _overridden(model, "symmetry")
    declared = declare() if declare is not None else None
    if declared is not None and not isinstance(declared, Symmetry):
        raise TypeError("model.symmetry() must return a Symmetry or None")
    return declared
