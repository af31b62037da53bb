"""Deprecated since 0.1.0, removed in 0.2.0: what ``fsm demo`` runs moved to :mod:`fsm.demo`
and :mod:`fsm.wire`.

Each module here reads its names from its new place, warning (``DeprecationWarning``):

- ``fsm.harness.server``, ``mrtr_server``, ``proxy``, ``serving``, ``sdk``: the modules
  of the same names in :mod:`fsm.wire`;
- ``fsm.harness.demo``: :mod:`fsm.demo.cli`; ``fsm.harness.mrtr_demo``:
  :mod:`fsm.demo.mrtr_scene`;
- ``fsm.harness.scenarios``: :mod:`fsm.wire.rig` (the seed incident:
  :mod:`fsm.wire.scenarios`).

The rest of the test bed (fastmcp clients, the TypeScript client's driver, the Redis
and gateway runners, the scenarios besides the seed incident) no longer ships: it is the
repository's ``tests/support``.
"""
