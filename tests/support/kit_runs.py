"""How the stateful tests build and run a conformance kit's machine (:mod:`fsm.testing`):
each kit by name over the library's own client, and every run derandomized with no example
database, so results do not depend on the machine or on earlier runs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import Phase, settings
from hypothesis.stateful import run_state_machine_as_test

from fsm import mrtr, tasks
from fsm.testing import (
    ConformanceFailure,
    conformance_machine,
    guard_factory,
    kit_settings,
    mrtr_conformance_machine,
    tasks_conformance_machine,
)

__all__ = ["FIRST_BUG", "FIXED", "KITS", "first_failure"]

KITS: dict[str, Callable[..., type[Any]]] = {
    "sse": lambda **kw: conformance_machine(guard_factory("tables"), **kw),
    "mrtr": lambda **kw: mrtr_conformance_machine(
        lambda clock: mrtr.MrtrCall("call", clock=clock), **kw
    ),
    "tasks": lambda **kw: tasks_conformance_machine(
        lambda clock: tasks.TaskCall("task", clock=clock), **kw
    ),
}
"""Each kit by name: its machine factory, over the library's own client, taking the kit's
keyword arguments (``check``, the bounds)."""

FIXED = settings(kit_settings("fsm-fast"), derandomize=True, database=None)
"""The kits' fast profile, derandomized, no example database."""

FIRST_BUG = settings(
    FIXED, report_multiple_bugs=False, phases=[p for p in Phase if p is not Phase.explain]
)
"""As :data:`FIXED`, stopping at the first bug found (shrunk, not explained)."""


def first_failure(machine: Any) -> ConformanceFailure:
    """The failure a run of the kit's state ``machine`` ends with (none fails the test)."""
    with pytest.raises(ConformanceFailure) as info:
        run_state_machine_as_test(machine, settings=FIRST_BUG)
    return info.value
