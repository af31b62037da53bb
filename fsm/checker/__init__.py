"""An explicit-state model checker: Stateright's API with TLC's semantics.

Write a model (see :class:`Model`, or subclass :class:`BaseModel`), list its properties with
:class:`Property` (``always``, ``sometimes``, ``deadlock``, ``terminates``) and run
``check(model)``. The :class:`Report` gives counts, a verdict per property, shortest
counterexamples (a :class:`Path`, or a :class:`Lasso` for termination), and coverage of the
declared transitions. Counterexamples replay by name with :func:`replay` and become pytest
modules with :meth:`Path.to_pytest`. From the shell: ``python -m fsm check models/foo.py``.

Example (a model file ``models/counter.py`` defining ``MODEL``, ``MODELS`` or ``model()``)::

    from fsm.checker import BaseModel, Property, check

    class Counter(BaseModel[int, str]):
        def init_states(self): return [0]
        def actions(self, n): return ["inc", "reset"]
        def next_state(self, n, action): return n + 1 if action == "inc" and n < 3 else 0
        def properties(self):
            return [Property.always("small", lambda n: n <= 3, "the counter stays below 4"),
                    Property.sometimes("three", lambda n: n == 3),
                    Property.terminates()]   # violated: "reset" loops back to 0

    MODEL = Counter()
    report = check(MODEL)          # report.format_text(), report.to_json()
    report.assert_violated("L1")   # a Lasso: prefix steps, then the loop

A model may declare a :class:`Symmetry` (interchangeable ids): the checker then explores one
representative state per orbit and still reports counterexamples as concrete paths of the
model; :func:`verify_symmetry` checks a declared symmetry against the full space.

Limits: exhaustive breadth-first search over the reachable states, all held in memory; no
partial-order reduction, no fairness (termination means "no reachable cycle"), no
``eventually``. A search stops at ``DEFAULT_MAX_STATES`` (2,000,000) distinct states unless
given another ``max_states`` (None: no bound) and warns when it holds over half the
machine's memory (:mod:`fsm.checker.explore`); a model that raises is reported with the
line of its own code that raised (:class:`ModelError`'s ``location``).

Writing a model of a client, from scratch: docs/models.md.
"""

from fsm.checker.explore import (
    Checker,
    CheckOptions,
    ModelError,
    check,
    cyclic_components,
    shortest_cycle,
)
from fsm.checker.loader import ModelLoadError, load_model, load_models, unload_models
from fsm.checker.model import BaseModel, Model, Symmetry
from fsm.checker.path import Lasso, Path, ReplayError, Step, replay
from fsm.checker.properties import Kind, Property, Verdict, find_property, violated_at
from fsm.checker.report import Coverage, Progress, PropertyResult, Report
from fsm.checker.symmetry import SymmetryAudit, verify_symmetry

__all__ = [
    "BaseModel",
    "CheckOptions",
    "Checker",
    "Coverage",
    "Kind",
    "Lasso",
    "Model",
    "ModelError",
    "ModelLoadError",
    "Path",
    "Progress",
    "Property",
    "PropertyResult",
    "ReplayError",
    "Report",
    "Step",
    "Symmetry",
    "SymmetryAudit",
    "Verdict",
    "check",
    "cyclic_components",
    "find_property",
    "load_model",
    "load_models",
    "replay",
    "shortest_cycle",
    "unload_models",
    "verify_symmetry",
    "violated_at",
]
