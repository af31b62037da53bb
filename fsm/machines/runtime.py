"""Run a :class:`~fsm.machines.spec.MachineSpec` through the ``transitions`` library.

One ``transitions.Machine`` serves every instance of a machine: the guard stores each
instance's state as a plain string (a few bytes per tracked request instead of the
~4-6 KiB a ``transitions`` model object costs) and fires a trigger by restoring that
state on a single cursor model, triggering, and reading the state back. Invalid
triggers raise :class:`~fsm.machines.tables.InvalidTransition`, exactly like the compiled table;
``tests/core/test_tables_agree.py`` proves the two agree on every ``(state, trigger)`` pair.

Not thread-safe: one engine per guard, and a guard is driven from one task at a time.

Logging: ``transitions`` logs two INFO lines per fired trigger ("Finished processing
state ... callbacks"), which an application logging at INFO would receive for every
event its guard sees. Unless the application has set a level on the ``transitions``
logger itself, importing this module sets it to WARNING: its warnings and errors still
pass, its per-trigger chatter does not.
"""

from __future__ import annotations

import logging
from typing import Any

from transitions import Machine, MachineError

from fsm.machines.spec import MachineSpec
from fsm.machines.tables import InvalidTransition

_TRANSITIONS_LOG = logging.getLogger("transitions")
if _TRANSITIONS_LOG.level == logging.NOTSET:
    _TRANSITIONS_LOG.setLevel(logging.WARNING)


class _Cursor:
    """The one model object the shared machine drives."""

    state: str


class TransitionsMachine:
    """A ``transitions``-backed :class:`~fsm.machines.tables.Engine` for one declaration."""

    def __init__(self, spec: MachineSpec) -> None:
        self.spec = spec
        self._cursor = _Cursor()
        rows: list[dict[str, Any]] = [
            {"trigger": t.trigger, "source": t.source, "dest": t.dest} for t in spec.transitions
        ]
        self._machine = Machine(
            model=self._cursor,
            states=list(spec.states),
            transitions=rows,
            initial=spec.initial,
            auto_transitions=False,
            ignore_invalid_triggers=False,
        )

    @property
    def machine(self) -> Machine:
        """The underlying ``transitions.Machine`` (for inspection and diagrams)."""
        return self._machine

    def fire(self, state: str, trigger: str) -> str:
        if state not in self._machine.states:
            raise InvalidTransition(self.spec.name, state, trigger)
        self._machine.set_state(state, model=self._cursor)
        try:
            ok = self._cursor.trigger(trigger)  # type: ignore[attr-defined]
        except (MachineError, AttributeError):
            raise InvalidTransition(self.spec.name, state, trigger) from None
        if not ok:
            raise InvalidTransition(self.spec.name, state, trigger)
        return self._cursor.state

    def allows(self, state: str, trigger: str) -> bool:
        event = self._machine.events.get(trigger)
        return event is not None and state in event.transitions
