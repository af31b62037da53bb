"""Deprecated since 0.1.0, removed in 0.2.0: moved to :mod:`fsm.wire.rig`.

:func:`~fsm.wire.rig.run_scenario` takes the scenario as a step (the seed incident is
:func:`fsm.wire.scenarios.seed`); the other scenarios, ``SCENARIOS`` and
``run_progress_stream`` are the test bed's and no longer ship."""

from fsm._deprecate import moved_module

__getattr__ = moved_module(__name__, "fsm.wire.rig", "0.1.0")
