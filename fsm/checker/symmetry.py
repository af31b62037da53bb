"""Check a model's declared symmetry against its full state space.

The checker trusts a model's :class:`~fsm.checker.model.Symmetry`: it explores one
representative per orbit and never looks at the other states. :func:`verify_symmetry`
explores the full space once and checks, state by state, what that trust rests on:

* ``representative`` is idempotent, and a state and its representative agree on every
  ``always``/``sometimes`` predicate, on ``is_terminal`` and on ``within_boundary``;
* the representatives of a state's successors are those of its representative's
  successors (so "same representative" is a bisimulation: every verdict, deadlock and
  cycles included, is the same on both sides);
* the reduced search reaches exactly the representatives of the full space's states,
  and, when the model declares ``orbit_size``, the orbits of those representatives add
  up to the full space's state count.

It costs a full exploration plus one expansion per representative, so it is for tests
on bounded instances (the shipped models up to 3 requests), not for every run.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any, TypeVar

from fsm.checker.explore import Checker, ModelError
from fsm.checker.model import Model
from fsm.checker.report import Report

S = TypeVar("S", bound=Hashable)

_MAX_PROBLEMS = 10


@dataclass(frozen=True)
class SymmetryAudit:
    """What :func:`verify_symmetry` found: both reports, the counts it compared, and up to
    ten problems (empty when the declared symmetry is sound on this instance)."""

    full: Report
    reduced: Report | None
    """None when the reduced run failed (its failure is the first problem)."""
    representatives: int
    """Distinct representatives of the full space's states."""
    problems: tuple[str, ...]

    @property
    def ok(self) -> bool:
        """No problem found."""
        return not self.problems


def verify_symmetry(model: Model[S, Any], *, max_states: int | None = None) -> SymmetryAudit:
    """Explore ``model`` with and without its declared symmetry and check the symmetry's
    contract on every state of the full space (see the module docstring). ValueError if
    the model declares no symmetry; a bound hit is reported as a problem."""
    full_run = Checker(model, max_states=max_states, symmetry=False)
    sym = full_run.hooks.symmetry
    if sym is None:
        raise ValueError(f"{full_run.hooks.name} declares no symmetry")
    full = full_run.run()
    problems: list[str] = []

    def problem(text: str) -> None:
        if len(problems) < _MAX_PROBLEMS:
            problems.append(text)

    reduced_run = Checker(model, max_states=max_states)
    reduced: Report | None = None
    try:
        reduced = reduced_run.run()
    except ModelError as exc:  # a counterexample among representatives had no concrete one
        problem(str(exc))

    if not full.complete or (reduced is not None and not reduced.complete):
        problem("a bound was hit: the audit covers part of the space only")
    canon, hooks = sym.representative, full_run.hooks
    predicates = [p for p in full_run.props if p.predicate is not None]
    fmt = hooks.format_state
    states, offsets, edges = full_run.states, full_run.offsets, full_run.edges
    memo: dict[Any, frozenset[Any]] = {}

    def successors_of(c: S) -> frozenset[Any]:
        got = memo.get(c)
        if got is None:
            nxt = (model.next_state(c, a) for a in model.actions(c))
            got = memo[c] = frozenset(canon(t) for t in nxt if t is not None)
        return got

    canonical = [canon(s) for s in states]  # once per state, not once per edge into it
    reps = set(canonical)
    for i, s in enumerate(states):
        c = canonical[i]
        if canon(c) != c:
            problem(f"representative is not idempotent at {fmt(s)}")
        for p in predicates:
            assert p.predicate is not None
            if bool(p.predicate(s)) != bool(p.predicate(c)):
                problem(f"{p.name} differs between {fmt(s)} and its representative {fmt(c)}")
        if hooks.is_terminal(s) != hooks.is_terminal(c):
            problem(f"is_terminal differs between {fmt(s)} and {fmt(c)}")
        inside = hooks.within_boundary
        if inside is not None and inside(s) != inside(c):
            problem(f"within_boundary differs between {fmt(s)} and {fmt(c)}")
        if inside is None or inside(s):
            mine = frozenset(canonical[j] for j in edges[offsets[i] : offsets[i + 1]])
            if mine != successors_of(c):
                problem(f"successors differ up to symmetry between {fmt(s)} and {fmt(c)}")
    if set(reduced_run.states) != reps:
        problem(
            f"the reduced search reached {len(reduced_run.states)} representatives, "
            f"the full space has {len(reps)}"
        )
    if reduced is not None and reduced.represented not in (None, full.states):
        problem(f"orbits add up to {reduced.represented} states, the full space has {full.states}")
    return SymmetryAudit(full, reduced, len(reps), tuple(problems))
